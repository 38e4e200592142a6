/**
 * `bash scripts/start.sh` (CONTRIBUTING.md "Run it without Docker"), on a machine that has
 * everything: it starts the system with the fault switches available and says where the console
 * is and the operator tokens — without asking anything or installing anything (apt-get, sudo and
 * npm on its PATH only record that they were called).
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync, chmodSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { randomInt } from 'node:crypto';
import { dropDatabase } from '@idem/database';
import { asOperator, getJson, SERVICES, systemFromEnv } from '@idem/native-run';
import { deleteQueues, waitFor } from '@idem/testkit';
import { afterAll, describe, expect, it } from 'vitest';

const root = fileURLToPath(new URL('../', import.meta.url));
const offset = randomInt(8_000, 19_000);
const system = systemFromEnv({ IDEM_PORT_OFFSET: String(offset) });
const bin = mkdtempSync(join(tmpdir(), 'idem-start-'));
const calls = join(bin, 'calls.log');
for (const installer of ['apt-get', 'sudo', 'npm']) {
  writeFileSync(join(bin, installer), `#!/bin/sh\necho "${installer} $*" >> ${calls}\nexit 1\n`);
  chmodSync(join(bin, installer), 0o755);
}

afterAll(async () => {
  await Promise.all(SERVICES.map((s) => dropDatabase(system.databaseUrls[s])));
  await deleteQueues(system.queuePrefix);
  rmSync(bin, { recursive: true, force: true });
  for (const part of ['', ...SERVICES.map((s) => `.${s}`)])
    rmSync(join(root, `.idem/${system.name}${part}.admin-token`), { force: true });
});

describe('bash scripts/start.sh', () => {
  it('starts the system on a ready machine without asking or installing, and says where to go', async () => {
    const env = Object.fromEntries(Object.entries(process.env).filter(([name]) => !name.startsWith('VITEST')));
    const child = spawn('/bin/bash', ['scripts/start.sh'], {
      cwd: root,
      env: { ...env, PATH: `${bin}:${env.PATH}`, IDEM_PORT_OFFSET: String(offset), IDEM_FAULTS_ENABLED: '' },
      stdio: ['ignore', 'pipe', 'pipe'],
      detached: true, // its own process group: stopped below as Ctrl-C stops it
    });
    let output = '';
    for (const stream of [child.stdout, child.stderr])
      stream.on('data', (chunk: Buffer) => (output += chunk.toString()));
    const ended = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
    try {
      await waitFor(() => output.includes('Try: pnpm demo') || child.exitCode !== null, {
        what: 'the system started',
        timeoutMs: 240_000,
        intervalMs: 500,
      });
      expect(child.exitCode, output).toBeNull();
      expect(output).toContain(`console        ${system.urls.console}`);
      // Orders' own operator token, which opens orders' switches.
      const token = /operator tokens[^\n]*\n\s+orders\s+(\S+)/.exec(output)?.[1];
      expect(token).toMatch(/^[\w-]{20,}$/);
      // Nothing was asked, installed or changed on the way.
      expect(output).not.toMatch(/^idem: /m);
      expect(existsSync(calls) ? readFileSync(calls, 'utf8') : '').toBe('');
      // The teaching switches are there (their routes exist only with IDEM_FAULTS_ENABLED=1).
      const faults = await getJson<{ rules: unknown[] }>(`${system.urls.orders}/faults`, asOperator(token!));
      expect(faults.rules).toEqual([]);
    } finally {
      process.kill(-child.pid!, 'SIGINT');
      await ended;
    }
  }, 300_000);
});
