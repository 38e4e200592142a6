/**
 * The image's build and runtime steps, natively (no Docker engine here): bundle the inventory
 * service, `pnpm deploy` it with production dependencies only (as infra/Dockerfile does), delete
 * its sources, and run the bundle with plain node — migrate, serve health and metrics, consume,
 * and stop on SIGTERM.
 */
import { execFileSync, spawn } from 'node:child_process';
import { randomInt } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createPublisher } from '@idem/messaging';
import { dropDatabase } from '@idem/database';
import { deleteQueues, orderPlacedMessage, postgresServerUrl, uniqueName, waitFor } from '@idem/testkit';
import { afterAll, describe, expect, it } from 'vitest';

const root = fileURLToPath(new URL('..', import.meta.url));
const pnpmVersion = (
  JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { packageManager: string }
).packageManager.split('@')[1]!;
const out = mkdtempSync(join(tmpdir(), 'idem-deploy-'));
const databaseUrl = `${postgresServerUrl}/${uniqueName('idem_test_bundle')}`;
const prefix = uniqueName('idem_test_bundle');
const port = randomInt(6_000, 7_000); // below the ephemeral port range and the e2e systems' ports

afterAll(async () => {
  rmSync(out, { recursive: true, force: true });
  await dropDatabase(databaseUrl);
  await deleteQueues(prefix);
});

describe('the production bundle', () => {
  it('runs from a production-only deploy with plain node: migrates, serves health and metrics, consumes, stops on SIGTERM', async () => {
    execFileSync(process.execPath, ['--import', 'tsx', 'scripts/build.ts', 'services/inventory'], {
      cwd: root,
      stdio: 'pipe',
    });
    execFileSync(
      'npx',
      [
        '-y',
        `pnpm@${pnpmVersion}`,
        '--filter',
        '@idem/inventory',
        'deploy',
        '--prod',
        '--legacy',
        '--config.node-linker=hoisted',
        '--ignore-scripts',
        out,
      ],
      { cwd: root, stdio: 'pipe' },
    );
    rmSync(join(out, 'src'), { recursive: true, force: true }); // the image keeps only dist/ and prisma/
    const env = { PATH: process.env.PATH, DATABASE_URL: databaseUrl, IDEM_QUEUE_PREFIX: prefix, PORT: '0' };

    execFileSync(process.execPath, ['dist/migrate.js'], { cwd: out, env, stdio: 'pipe' });
    const service = spawn(process.execPath, ['dist/main.js'], {
      cwd: out,
      env: { ...env, PORT: String(port) },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    service.stdout!.on('data', (chunk: Buffer) => (output += chunk.toString()));
    service.stderr!.on('data', (chunk: Buffer) => (output += chunk.toString()));
    try {
      const health = await waitFor(
        async () => (await fetch(`http://127.0.0.1:${port}/health`).catch(() => undefined))?.json(),
        {
          what: `the bundle to answer /health (output so far: ${output})`,
        },
      );
      expect(health).toEqual({ status: 'ok', checks: { database: 'ok', redis: 'ok' } });

      const publisher = createPublisher({ prefix });
      await publisher.publish([orderPlacedMessage({}, 'keyboard')]);
      await publisher.close();
      await waitFor(
        async () =>
          (await (await fetch(`http://127.0.0.1:${port}/metrics`)).text()).match(
            /idem_deliveries_total\{[^}]*outcome="processed"[^}]*\} 1/,
          ),
        {
          what: 'the delivery to be processed',
        },
      );
    } finally {
      service.kill('SIGTERM');
    }
    expect(await new Promise((resolve) => service.once('exit', (code) => resolve(code)))).toBe(0);
  }, 240_000);
});
