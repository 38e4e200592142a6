/**
 * Generates every Prisma client in the workspace, offline.
 *
 * `prisma generate` never runs the schema engine, but Prisma checks that the engine binary
 * exists and tries to download it when it does not. That download cannot succeed on an
 * offline machine or in a network-less container build, so when no engine is installed we
 * point PRISMA_SCHEMA_ENGINE_BINARY at a placeholder file. Migrations never need the engine:
 * they are applied by @idem/database.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, writeFileSync } from 'node:fs';
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
  execFileSync(join(root, 'node_modules/.bin/prisma'), ['generate', '--schema', 'prisma/schema.prisma'], {
    cwd: projectDir,
    env,
    stdio: ['ignore', 'ignore', 'inherit'],
  });
}
