import nodemailer from 'nodemailer';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { startSmtpSink, type SmtpSink } from './sink.js';

let sink: SmtpSink;
beforeAll(async () => {
  sink = await startSmtpSink({ smtpPort: 0, httpPort: 0, host: '127.0.0.1' });
});
afterAll(() => sink.close());
beforeEach(() => sink.clear());

const send = (messageId: string, extra: { date?: Date; headers?: Record<string, string> } = {}) =>
  nodemailer.createTransport({ host: '127.0.0.1', port: sink.smtpPort, secure: false, ignoreTLS: true }).sendMail({
    from: 'shop@idem.local',
    to: 'ada@example.com',
    subject: 'Your receipt',
    text: 'Thank you',
    html: '<p>Thank you</p>',
    messageId,
    ...extra,
  });
const api = (path: string, init?: RequestInit) => fetch(`http://127.0.0.1:${sink.httpPort}${path}`, init);

describe('SMTP sink', () => {
  it('keeps accepted messages and lists them like Mailpit', async () => {
    await send('<receipt-1@idem.local>');
    const list = (await (await api('/api/v1/messages')).json()) as {
      total: number;
      messages: { ID: string; MessageID: string; Subject: string; To: { Address: string }[] }[];
    };
    expect(list.total).toBe(1);
    expect(list.messages[0]).toMatchObject({
      MessageID: 'receipt-1@idem.local',
      Subject: 'Your receipt',
      To: [{ Address: 'ada@example.com' }],
    });
    const message = (await (await api(`/api/v1/message/${list.messages[0]!.ID}`)).json()) as {
      Text: string;
      HTML: string;
    };
    expect(message.Text.trim()).toBe('Thank you');
    expect(message.HTML).toContain('<p>Thank you</p>');
  });

  it("serves a message's Date (its Date header) and the newest message as `latest`, as Mailpit does", async () => {
    const written = new Date('2026-01-02T03:04:05Z');
    await send('<first@idem.local>');
    await send('<second@idem.local>', { date: written });
    const latest = (await (await api('/api/v1/message/latest')).json()) as { MessageID: string; Date: string };
    expect(latest).toMatchObject({ MessageID: 'second@idem.local', Date: written.toISOString() });
    const list = (await (await api('/api/v1/messages')).json()) as { messages: { Created: string }[] };
    // Created is when the sink received it, not what the sender wrote.
    expect(Date.now() - Date.parse(list.messages[0]!.Created)).toBeLessThan(60_000);
    expect((await api('/api/v1/message/latest/headers')).status).toBe(200);
    await api('/api/v1/messages', { method: 'DELETE' });
    expect((await api('/api/v1/message/latest')).status).toBe(404);
  });

  it('keeps a message whose headers are named like object properties', async () => {
    await nodemailer
      .createTransport({ host: '127.0.0.1', port: sink.smtpPort, secure: false, ignoreTLS: true })
      .sendMail({
        envelope: { from: 'shop@idem.local', to: 'ada@example.com' },
        raw: 'constructor: a\r\ntoString: b\r\n__proto__: c\r\nSubject: odd\r\nMessage-ID: <odd@idem.local>\r\n\r\nbody\r\n',
      });
    const headers = (await (await api('/api/v1/message/latest/headers')).json()) as Record<string, string[]>;
    expect(Object.entries(headers)).toEqual(
      expect.arrayContaining([
        ['constructor', ['a']],
        ['toString', ['b']],
        ['__proto__', ['c']],
      ]),
    );
    expect(await sink.messages()).toHaveLength(1);
  });

  it("finds messages by their Message-ID as Mailpit's search does (`message-id:` matches a part of it)", async () => {
    await send('<email-1@idem.local>');
    await send('<email-2@idem.local>');
    await send('<email-2@idem.local>'); // a copy: both are found
    const search = async (query: string) =>
      (await (await api(`/api/v1/search?query=${encodeURIComponent(query)}`)).json()) as {
        total: number;
        messages_count: number;
        messages: { MessageID: string }[];
      };
    expect(await search('message-id:email-2@idem.local')).toMatchObject({
      total: 3,
      messages_count: 2,
      messages: [{ MessageID: 'email-2@idem.local' }, { MessageID: 'email-2@idem.local' }],
    });
    expect((await search('message-id:<email-1@idem.local>')).messages_count).toBe(1);
    expect((await search('message-id:email-3@idem.local')).messages).toEqual([]);
    expect((await search('message-id:email-')).messages_count).toBe(3);
    // What the sink cannot search it refuses, rather than answer as if nothing matched.
    expect((await api('/api/v1/search?query=subject:receipt')).status).toBe(400);
    expect((await api('/api/v1/search')).status).toBe(400);
  });

  it('deletes all messages', async () => {
    await send('<x@idem.local>');
    await api('/api/v1/messages', { method: 'DELETE' });
    expect(await sink.messages()).toEqual([]);
  });

  it('can answer with a temporary failure', async () => {
    sink.failNext(1);
    await expect(send('<y@idem.local>')).rejects.toMatchObject({ responseCode: 451 });
    await send('<y@idem.local>');
    expect(await sink.messages()).toHaveLength(1);
  });
});

describe('SMTP sink, as a browser on the same machine reaches it', () => {
  it('refuses its control routes to another web page, and its messages to a foreign Host', async () => {
    const refused = await api('/_sink/fail-next', {
      method: 'POST',
      headers: { 'content-type': 'application/json', origin: 'http://evil.example' },
      body: JSON.stringify({ count: 5 }),
    });
    expect(refused.status).toBe(403);
    await send('<guard@idem.local>'); // no failure was switched on
    expect(await sink.messages()).toHaveLength(1);
    const { request } = await import('node:http');
    const status = await new Promise<number>((resolve, reject) =>
      request(
        { host: '127.0.0.1', port: sink.httpPort, path: '/api/v1/messages', headers: { host: 'evil.example' } },
        (res) => resolve(res.statusCode!),
      )
        .on('error', reject)
        .end(),
    );
    expect(status).toBe(403);
  });
});

describe('the SMTP sink beyond loopback', () => {
  it('will not serve every customer’s mail to a network without an operator token', async () => {
    await expect(startSmtpSink({ smtpPort: 0, httpPort: 0, host: '0.0.0.0' })).rejects.toThrow(/ADMIN_TOKEN/);
  });

  it('takes mail from anyone there, and shows it only to the operator', async () => {
    const operator = 'sink-operator-token-0123456789';
    const networked = await startSmtpSink({ smtpPort: 0, httpPort: 0, host: '0.0.0.0', adminToken: operator });
    try {
      await nodemailer
        .createTransport({ host: '127.0.0.1', port: networked.smtpPort, secure: false, ignoreTLS: true })
        .sendMail({ from: 'shop@idem.local', to: 'ada@example.com', subject: 'Receipt', text: 'Thanks' });
      const list = (headers: Record<string, string> = {}) =>
        fetch(`http://127.0.0.1:${networked.httpPort}/api/v1/messages`, { headers });
      expect((await list()).status).toBe(401);
      const shown = await list({ authorization: `Bearer ${operator}` });
      expect(((await shown.json()) as { total: number }).total).toBe(1);
    } finally {
      await networked.close();
    }
  });
});
