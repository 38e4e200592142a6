/**
 * `pnpm new service <name>`: a service with the anatomy every idem service has (docs/extending.md
 * "The anatomy of a service"), its registry entry, and its entries in every file that lists services.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { SERVICE_REGISTRY } from '@idem/shop';
import { create, insert, pascal, root, ScaffoldError } from './edit.js';
import { addToInfrastructure } from './infrastructure.js';

/** Lower-case letters only: the name is also a database, a role, a queue prefix and `<NAME>_…` variables. */
const SERVICE_NAME = /^[a-z]{2,30}$/;

export function newService(name: string): void {
  if (!SERVICE_NAME.test(name)) throw new ScaffoldError(`"${name}": a service name is 2 to 30 lower-case letters`);
  if (name in SERVICE_REGISTRY) throw new ScaffoldError(`"${name}" is a service already`);
  const port = Math.max(...Object.values(SERVICE_REGISTRY).map((s) => s.port)) + 1;
  const Name = pascal(name);
  const dir = `services/${name}`;

  console.log(`new service ${name} (port ${port})`);
  create(`${dir}/package.json`, packageJson(name));
  create(`${dir}/prisma.config.ts`, prismaConfig(name));
  create(`${dir}/prisma/schema.prisma`, schema(name));
  create(
    `${dir}/prisma/migrations/migration_lock.toml`,
    readFileSync(join(root, 'services/orders/prisma/migrations/migration_lock.toml'), 'utf8'),
  );
  create(`${dir}/src/main.ts`, main(name, Name));
  create(`${dir}/src/service.ts`, service(name, Name));
  create(`${dir}/src/config.ts`, config(name, Name, port));
  create(`${dir}/src/db.ts`, db());
  create(`${dir}/src/tables.ts`, tables());
  create(`${dir}/src/migrate.ts`, migrate(name));
  for (const [layer, text] of Object.entries(LAYERS)) create(`${dir}/src/${layer}/README.md`, text(name));
  create(`${dir}/src/prisma/schema.int.spec.ts`, schemaSpec(name));
  create(`${dir}/src/${name}.int.spec.ts`, serviceSpec(name, Name));

  insert('packages/shop/src/services.ts', 'before', '} as const;', `  ${name}: { port: ${port} },`);
  addToInfrastructure(name, port);
  console.log(`
next:
  pnpm install                  # links @idem/${name} and generates its Prisma client
  pnpm k8s:generate             # its Kubernetes manifests
  pnpm new consumer ${name} <contract>
  pnpm test ${dir}`);
}

/**
 * The layers every service has (docs/extending.md "The anatomy of a service"), each with what
 * belongs in it and the rule that keeps it so: a new service's folders say where its code goes
 * before it has any. `pnpm new consumer` writes into application/ and consumers/.
 */
const LAYERS: Record<string, (name: string) => string> = {
  domain: (name) => `# ${name}: domain

Pure decisions: state machines, what a message means for the ${name}'s state, key minting, event
versions. Nothing here reads a database, a broker or HTTP, or imports another folder of the
service: \`pnpm lint\` refuses it (\`domain-is-pure\` in .dependency-cruiser.mjs). Unit-test it
beside its file (\`*.unit.spec.ts\`).
`,
  application: (name) => `# ${name}: application

Use cases: what happens, in the transaction they are given (a consumer's inbox transaction) or
open (a route's), with their outbox events in that same transaction. A use case returns what
happened; it never speaks HTTP and never imports consumers/, http/ or workers/ (\`pnpm lint\`).
Its SQL lives here, behind its functions. \`pnpm new consumer ${name} <contract>\` writes one.
`,
  consumers: (name) => `# ${name}: consumers

One file per consumer name (\`${name}.<event>.v<n>\`), each holding its handler: a thin adapter
that unpacks the message, calls one use case of application/ with the inbox's transaction, and
turns its answer into an outcome (\`processed\`, \`stale\`, a failure). A consumer never writes
(no \`tx.…\` of its own, no \`enqueue\`) and never imports another consumer (\`pnpm lint\`).
\`pnpm new consumer ${name} <contract>\` writes one, with its tests.
`,
  http: (name) => `# ${name}: http

Routes: parse the request, call a use case, say its result in HTTP (status codes and problem
types live here only). The runtime already serves \`/health\`, \`/metrics\`, \`/openapi.json\` and
the operator's \`/dead-letters\`; the service's own routes go in \`routes.ts\`, given to
\`api(name, routes)\` in service.ts (docs/extending.md "6. Its API").
`,
};

/** The versions the other services use, so a new one depends on exactly the same. */
function versionsInUse(): Record<string, string> {
  const versions: Record<string, string> = {};
  for (const service of readdirSync(join(root, 'services'))) {
    try {
      const manifest = JSON.parse(readFileSync(join(root, 'services', service, 'package.json'), 'utf8')) as {
        dependencies?: Record<string, string>;
        devDependencies?: Record<string, string>;
      };
      Object.assign(versions, manifest.devDependencies, manifest.dependencies);
    } catch {
      // not a package
    }
  }
  return versions;
}

