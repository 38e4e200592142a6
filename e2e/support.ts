import { randomInt } from 'node:crypto';
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
  const lines: string[] = [];
  const system = await startSystem({
    ...options,
    name,
    portOffset: randomInt(20_000, 50_000),
    env: { LOG_LEVEL: 'warn', CONSUMER_STALLED_INTERVAL_MS: '1000', CONSUMER_LOCK_MS: '5000', ...options.env },
    // Keep the processes' output for a failing test's report instead of flooding the run.
    log: (_process, line) => void (lines.push(line) > 2000 && lines.shift()),
  });
  return {
    ...system,
    async stop() {
      await system.stop();
      await Promise.all(SERVICES.map((service) => dropDatabase(system.databaseUrls[service])));
      if (process.env.IDEM_E2E_LOGS) console.log(lines.join('\n'));
    },
  };
}
