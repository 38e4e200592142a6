import { connect, createServer, type Server, type Socket } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { startFaultProxy, type FaultProxy } from './fault-proxy.js';

/** A server that answers each line it receives with `ok <line>`, and the proxy in front of it. */
async function echoBehindProxy() {
  const received: string[] = [];
  const server: Server = createServer((socket) => {
    socket.on('error', () => {});
    socket.on('data', (chunk: Buffer) => {
      for (const line of chunk.toString().split('\n').filter(Boolean)) {
        received.push(line);
        socket.write(`ok ${line}\n`);
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const proxy = await startFaultProxy(`tcp://127.0.0.1:${(server.address() as { port: number }).port}`);
  cleanups.push(async () => {
    await proxy.close();
    await new Promise((resolve) => server.close(resolve));
  });
  return { proxy, received };
}

/** A client of `proxy` that keeps what it is answered. */
async function clientOf(proxy: FaultProxy) {
  const socket: Socket = connect(Number(new URL(proxy.url).port), '127.0.0.1');
  await new Promise((resolve) => socket.once('connect', resolve));
  const answers: string[] = [];
  const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
  socket.on('error', () => {});
  socket.on('data', (chunk: Buffer) => answers.push(...chunk.toString().split('\n').filter(Boolean)));
  cleanups.push(async () => void socket.destroy());
  return { socket, answers, closed };
}

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const until = async (check: () => boolean) => {
  for (let i = 0; i < 200 && !check(); i++) await sleep(10);
};

describe('the fault proxy', () => {
  it('when slow, delays every chunk both ways and keeps their order', async () => {
    const { proxy, received } = await echoBehindProxy();
    proxy.slow(100);
    const { socket, answers } = await clientOf(proxy);
    const sent = Date.now();
    for (const line of ['a', 'b', 'c']) socket.write(`${line}\n`);
    await until(() => answers.length === 3);
    // Each chunk waits its delay on the way there and its answer on the way back: never sooner.
    expect(Date.now() - sent).toBeGreaterThanOrEqual(2 * 100 - 5);
    expect(received).toEqual(['a', 'b', 'c']);
    expect(answers).toEqual(['ok a', 'ok b', 'ok c']);
  });

  it('as a black hole, loses the answer on its way, cuts the connections that lived through it, then passes again', async () => {
    const { proxy, received } = await echoBehindProxy();
    proxy.slow(150);
    const before = await clientOf(proxy);
    before.socket.write('sent\n');
    await until(() => received.length === 1); // the server has it and has answered: the answer is delayed
    const hole = proxy.blackHole(300);
    const during = await clientOf(proxy); // accepted, never connected
    during.socket.write('lost\n');
    await hole;
    await Promise.all([before.closed, during.closed]);
    expect(before.answers).toEqual([]); // the answer was in flight when the route died
    expect(received).toEqual(['sent']);
    const after = await clientOf(proxy);
    after.socket.write('again\n');
    await until(() => after.answers.length === 1);
    expect(after.answers).toEqual(['ok again']);
  });
});
