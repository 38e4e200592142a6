import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { postgresServerUrl, redisUrl } from '@idem/testkit';
import { describe, expect, it } from 'vitest';
import { unreachablePrerequisites } from './prerequisites.js';

const root = fileURLToPath(new URL('../../../', import.meta.url));
const dead = {
  postgres: { url: 'postgresql://postgres:hunter2-secret@127.0.0.1:1', variable: 'POSTGRES_URL' },
  redis: { url: 'redis://:hunter2-secret@127.0.0.1:2', variable: 'REDIS_URL' },
};

/** Runs a command as a person would, with `env` on top of this one's (less vitest's own). */
function run(args: string[], env: Record<string, string>) {
  const base = Object.fromEntries(Object.entries(process.env).filter(([name]) => !name.startsWith('VITEST')));
  const child = spawn(process.execPath, args, {
    cwd: root,
    env: { ...base, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  for (const stream of [child.stdout, child.stderr]) stream.on('data', (chunk: Buffer) => (output += chunk.toString()));
  return new Promise<{ code: number | null; output: string }>((resolve) =>
    child.once('exit', (code) => resolve({ code, output })),
  );
}

describe('PostgreSQL and Redis, checked before anything needs them', () => {
  it('finds nothing missing when both answer', async () => {
    expect(
      await unreachablePrerequisites({
        postgres: { url: postgresServerUrl, variable: 'TEST_POSTGRES_URL' },
        redis: { url: redisUrl, variable: 'REDIS_URL' },
      }),
    ).toBeUndefined();
  });

  it('names each server that does not answer, where, and the ways to get it, without its password', async () => {
    const message = await unreachablePrerequisites(dead);
    expect(message).toContain('PostgreSQL at 127.0.0.1:1 (POSTGRES_URL): nothing listens there (ECONNREFUSED)');
    expect(message).toContain('Redis at 127.0.0.1:2 (REDIS_URL): nothing listens there (ECONNREFUSED)');
    expect(message).toContain('apt-get install -y postgresql redis-server');
    expect(message).toContain('docker compose up -d postgres redis');
    expect(message).not.toContain('hunter2');
  });

  it('stops `pnpm start` with that message and no stack trace', async () => {
    const { code, output } = await run(
      ['--conditions=development', '--import', 'tsx', 'infra/native-run/src/main.ts'],
      {
        POSTGRES_URL: dead.postgres.url,
        REDIS_URL: dead.redis.url,
      },
    );
    expect(code).toBe(1);
    expect(output).toContain('idem needs PostgreSQL and Redis on this machine, and cannot reach:');
    expect(output).not.toMatch(/^\s+at /m);
  }, 30_000);

  it('stops `pnpm test` with that message and no stack trace where a tier needs the servers', async () => {
    const { code, output } = await run(
      ['node_modules/vitest/vitest.mjs', 'run', '--project', 'int', 'infra/native-run/src/databases.int.spec.ts'],
      { TEST_POSTGRES_URL: dead.postgres.url, REDIS_URL: dead.redis.url },
    );
    expect(code).toBe(1);
    expect(output).toContain('PostgreSQL at 127.0.0.1:1 (TEST_POSTGRES_URL)');
    expect(output).not.toMatch(/^\s+at /m);
  }, 60_000);

  it('runs the unit tier without them (`pnpm test:unit`)', async () => {
    const { code, output } = await run(
      ['node_modules/vitest/vitest.mjs', 'run', '--project', 'unit', 'infra/repository/node-version.unit.spec.ts'],
      { TEST_POSTGRES_URL: dead.postgres.url, REDIS_URL: dead.redis.url },
    );
    expect(code, output).toBe(0);
  }, 60_000);
});
