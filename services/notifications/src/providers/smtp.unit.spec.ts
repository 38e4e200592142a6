import { createServer, type Server } from 'node:net';
import { closedPort, listenOnLoopback } from '@idem/testkit';
import { afterEach, describe, expect, it } from 'vitest';
import { createSmtpClient, smtpFailureOf } from './smtp.js';

/**
 * An SMTP server on a loopback port that plays a session up to `until` and then does `then`:
 * every failure below is made by the real nodemailer against a real socket, not built by hand.
 * - `connected`: the connection is accepted, nothing more (no greeting);
 * - `greeted`: after the greeting; `MAIL`: once MAIL FROM came;
 * - `message`: once the whole message and its final dot came.
 * (A close right after DATA's 354 is not among them: a small message is written whole before
 * the close arrives, and the client cannot tell it from a close after the message.)
 */
type Stage = 'connected' | 'greeted' | 'MAIL' | 'message';
type Then = 'close' | 'silence' | { reply: string };

const servers: Server[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((server) => new Promise((resolve) => server.close(resolve))));
});

async function scriptedServer(until: Stage, then: Then): Promise<number> {
  const server = createServer((socket) => {
    socket.on('error', () => {});
    const act = () => {
      if (then === 'close') socket.destroy();
      else if (then !== 'silence') socket.write(`${then.reply}\r\n`);
    };
    if (until === 'connected') return act();
    socket.write('220 scripted.test ESMTP\r\n');
    if (until === 'greeted') return act();
    let inData = false;
    let buffered = '';
    socket.on('data', (chunk: Buffer) => {
      buffered += chunk.toString('latin1');
      if (inData) {
        if (!buffered.includes('\r\n.\r\n')) return;
        inData = false;
        buffered = '';
        return until === 'message' ? act() : void socket.write('250 taken\r\n');
      }
      const lines = buffered.split('\r\n');
      buffered = lines.pop()!;
      for (const line of lines) {
        const command = line.slice(0, 4).toUpperCase();
        if (command === 'MAIL' && until === 'MAIL') return act();
        if (command === 'DATA') {
          socket.write('354 go on\r\n');
          inData = true;
        } else if (command === 'EHLO' || command === 'HELO') socket.write('250 scripted.test\r\n');
        else if (command === 'QUIT') socket.end('221 bye\r\n');
        else socket.write('250 OK\r\n');
      }
    });
  });
  servers.push(server);
  return listenOnLoopback(server);
}

/** What the dispatcher's SMTP client makes of one send to `port`. */
async function failedSend(port: number) {
  const smtp = createSmtpClient({ smtpUrl: `smtp://127.0.0.1:${port}`, connections: 1, timeoutMs: 300 });
  try {
    await smtp.send({
      from: 'shop@idem.local',
      to: 'ada@example.com',
      subject: 'Your receipt',
      text: 'Thank you',
      html: null,
      messageId: '<email-1@idem.local>',
    });
  } catch (error) {
    return smtpFailureOf(error);
  } finally {
    smtp.close();
  }
  throw new Error('the send did not fail');
}

describe('a failed send, as nodemailer reports it', () => {
  it('is unconfirmed when the whole message went and no reply came: the server may have taken it', async () => {
    for (const then of ['close', 'silence'] as const)
      expect(await failedSend(await scriptedServer('message', then)), then).toMatchObject({
        responseCode: 0,
        unconfirmed: true,
      });
  });

  it('is not unconfirmed when the server accepted the connection and never greeted', async () => {
    // nodemailer reports ETIMEDOUT with timeoutType GREETING_TIMEOUT, or SOCKET_TIMEOUT when its
    // idle timer (as long: both are SMTP_TIMEOUT_MS) fires first: the name alone cannot tell.
    const neverGreets = await failedSend(await scriptedServer('connected', 'silence'));
    expect(neverGreets).toMatchObject({ responseCode: 0, unconfirmed: false });
    expect(neverGreets.reason).toMatch(/^ETIMEDOUT (GREETING|SOCKET)_TIMEOUT: /);
  });

  it('is not unconfirmed when the connection was refused', async () => {
    const refused = await failedSend(await closedPort());
    expect(refused).toMatchObject({ responseCode: 0, unconfirmed: false });
    expect(refused.reason).toMatch(/ECONNREFUSED/);
  });

  it('is not unconfirmed when the connection ended before the message did: a server commits only at its final dot', async () => {
    for (const [until, then] of [
      ['connected', 'close'],
      ['greeted', 'close'],
      ['greeted', 'silence'],
      ['MAIL', 'close'],
      ['MAIL', 'silence'],
    ] as const)
      expect(await failedSend(await scriptedServer(until, then)), `${until}, then ${then}`).toMatchObject({
        responseCode: 0,
        unconfirmed: false,
      });
  });

  it("carries the server's reply when it refused, and is then not unconfirmed", async () => {
    expect(await failedSend(await scriptedServer('message', { reply: '451 try later' }))).toMatchObject({
      responseCode: 451,
      unconfirmed: false,
    });
    expect(await failedSend(await scriptedServer('MAIL', { reply: '550 no such sender' }))).toMatchObject({
      responseCode: 550,
      unconfirmed: false,
    });
  });
});
