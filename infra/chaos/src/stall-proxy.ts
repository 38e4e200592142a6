import { createServer, connect, type Server, type Socket } from 'node:net';

/**
 * A TCP proxy in front of Redis for one service, which can stall: while stalled it forwards
 * nothing either way (the connections stay open, as on a network that stops delivering).
 */
export interface StallProxy {
  readonly url: string;
  stall(ms: number): Promise<void>;
  close(): Promise<void>;
}

export async function startStallProxy(target: string): Promise<StallProxy> {
  const upstream = new URL(target);
  const pairs = new Set<[Socket, Socket]>();
  let stalled = false;
  const server: Server = createServer((client) => {
    const remote = connect(Number(upstream.port || 6379), upstream.hostname);
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
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  const url = new URL(target);
  url.host = `127.0.0.1:${port}`;
  return {
    url: url.toString(),
    async stall(ms) {
      stalled = true;
      for (const pair of pairs) for (const socket of pair) socket.pause();
      await new Promise((resolve) => setTimeout(resolve, ms));
      stalled = false;
      for (const pair of pairs) for (const socket of pair) socket.resume();
    },
    close: () =>
      new Promise<void>((resolve) => {
        for (const [client, remote] of pairs) {
          client.destroy();
          remote.destroy();
        }
        server.close(() => resolve());
      }),
  };
}