function packageJson(name: string): string {
  const versions = versionsInUse();
  const pick = (names: string[]) =>
    Object.fromEntries(
      names.map((dependency) => {
        const version = versions[dependency];
        if (!version) throw new ScaffoldError(`no service depends on ${dependency} yet: cannot tell its version`);
        return [dependency, version];
      }),
    );
  const idem = [
    'contracts',
    'database',
    'faults',
    'http',
    'inbox',
    'messaging',
    'observability',
    'outbox',
    'runtime',
    'shop',
  ];
  return `${JSON.stringify(
    {
      name: `@idem/${name}`,
      version: '0.1.0',
      private: true,
      type: 'module',
      scripts: {
        migrate: 'tsx --conditions=development src/migrate.ts',
        start: 'tsx --conditions=development src/main.ts',
      },
      dependencies: {
        ...Object.fromEntries(idem.map((p) => [`@idem/${p}`, 'workspace:*'])),
        ...pick(['@prisma/adapter-pg', '@prisma/client', 'express', 'zod']),
      },
      devDependencies: { '@idem/testkit': 'workspace:*', ...pick(['@types/express', 'ioredis']) },
    },
    null,
    2,
  )}\n`;
}

const prismaConfig = (name: string) => `import { defineConfig } from 'prisma/config';

// For the Prisma CLI (generate, and migrate where its engine is available). The service itself
// reads DATABASE_URL in src/config.ts.
export default defineConfig({
  // The folder: schema.prisma and the package models \`pnpm generate\` writes beside it.
  schema: 'prisma',
  migrations: { path: 'prisma/migrations' },
  datasource: { url: process.env.DATABASE_URL ?? 'postgresql://postgres@127.0.0.1:5432/${name}' },
});
`;

const schema = (
  name: string,
) => `// The ${name} service's database. Migrations are hand-written in Prisma's layout and applied by
// @idem/database (see docs/operations.md "Databases and migrations"); src/prisma/schema.int.spec.ts proves
// they match this file. The tables of the packages it uses (src/tables.ts) come from those
// packages: \`pnpm generate\` writes their models beside this file (idem-packages.prisma).

generator client {
  provider            = "prisma-client"
  output              = "../src/generated/prisma"
  moduleFormat        = "esm"
  importFileExtension = "js"
}

datasource db {
  provider = "postgresql"
}
`;

const main = (
  name: string,
  Name: string,
) => `// ${name}: the process. Entrypoint of the container and of the native run; the composition
// root is service.ts. Tracing, when configured, was started before this module by the
// instrumentation entry (\`node --import …/instrumentation\`), so that everything imported here
// is instrumented.
import { runningTelemetry } from '@idem/observability';
import { createLogger, stopOnSignal } from '@idem/runtime';
import { loadConfig } from './config.js';
import { start${Name} } from './service.js';

const config = loadConfig();
const running = await start${Name}(config);
stopOnSignal(
  async () => {
    await running.stop();
    await runningTelemetry().shutdown();
  },
  createLogger('${name}', config.LOG_LEVEL),
);
`;

const service = (name: string, Name: string) => `import { faultsFromEnv, type Faults } from '@idem/faults';
import { shop } from '@idem/shop';
import { createLogger, faultSwitches, runService, type RunningService } from '@idem/runtime';
import type { ${Name}Config } from './config.js';
import { connectDatabase, type PrismaClient } from './db.js';

/** Builds and starts the ${name} service: the composition root, shared by main.ts and tests. */
export async function start${Name}(
  config: ${Name}Config,
  { faults = faultsFromEnv(), now = () => new Date() }: { faults?: Faults; now?: () => Date } = {},
): Promise<RunningService & { db: PrismaClient }> {
  const log = createLogger('${name}', config.LOG_LEVEL);
  const db = connectDatabase(config.DATABASE_URL, config.DATABASE_POOL_MAX);
  const running = await runService({
    name: '${name}',
    catalogue: shop,
    config,
    log,
    db,
    faults,
    now,
    consumers: {
      // \`pnpm new consumer ${name} <contract>\` adds each consumer here.
    },
    outbox: true,
    parts: [
      // What else it runs: its API, a worker of its own, gauges.
      faultSwitches(),
    ],
  });
  return { ...running, db };
}
`;

const config = (
  name: string,
  Name: string,
  port: number,
) => `import { baseConfigSchema, parseConfig } from '@idem/runtime';

export const configSchema = baseConfigSchema('${name}', ${port});
export type ${Name}Config = ReturnType<typeof loadConfig>;

export function loadConfig(env: NodeJS.ProcessEnv = process.env) {
  return parseConfig(configSchema, env);
}
`;

