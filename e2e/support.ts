import { randomBytes, randomInt } from 'node:crypto';
import { createWriteStream } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { runChecks, type CheckerOptions, type Report } from '@idem/checker';
import { dropDatabase, readOnly } from '@idem/database';
import {
  QUICK_TAKEOVER_ENV,
  UNLIMITED_ORDERS_ENV,
  startSystem,
  SERVICES,
  type RunningSystem,
  type SystemOptions,
} from '@idem/native-run';
import { SIMULATOR_API_KEY } from '@idem/stripe-sim';
import { exited } from '@idem/testkit';
import type pg from 'pg';

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
    // Every port stays below Linux's ephemeral range (32768+), where outgoing connections take theirs.
    portOffset: randomInt(8_000, 20_000),
    env: {
      LOG_LEVEL: 'info',
      // An operator token of its own: payments and e-mails are operator reads (system.adminToken).
      ADMIN_TOKEN: randomBytes(16).toString('hex'),
      ...QUICK_TAKEOVER_ENV,
      ...UNLIMITED_ORDERS_ENV,
      ...options.env,
    },
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

/** Resolves with what ended a process: its signal, or its exit code. */
/**
 * Stops one part of the system (SIGTERM) and starts it again with `env` added; once it is
 * healthy, returns the promise of its end.
 */
export async function restartPart(
  system: RunningSystem,
  part: string,
  env: Record<string, string> = {},
): Promise<{ exited: Promise<NodeJS.Signals | number | null> }> {
  const running = system.processes.get(part)!;
  const stopped = exited(running);
  running.kill('SIGTERM');
  await stopped;
  await system.restart(part, env);
  return { exited: exited(system.processes.get(part)!) };
}

/** Restarts one part with fault switches on (a crash fault then SIGKILLs it; restart it plainly after). */
export function restartWithFaults(system: RunningSystem, part: string, faults: string) {
  return restartPart(system, part, { IDEM_FAULTS_ENABLED: '1', IDEM_FAULTS: faults });
}

/** Rows from a service's database, read-only: how the black-box tests look inside. */
export function readRows<R extends pg.QueryResultRow>(
  databaseUrl: string,
  sql: string,
  params: unknown[] = [],
): Promise<R[]> {
  return readOnly(databaseUrl, (query) => query<R>(sql, params));
}

/** The system's Stripe simulator, as the checker and the tests read it (it takes any key). */
export function stripeOf(system: RunningSystem): CheckerOptions['stripe'] {
  return { apiBase: system.urls.stripe, apiKey: SIMULATOR_API_KEY };
}

/** The exactly-once checker against the system, counting what was published over 5 s ago. */
export function checkSystem(system: RunningSystem, options: Partial<CheckerOptions> = {}): Promise<Report> {
  return runChecks({
    databaseUrls: system.databaseUrls,
    stripe: stripeOf(system),
    mailApi: system.urls.mail,
    settleWindowMs: 5_000,
    ...options,
  });
}
