import { createServer, connect, type Server, type Socket } from 'node:net';

/**
 * A TCP proxy in front of one server (Redis, the SMTP server, the payment provider) for the
 * services that talk to it, which can fail the way a network and a provider do: stall (it forwards
 * nothing either way, the connections stay open, as on a network that stops delivering) or go down
 * (every connection is cut and new ones are refused, as a provider that is unreachable).
 */
export interface FaultProxy {
  /** The target's URL with the proxy's address in its place. */
  readonly url: string;
  stall(ms: number): Promise<void>;
  down(ms: number): Promise<void>;
  close(): Promise<void>;
}

export async function startFaultProxy(target: string): Promise<FaultProxy> {
  const upstream = new URL(target);
  const upstreamPort = Number(upstream.port || (upstream.protocol === 'https:' ? 443 : 80));
  const pairs = new Set<[Socket, Socket]>();
  let stalled = false;
  const server: Server = createServer((client) => {
    const remote = connect(upstreamPort, upstream.hostname);
    const pair: [Socket, Socket] = [client, remote];
    pairs.add(pair);
    if (stalled) for (const socket of pair) socket.pause();
    client.pipe(remote);
    remote.pipe(client);
    const end = () => {
      pairs.delete(pair);
      client.destroy();
      remote.destroy();
    };
    client.on('error', end).on('close', end);
    remote.on('error', end).on('close', end);
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
      remote.destroy();
    }
  };
  const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
  return {
    url: url.toString().replace(/\/$/, target.endsWith('/') ? '/' : ''),
    async stall(ms) {
      stalled = true;
      for (const pair of pairs) for (const socket of pair) socket.pause();
      await sleep(ms);
      stalled = false;
      for (const pair of pairs) for (const socket of pair) socket.resume();
    },
    async down(ms) {
      await new Promise<void>((resolve) => {
        server.close(() => resolve()); // refuses new connections from now on
        cutAll();
      });
      await sleep(ms);
      await listen();
    },
    close: () =>
      new Promise<void>((resolve) => {
        cutAll();
        server.close(() => resolve());
      }),
  };
}
