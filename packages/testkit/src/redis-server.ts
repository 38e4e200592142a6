import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';

export interface RedisServer {
  /** `redis://127.0.0.1:<port>`, as its `default` user (no password). */
  readonly url: string;
  readonly process: ChildProcess;
  /** Kills it, whatever it is doing (a script that never ends included). */
  stop(): Promise<void>;
}

/**
 * A redis-server of the test's own, from the machine's binary, on loopback `port`, keeping
 * nothing on disk, with `args` besides (`--busy-reply-threshold 1000`): for what would hold or
 * change the machine's shared Redis. Resolves once it answers.
 */
export async function startRedisServer({
  port,
  args = [],
}: {
  port: number;
  args?: readonly string[];
}): Promise<RedisServer> {
  const url = `redis://127.0.0.1:${port}`;
  const server = spawn(
    'redis-server',
    ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', ...args],
    { stdio: 'ignore' },
  );
  const stop = async () => {
    if (server.exitCode !== null || server.signalCode !== null) return;
    const exit = once(server, 'exit');
    server.kill('SIGKILL');
    await exit;
  };
  const admin = new Redis(url, { maxRetriesPerRequest: 1 });
  admin.on('error', () => {}); // refused until the server is up
  try {
    for (let tries = 0; (await admin.ping().catch(() => '')) !== 'PONG'; tries++) {
      if (tries === 200) throw new Error(`redis-server on port ${port} did not answer within 10 s`);
      await sleep(50);
    }
  } catch (error) {
    await stop();
    throw error;
  } finally {
    admin.disconnect();
  }
  return { url, process: server, stop };
}

/**
 * Sends a script that never ends (`while true do end`) as `redis`'s user and resolves once it
 * ended — with Redis's answer (an error naming SCRIPT KILL, once a watcher killed it) and how long
 * it ran. Only on a Redis of the test's own: it holds the whole server.
 */
export async function endlessScript(redis: Redis): Promise<{ ended: string; afterMs: number }> {
  const started = Date.now();
  const ended = await redis.eval('while true do end', 0).then(
    () => 'returned',
    (error: Error) => error.message,
  );
  return { ended, afterMs: Date.now() - started };
}
