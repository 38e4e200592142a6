import { execFile } from 'node:child_process';
import { existsSync, readdirSync } from 'node:fs';
import { chmod, chown, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir, userInfo } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

export interface PostgresServer {
  /** `postgresql://postgres@127.0.0.1:<port>`, without a database. */
  readonly url: string;
  readonly port: number;
  /** Starts the server (again); resolves once it accepts connections. */
  start(): Promise<void>;
  /** Stops it at once, as a crash would (`immediate`), or cleanly (`fast`). */
  stop(mode?: 'immediate' | 'fast'): Promise<void>;
  /** Stops it and deletes its data directory. */
  destroy(): Promise<void>;
}

/** The newest installed PostgreSQL's binaries, or undefined where none is installed. */
export function postgresBinDir(): string | undefined {
  const root = '/usr/lib/postgresql';
  if (!existsSync(root)) return undefined;
  const versions = readdirSync(root)
    .filter((v) => existsSync(join(root, v, 'bin', 'initdb')))
    .sort((a, b) => Number(b) - Number(a));
  return versions[0] && join(root, versions[0], 'bin');
}

/**
 * A throwaway PostgreSQL server of the test's own, in a temporary directory, with the server
 * settings the test needs (`-c name=value`). A test that needs a setting establishes it here
 * instead of relying on whatever the machine's server was configured with. PostgreSQL refuses
 * to run as root, so as root it runs as the `postgres` user the server packages create.
 */
export async function createPostgresServer({
  port,
  settings = {},
}: {
  port: number;
  settings?: Record<string, string>;
}): Promise<PostgresServer> {
  const bin = postgresBinDir();
  if (!bin) throw new Error('no PostgreSQL server binaries under /usr/lib/postgresql (apt-get install postgresql)');
  const dir = await mkdtemp(join(tmpdir(), 'idem-pg-'));
  const asRoot = userInfo().uid === 0;
  const exec = async (command: string, args: string[]) => {
    const [file, argv] = asRoot
      ? ['runuser', ['-u', 'postgres', '--', join(bin, command), ...args]]
      : [join(bin, command), args];
    return run(file, argv, { cwd: dir });
  };
  if (asRoot) {
    const { stdout } = await run('id', ['-u', 'postgres']);
    const { stdout: gid } = await run('id', ['-g', 'postgres']);
    await chown(dir, Number(stdout.trim()), Number(gid.trim()));
  }
  await chmod(dir, 0o700);
  const data = join(dir, 'data');
  await exec('initdb', ['-D', data, '-U', 'postgres', '--auth=trust', '--no-sync', '-E', 'UTF8']);
  const options = [
    `-p ${port}`,
    '-c listen_addresses=127.0.0.1',
    `-c unix_socket_directories=${dir}`,
    '-c fsync=off',
    ...Object.entries(settings).map(([name, value]) => `-c ${name}=${value}`),
  ].join(' ');
  const server: PostgresServer = {
    url: `postgresql://postgres@127.0.0.1:${port}`,
    port,
    async start() {
      await exec('pg_ctl', ['-D', data, '-o', options, '-l', join(dir, 'server.log'), '-w', 'start']);
    },
    async stop(mode = 'immediate') {
      await exec('pg_ctl', ['-D', data, '-m', mode, '-w', 'stop']).catch(() => undefined);
    },
    async destroy() {
      await server.stop();
      await rm(dir, { recursive: true, force: true });
    },
  };
  return server;
}
