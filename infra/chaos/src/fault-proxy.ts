import { createServer, connect, type Server, type Socket } from 'node:net';

/**
 * A TCP proxy in front of one server (Redis, the SMTP server, the payment provider) for the
 * services that talk to it, which can fail the way a network and a provider do: stall (it forwards
 * nothing either way, the connections stay open, as on a network that stops delivering), go down
 * (every connection is cut and new ones are refused, as a provider that is unreachable), be slow
 * (every chunk delayed, both ways) or be a black hole (connections accepted, nothing forwarded:
 * what is in flight is lost, as a reply that was on its way when a route died).
 */
export interface FaultProxy {
  /** The target's URL with the proxy's address in its place. */
  readonly url: string;
  stall(ms: number): Promise<void>;
  down(ms: number): Promise<void>;
  /** Delays every chunk by `ms` each way from now on (0: passes straight through again). */
  slow(ms: number): void;
  /**
   * For `ms`, forwards nothing, drops what it receives and what was still delayed, and accepts
   * new connections without connecting them; then cuts every connection that lived through it
   * (its stream has a hole) and passes straight through.
   */
  blackHole(ms: number): Promise<void>;
  close(): Promise<void>;
}

export async function startFaultProxy(target: string): Promise<FaultProxy> {
  const upstream = new URL(target);
  const upstreamPort = Number(upstream.port || (upstream.protocol === 'https:' ? 443 : 80));
  const pairs = new Set<[Socket, Socket | undefined]>();
  let stalled = false;
  let delayMs = 0;
  let blackHoled = false;
  const server: Server = createServer((client) => {
    // Into the black hole: accepted, never connected, its data dropped.
    const remote = blackHoled ? undefined : connect(upstreamPort, upstream.hostname);
    const pair: [Socket, Socket | undefined] = [client, remote];
    pairs.add(pair);
    if (stalled) for (const socket of pair) socket?.pause();
    // Each way keeps its order: a chunk is written no sooner than the one before it.
    const forward = (to: Socket | undefined) => {
      let due = 0;
      return (chunk: Buffer) => {
        if (blackHoled || !to) return;
        if (delayMs === 0 && due <= Date.now()) return void to.write(chunk);
        due = Math.max(Date.now() + delayMs, due);
        setTimeout(() => {
          if (!blackHoled && !to.destroyed) to.write(chunk);
        }, due - Date.now());
      };
    };
    client.on('data', forward(remote));
    remote?.on('data', forward(client));
    const end = () => {
      pairs.delete(pair);
      client.destroy();
      remote?.destroy();
    };
    client.on('error', end).on('close', end);
    remote?.on('error', end).on('close', end);
  });
  const listen = () => new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
  let port = 0;
  await listen();
  port = (server.address() as { port: number }).port;
  const url = new URL(target);
  url.host = `127.0.0.1:${port}`;
  const cutAll = () => {
    for (const [client, remote] of pairs) {
      client.destroy();
      remote?.destroy();
    }
  };
  const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
  return {
    url: url.toString().replace(/\/$/, target.endsWith('/') ? '/' : ''),
    async stall(ms) {
      stalled = true;
      for (const pair of pairs) for (const socket of pair) socket?.pause();
      await sleep(ms);
      stalled = false;
      for (const pair of pairs) for (const socket of pair) socket?.resume();
    },
    async down(ms) {
      await new Promise<void>((resolve) => {
        server.close(() => resolve()); // refuses new connections from now on
        cutAll();
      });
      await sleep(ms);
      await listen();
    },
    slow(ms) {
      delayMs = ms;
    },
    async blackHole(ms) {
      blackHoled = true;
      await sleep(ms);
      cutAll();
      delayMs = 0;
      blackHoled = false;
    },
    close: () =>
      new Promise<void>((resolve) => {
        cutAll();
        server.close(() => resolve());
      }),
  };
}
