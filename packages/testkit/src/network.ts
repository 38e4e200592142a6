import { createServer, connect, type Server, type Socket } from 'node:net';

/**
 * A TCP path to a real server that a test can make slow or cut, as a network does: every chunk
 * delayed `latencyMs` each way; `blackhole()` keeps connections open and answers nothing (a
 * broker behind a dead link: the client waits, it is not refused); `restore()` drops what was
 * blackholed, as a dead link's connections end, and lets new connections through again.
 */
export interface NetworkPath {
  /** The local port clients connect to instead of the server's. */
  readonly port: number;
  /** Delays every chunk by this much, each way, from now on (0: none). */
  latency(ms: number): void;
  blackhole(): void;
  restore(): void;
  /** Bytes that went through to the server: a test sees traffic happened. */
  readonly forwarded: () => number;
  close(): Promise<void>;
}

/** Opens a path to `target` (host and port of a running server) on a free loopback port. */
export async function startNetworkPath(target: { host: string; port: number }): Promise<NetworkPath> {
  let latencyMs = 0;
  let blackholed = false;
  let forwarded = 0;
  const open = new Set<Socket>();
  const track = (socket: Socket) => {
    open.add(socket);
    socket.on('close', () => open.delete(socket));
    socket.on('error', () => socket.destroy());
  };
  /** Copies `from` to `to` in order, each chunk after the latency of the moment; nothing while blackholed. */
  const pipe = (from: Socket, to: Socket, counted: boolean) => {
    const queue: { at: number; chunk: Buffer }[] = [];
    let timer: NodeJS.Timeout | undefined;
    const drain = () => {
      timer = undefined;
      while (queue.length > 0 && queue[0]!.at <= Date.now()) {
        const { chunk } = queue.shift()!;
        if (blackholed || to.destroyed) continue;
        if (counted) forwarded += chunk.length;
        to.write(chunk);
      }
      if (queue.length > 0) timer = setTimeout(drain, queue[0]!.at - Date.now());
    };
    from.on('data', (chunk: Buffer) => {
      if (blackholed) return;
      // Never before the chunk ahead of it, whatever the latency did meanwhile.
      queue.push({ at: Math.max(Date.now() + latencyMs, queue.at(-1)?.at ?? 0), chunk });
      if (!timer) drain();
    });
  };

  const server: Server = createServer((client) => {
    track(client);
    if (blackholed) return; // accepted, and never answered
    const upstream = connect(target.port, target.host);
    track(upstream);
    client.on('close', () => upstream.destroy());
    upstream.on('close', () => client.destroy());
    pipe(client, upstream, true);
    pipe(upstream, client, false);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  const dropAll = () => {
    for (const socket of open) socket.destroy();
  };
  return {
    port,
    latency: (ms) => void (latencyMs = ms),
    blackhole: () => void (blackholed = true),
    restore() {
      if (blackholed) dropAll();
      blackholed = false;
    },
    forwarded: () => forwarded,
    async close() {
      dropAll();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
