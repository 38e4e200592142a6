/**
 * Generates every Prisma client in the workspace, offline. First it writes, beside each
 * schema.prisma, the models of the tables its packages own (`PACKAGE_TABLES` in the project's
 * src/tables.ts: the inbox's, the outbox's) as idem-packages.prisma, and generates from the
 * whole folder.
 *
 * `prisma generate` never runs the schema engine, but Prisma checks that the engine binary
 * exists and tries to download it when it does not. That download cannot succeed on an
 * offline machine or in a network-less container build, so when no engine is installed we
 * point PRISMA_SCHEMA_ENGINE_BINARY at a placeholder file. Migrations never need the engine:
 * they are applied by @idem/database.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, writeFileSync } from 'node:fs';
import { packageModels, type TableSet } from '@idem/database';
import { tmpdir } from 'node:os';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');

function schemaEngineEnv(): NodeJS.ProcessEnv {
  if (process.env.PRISMA_SCHEMA_ENGINE_BINARY) return process.env;
  const enginesDir = join(root, 'node_modules/@prisma/engines');
  const installed = existsSync(enginesDir) && readdirSync(enginesDir).some((f) => f.startsWith('schema-engine'));
  if (installed) return process.env;
  const placeholder = join(mkdtempSync(join(tmpdir(), 'idem-prisma-')), 'schema-engine-placeholder');
  writeFileSync(placeholder, '');
  return { ...process.env, PRISMA_SCHEMA_ENGINE_BINARY: placeholder };
}

const schemas = ['packages', 'services'].flatMap((group) =>
  readdirSync(join(root, group))
    .map((name) => join(group, name, 'prisma/schema.prisma'))
    .filter((schema) => existsSync(join(root, schema))),
);
const env = schemaEngineEnv();
for (const schema of schemas.sort()) {
  const projectDir = join(root, dirname(dirname(schema)));
  console.log(`prisma generate: ${relative(root, projectDir)}`);
  const tables = join(projectDir, 'src/tables.ts');
  const { PACKAGE_TABLES } = existsSync(tables)
    ? ((await import(tables)) as { PACKAGE_TABLES: readonly TableSet[] })
    : { PACKAGE_TABLES: [] };
  writeFileSync(join(projectDir, 'prisma/idem-packages.prisma'), packageModels(PACKAGE_TABLES));
  execFileSync(join(root, 'node_modules/.bin/prisma'), ['generate', '--schema', 'prisma'], {
    cwd: projectDir,
    env,
    stdio: ['ignore', 'ignore', 'inherit'],
  });
}
