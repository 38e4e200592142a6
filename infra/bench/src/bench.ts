import { mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { cpus, release, totalmem } from 'node:os';
import { dirname, join, relative } from 'node:path';
import { dropDatabase, migrate } from '@idem/database';
import { postgresServerUrl, redisUrl, testkitPrismaDir, testkitTables, uniqueName } from '@idem/testkit';
import { Redis } from 'ioredis';
import pg from 'pg';
import {
  dropReplicationSlots,
  pgbenchVersion,
  prepareConsumerDatabase,
  runConsumerCost,
  type ConsumerVariant,
} from './consumer-cost.js';
import { runBroker } from './broker.js';
import { runEmailDrain } from './email-drain.js';
import { runEndToEnd } from './end-to-end.js';
import { runGrowth } from './growth.js';
import { profileEndToEnd } from './profile.js';
import { runRelay } from './relay.js';
import { evaluateTargets, formatChart, formatMarkdown, formatTargets, type BenchRun, type Target } from './report.js';

export const SECTIONS = ['consumer', 'relay', 'e2e', 'growth', 'profile', 'broker', 'emails'] as const;
export type Section = (typeof SECTIONS)[number];

export interface BenchOptions {
  /** Tiny sizes, one repetition: proves the harness runs (CI smoke), measures little. */
  readonly quick?: boolean;
  /** Where benchmarks.md, benchmarks/end-to-end.svg and benchmarks/runs/<time>.json go. */
  readonly out: string;
  readonly sections?: readonly Section[];
  /** Section 4's table sizes instead of the run's (`--growth-sizes 1000000,10000000`). */
  readonly growthSizes?: readonly number[];
  readonly log?: (line: string) => void;
}

export interface BenchResult {
  readonly run: BenchRun;
  readonly targets: Target[];
  readonly files: { readonly json: string; readonly markdown: string; readonly chart?: string };
}

/** The sizes of a default run (under 15 minutes on 2 cores) and of a quick one (under 2). */
function settingsFor(quick: boolean) {
  return quick
    ? {
        concurrencies: [1, 8],
        repetitions: 1,
        messagesAtOne: 60,
        messages: 150,
        relayRows: 300,
        loads: [5, 10],
        stepSeconds: 5,
        drainSeconds: 30,
        growthSizes: [1_000, 5_000],
        growthInserts: 200,
        profile: { offered: 5, seconds: 5 },
        broker: { offered: 5, stepSeconds: 5, relayRows: 200, transportDeliveries: 1_000 },
        emails: 300,
      }
    : {
        concurrencies: [1, 8, 32],
        repetitions: 3,
        messagesAtOne: 600,
        messages: 2_000,
        relayRows: 5_000,
        loads: [10, 20, 30, 40, 60, 100, 200, 400],
        stepSeconds: 30,
        drainSeconds: 45,
        growthSizes: [10_000, 100_000, 1_000_000],
        growthInserts: 2_000,
        profile: { offered: 20, seconds: 30 },
        broker: { offered: 20, stepSeconds: 20, relayRows: 2_000, transportDeliveries: 20_000 },
        emails: 3_000,
      };
}

export async function runBench(options: BenchOptions): Promise<BenchResult> {
  const quick = options.quick ?? false;
  const log = options.log ?? ((line: string) => console.log(line));
  const sections = new Set(options.sections ?? SECTIONS);
  const settings = settingsFor(quick);
  const startedAt = new Date().toISOString();
  const name = uniqueName('idem_bench').toLowerCase();
  const databaseUrl = `${postgresServerUrl}/${name}`;
  await migrate({ databaseUrl, migrationsDir: join(testkitPrismaDir, 'migrations'), include: testkitTables });

  const variants: ConsumerVariant[] = ['a', 's', 'j', 'b', 'c', 'd', 'e'];
  const pgbench = await pgbenchVersion();
  if (sections.has('consumer') && !pgbench) {
    log('pgbench is not installed (it comes with the PostgreSQL server packages): variant (d) is left out');
    variants.splice(variants.indexOf('d'), 1);
  }

  let run: BenchRun;
  try {
    const machine = { ...(await describeMachine(databaseUrl)), pgbench: pgbench ?? 'not installed' };
    let consumerCost, relay, endToEnd, growth, profile, broker, emailDrain;
    if (sections.has('consumer')) {
      log('\n1. consumer cost');
      const { logicalReplication } = await prepareConsumerDatabase(databaseUrl);
      if (logicalReplication) variants.push('f');
      else log("wal_level is not logical: variant (f), the peer's replication listener, is left out");
      consumerCost = await runConsumerCost({
        databaseUrl,
        redisUrl,
        queuePrefix: name,
        concurrencies: settings.concurrencies,
        repetitions: settings.repetitions,
        messages: (c) => (c === 1 ? settings.messagesAtOne : settings.messages),
        variants,
        log,
      });
    }
    if (sections.has('relay')) {
      log('\n2. relay');
      relay = await runRelay({
        databaseUrl,
        redisUrl,
        queuePrefix: `${name}_relay`,
        rows: settings.relayRows,
        repetitions: settings.repetitions,
        log,
      });
    }
    if (sections.has('e2e')) {
      log('\n3. end to end');
      endToEnd = await runEndToEnd({
        loads: settings.loads,
        stepSeconds: settings.stepSeconds,
        drainSeconds: settings.drainSeconds,
        portOffset: 600,
        log,
      });
    }
    if (sections.has('growth')) {
      log('\n4. growth of processed_messages');
      growth = await runGrowth({
        databaseUrl,
        sizes: options.growthSizes ?? settings.growthSizes,
        inserts: settings.growthInserts,
        log,
      });
    }
    if (sections.has('profile')) {
      log('\n5. where the CPU of an order goes');
      const { offered, seconds } = settings.profile;
      profile = { offered, ...(await profileEndToEnd({ offered, seconds, portOffset: 700, log })) };
    }
    if (sections.has('broker')) {
      log('\n6. the broker: one Redis against a Redis Cluster');
      broker = await runBroker({
        databaseUrl,
        ...settings.broker,
        drainSeconds: settings.drainSeconds,
        repetitions: settings.repetitions,
        log,
      });
    }
    if (sections.has('emails')) {
      log(`\n7. a backlog of ${settings.emails.toLocaleString('en')} e-mails against the SMTP sink`);
      emailDrain = await runEmailDrain({ emails: settings.emails, repetitions: settings.repetitions, log });
    }
    run = {
      startedAt,
      finishedAt: new Date().toISOString(),
      quick,
      machine,
      settings,
      consumerCost,
      relay,
      endToEnd,
      growth,
      profile,
      broker,
      emailDrain,
    };
  } finally {
    await dropWhenIdle(databaseUrl, log);
  }

  const targets = evaluateTargets(run);
  log(`\nTargets\n${formatTargets(targets)}`);
  return { run, targets, files: writeResults(run, targets, options.out) };
}

/** Renders benchmarks.md and the chart again from a run's JSON (e.g. after the report changed). */
export function renderRun(jsonFile: string, out: string): BenchResult['files'] {
  const run = JSON.parse(readFileSync(jsonFile, 'utf8')) as BenchRun;
  return writeResults(run, evaluateTargets(run), out, false);
}

/**
 * Drops the bench database once every client of this run has closed its connections: a
 * forced drop terminates connections, and a pool that is still closing would see that as an
 * error.
 */
async function dropWhenIdle(databaseUrl: string, log: (line: string) => void): Promise<void> {
  const client = new pg.Client({ connectionString: databaseUrl });
  await client.connect();
  try {
    for (let attempt = 0; attempt < 50; attempt++) {
      const { rows } = await client.query<{ n: number }>(
        'SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()',
      );
      if (rows[0]!.n === 0) break;
      if (attempt === 49) log(`${rows[0]!.n} connections to the bench database are still open; dropping it anyway`);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    await dropReplicationSlots(client);
  } finally {
    await client.end();
  }
  await dropDatabase(databaseUrl);
}

function writeResults(run: BenchRun, targets: Target[], out: string, withJson = true): BenchResult['files'] {
  const json = join(out, 'benchmarks', 'runs', `${run.startedAt.replace(/[:.]/g, '-')}.json`);
  const markdown = join(out, 'benchmarks.md');
  mkdirSync(dirname(json), { recursive: true });
  if (withJson) writeFileSync(json, JSON.stringify({ ...run, targets }, null, 2) + '\n');
  let chart: string | undefined;
  if (run.endToEnd?.steps.length) {
    chart = join(out, 'benchmarks', 'end-to-end.svg');
    writeFileSync(chart, formatChart(run.endToEnd) + '\n');
  }
  writeFileSync(
    markdown,
    formatMarkdown(run, targets, chart && relative(dirname(markdown), chart), previousRun(run, json)),
  );
  return { json, markdown, chart };
}

/** The newest full run saved before this one beside it, for the before-and-after table. */
function previousRun(run: BenchRun, json: string): BenchRun | undefined {
  const earlier = readdirSync(dirname(json))
    .filter((name) => name.endsWith('.json') && join(dirname(json), name) !== json)
    .map((name) => JSON.parse(readFileSync(join(dirname(json), name), 'utf8')) as BenchRun)
    .filter((candidate) => !candidate.quick && candidate.startedAt < run.startedAt && candidate.endToEnd)
    .sort((a, b) => a.startedAt.localeCompare(b.startedAt));
  return earlier.at(-1);
}

async function describeMachine(databaseUrl: string): Promise<Record<string, string>> {
  const client = new pg.Client({ connectionString: databaseUrl });
  await client.connect();
  const setting = async (name: string) =>
    (await client.query<{ setting: string }>('SELECT current_setting($1) AS setting', [name])).rows[0]!.setting;
  const redis = new Redis(redisUrl);
  try {
    const info = await redis.info('server');
    const require = createRequire(import.meta.url);
    const versionOf = (pkg: string) => {
      let dir = dirname(require.resolve(pkg));
      while (dir !== dirname(dir)) {
        try {
          const manifest = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')) as {
            name?: string;
            version: string;
          };
          if (manifest.name === pkg) return manifest.version;
        } catch {
          // not here; go up
        }
        dir = dirname(dir);
      }
      return 'unknown';
    };
    return {
      CPU: `${cpus().length} × ${cpus()[0]?.model ?? 'unknown'}`,
      memory: `${Math.round(totalmem() / 2 ** 30)} GiB`,
      kernel: release(),
      Node: process.version,
      PostgreSQL: `${await setting('server_version')} (synchronous_commit=${await setting('synchronous_commit')}, wal_level=${await setting('wal_level')}, shared_buffers=${await setting('shared_buffers')})`,
      Redis: /redis_version:(\S+)/.exec(info)?.[1] ?? 'unknown',
      packages: ['bullmq', 'ioredis', 'pg', '@prisma/client', '@prisma/adapter-pg', 'pg-transactional-outbox']
        .map((pkg) => `${pkg} ${versionOf(pkg)}`)
        .join(', '),
    };
  } finally {
    redis.disconnect();
    await client.end();
  }
}
