import { createServer, connect, type Server, type Socket } from 'node:net';

/**
 * A TCP path to a real server that a test can make slow or cut, as a network does: every chunk
 * delayed `latencyMs` each way; `blackhole()` cuts the link as a dead one does — every connection
 * open then, and any opened meanwhile, stays open and is never answered again, not even closed
 * (no FIN, no RST: the client learns of it only by its own timeouts); `restore()` lets new
 * connections through again, and leaves the dead ones dead.
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
  /** Connections that were cut and are still open on the client's side: what no client has dropped yet. */
  readonly deadConnections: () => number;
  close(): Promise<void>;
}

/** One client's connection through the path, and whether the link cut it. */
interface Link {
  readonly client: Socket;
  readonly upstream?: Socket;
  dead: boolean;
  /** The client closed its side: it gave the connection up. */
  ended: boolean;
}

interface PathState {
  latencyMs: number;
  forwarded: number;
}

/**
 * Copies `from` to `to` in order, each chunk after the latency of the moment (`state`'s), nothing
 * once the link is dead; counts what goes to the server when `counted`.
 */
function pipe(state: PathState, link: Link, from: Socket, to: Socket, counted: boolean): void {
  const queue: { at: number; chunk: Buffer }[] = [];
  let timer: NodeJS.Timeout | undefined;
  const drain = () => {
    timer = undefined;
    while (queue.length > 0 && queue[0]!.at <= Date.now()) {
      const { chunk } = queue.shift()!;
      if (link.dead || to.destroyed) continue;
      if (counted) state.forwarded += chunk.length;
      to.write(chunk);
    }
    if (queue.length > 0) timer = setTimeout(drain, queue[0]!.at - Date.now());
  };
  from.on('data', (chunk: Buffer) => {
    if (link.dead) return;
    // Never before the chunk ahead of it, whatever the latency did meanwhile.
    queue.push({ at: Math.max(Date.now() + state.latencyMs, queue.at(-1)?.at ?? 0), chunk });
    if (!timer) drain();
  });
  // A live link passes an end on; a dead one swallows it (half-open, as after a lost route).
  from.on('end', () => !link.dead && to.end());
}

/** Opens a path to `target` (host and port of a running server) on a free loopback port. */
export async function startNetworkPath(target: { host: string; port: number }): Promise<NetworkPath> {
  const state: PathState = { latencyMs: 0, forwarded: 0 };
  let blackholed = false;
  const links = new Set<Link>();
  // allowHalfOpen: a client's FIN on a dead link is not answered by one from the path.
  const server: Server = createServer({ allowHalfOpen: true }, (client) => {
    const upstream = blackholed ? undefined : connect(target.port, target.host);
    const link: Link = { client, upstream, dead: blackholed, ended: false };
    links.add(link);
    for (const socket of [client, upstream]) socket?.on('error', () => socket.destroy());
    client.on('end', () => void (link.ended = true));
    client.on('close', () => {
      links.delete(link);
      upstream?.destroy();
    });
    if (!upstream) return void client.resume(); // accepted, read, and never answered
    upstream.on('close', () => !link.dead && client.destroy());
    pipe(state, link, client, upstream, true);
    pipe(state, link, upstream, client, false);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  return {
    port,
    latency: (ms) => void (state.latencyMs = ms),
    blackhole() {
      blackholed = true;
      for (const link of links) link.dead = true;
    },
    restore: () => void (blackholed = false),
    forwarded: () => state.forwarded,
    deadConnections: () => [...links].filter((link) => link.dead && !link.ended).length,
    async close() {
      for (const { client, upstream } of links) {
        client.destroy();
        upstream?.destroy();
      }
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/**
 * Listens on a loopback port for a test and says which; closing the server destroys its sockets
 * too, since a server a test keeps silent would otherwise hold close() until its clients hang up.
 */
export async function listenOnLoopback(server: Server): Promise<number> {
  const sockets = new Set<Socket>();
  server.on('connection', (socket: Socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });
  const close = server.close.bind(server);
  server.close = (callback) => {
    for (const socket of sockets) socket.destroy();
    return close(callback);
  };
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return (server.address() as { port: number }).port;
}

/** A loopback port nothing listens on: a server's, closed. */
export async function closedPort(): Promise<number> {
  const server = createServer();
  const port = await listenOnLoopback(server);
  await new Promise((resolve) => server.close(resolve));
  return port;
}
