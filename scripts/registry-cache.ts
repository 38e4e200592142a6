// Packages the tests take from the npm registry as it publishes them, outside the workspace (no
// lockfile, no patch): Node.js 22 for the packages' older engine, BullMQ as a user installs it.
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';

/**
 * The folder of `name`@`version` installed from the npm registry into ~/.cache/idem/<cacheName>
 * (XDG_CACHE_HOME honoured), its own dependencies beside it: installed on the first call on a
 * machine (a few seconds), found there after.
 */
export function fromRegistry(name: string, version: string, cacheName: string): string {
  const prefix = join(process.env.XDG_CACHE_HOME ?? join(homedir(), '.cache'), 'idem', cacheName);
  const dir = join(prefix, 'node_modules', name);
  if (!existsSync(join(dir, 'package.json')))
    execFileSync(
      'npm',
      ['install', '--silent', '--no-save', '--no-package-lock', '--prefix', prefix, `${name}@${version}`],
      {
        stdio: 'pipe',
      },
    );
  return dir;
}
