import { randomInt } from 'node:crypto';
import { createWriteStream } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { dropDatabase } from '@idem/database';
import { startSystem, SERVICES, type RunningSystem, type SystemOptions } from '@idem/native-run';

/**
 * Starts the whole system as real processes (the native run), isolated from any other run:
 * its own databases, queue prefix and ports. stop() also drops the databases.
 */
export async function startIsolatedSystem(
  options: Omit<SystemOptions, 'name' | 'portOffset'> = {},
): Promise<RunningSystem> {
  const name = `e2e_${Date.now().toString(36)}_${randomInt(1000)}`;
  // The processes' output goes to a file (its path is printed) instead of flooding the run.
  const logFile = join(tmpdir(), `idem-${name}.log`);
  const log = createWriteStream(logFile);
  console.log(`e2e system ${name}: process logs in ${logFile}`);
  const system = await startSystem({
    ...options,
    name,
    portOffset: randomInt(20_000, 50_000),
    env: { LOG_LEVEL: 'info', CONSUMER_STALLED_INTERVAL_MS: '1000', CONSUMER_LOCK_MS: '5000', ...options.env },
    log: (part, line) => void log.write(`${part.padEnd(13)}| ${line}\n`),
  });
  return {
    ...system,
    async stop() {
      await system.stop();
      await Promise.all(SERVICES.map((service) => dropDatabase(system.databaseUrls[service])));
      log.end();
    },
  };
}