const db = () => `import { preparingStatements, runningAfterCommit } from '@idem/database';
import { PrismaPg } from '@prisma/adapter-pg';
import { PrismaClient, type Prisma } from './generated/prisma/client.js';

export { PrismaClient };
/** The transaction client handlers receive from the inbox. */
export type Tx = Prisma.TransactionClient;

/**
 * The service's client: its statements prepared on each connection (@idem/database
 * prepared-statements.ts), and what a transaction leaves to do after its commit done right then
 * (the outbox's handoff).
 */
export function connectDatabase(databaseUrl: string, poolMax?: number): PrismaClient {
  return runningAfterCommit(
    new PrismaClient({
      adapter: new PrismaPg({ connectionString: databaseUrl, max: poolMax }, preparingStatements()),
    }),
  );
}
`;

const tables = () => `import type { TableSet } from '@idem/database';
import { aggregateVersionTables, inboxTables } from '@idem/inbox';
import { outboxTables } from '@idem/outbox';

/**
 * The tables the packages this service uses own in its database. \`migrate\` applies their
 * migrations beside the service's own; \`pnpm generate\` adds their models to its Prisma schema.
 */
export const PACKAGE_TABLES: readonly TableSet[] = [inboxTables, aggregateVersionTables, outboxTables];
`;

const migrate = (
  name: string,
) => `// Applies the ${name} service's migrations to DATABASE_URL (creating the database if needed), as the
// role that owns it; DATABASE_RUNTIME_ROLE, when set, is the role the service runs as.
// The native run and the docker compose \`migrate\` service both run this entrypoint.
import { fileURLToPath } from 'node:url';
import { migrate } from '@idem/database';
import { PACKAGE_TABLES } from './tables.js';

const databaseUrl = process.env.DATABASE_URL ?? 'postgresql://postgres@127.0.0.1:5432/${name}';
const migrationsDir = fileURLToPath(new URL('../prisma/migrations', import.meta.url));

const applied = await migrate({
  databaseUrl,
  migrationsDir,
  include: PACKAGE_TABLES,
  // The role the service runs as: data, never schema (docs/operations.md, "Database roles").
  runtimeRole: process.env.DATABASE_RUNTIME_ROLE || undefined,
  log: (line) => console.log(\`${name}: \${line}\`),
});
console.log(\`${name}: database up to date (\${applied.length} migration(s) applied)\`);
`;

const schemaSpec = (name: string) => `import { fileURLToPath } from 'node:url';
import { schemaDriftOf } from '@idem/testkit';
import { describe, expect, it } from 'vitest';
import { PACKAGE_TABLES } from '../tables.js';

describe('${name} database', () => {
  it("is migrated to exactly the tables, columns, keys and indexes of schema.prisma and its packages' models", async () => {
    expect(await schemaDriftOf(fileURLToPath(new URL('../..', import.meta.url)), PACKAGE_TABLES)).toEqual([]);
  });
});
`;

const serviceSpec = (
  name: string,
  Name: string,
) => `import { deleteQueues, serviceDatabase, uniqueName } from '@idem/testkit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from './config.js';
import { connectDatabase } from './db.js';
import { start${Name} } from './service.js';
import { PACKAGE_TABLES } from './tables.js';

const ADMIN_TOKEN = 'test-admin-token-0123456789';
const database = serviceDatabase('${name}', {
  root: new URL('../', import.meta.url),
  tables: PACKAGE_TABLES,
  connect: connectDatabase,
  hooks: { beforeAll, afterAll },
});
let service: Awaited<ReturnType<typeof start${Name}>>;
const prefix = uniqueName('idem_test_${name}');

beforeAll(async () => {
  service = await start${Name}(
    loadConfig({ DATABASE_URL: database.url, IDEM_QUEUE_PREFIX: prefix, PORT: '0', ADMIN_TOKEN, LOG_LEVEL: 'silent' }),
  );
});
afterAll(async () => {
  await service.stop();
  await deleteQueues(prefix);
});

const get = (path: string, token?: string) =>
  fetch(\`http://127.0.0.1:\${service.http.port}\${path}\`, token ? { headers: { authorization: \`Bearer \${token}\` } } : {});

describe('${name} service', () => {
  it('is healthy once started: its database and Redis answer', async () => {
    expect((await get('/health')).status).toBe(200);
  });

  it("describes its API in OpenAPI, the operator's dead letters included", async () => {
    const spec = (await (await get('/openapi.json')).json()) as { paths: Record<string, unknown> };
    expect(Object.keys(spec.paths)).toContain('/dead-letters');
  });

  it('keeps its dead letters for the operator only', async () => {
    expect((await get('/dead-letters')).status).toBe(401);
    expect((await get('/dead-letters', ADMIN_TOKEN)).status).toBe(200);
  });
});
`;
