import { randomUUID } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import type { Server } from 'node:http';
import { localToolGuard, operatorOnlyBeyondLoopback } from '@idem/http';
import express, { type Request } from 'express';
import { simpleParser, type AddressObject, type ParsedMail } from 'mailparser';
import { SMTPServer } from 'smtp-server';

/**
 * A local SMTP server that keeps every message it accepts (in memory) and serves a
 * Mailpit-compatible subset of Mailpit's HTTP API, so the same tests and tools work against
 * Mailpit in docker compose.
 */

interface Address {
  Name: string;
  Address: string;
}

export interface StoredMessage {
  ID: string;
  MessageID: string;
  From: Address;
  To: Address[];
  Cc: Address[];
  Bcc: Address[];
  ReplyTo: Address[];
  Subject: string;
  /** When the sink received it (Mailpit's `Created`, in listings). */
  Created: string;
  /** The message's own Date header, or when it was received if it has none (Mailpit's `Date`). */
  Date: string;
  Size: number;
  Text: string;
  HTML: string;
  Read: boolean;
  Headers: Record<string, string[]>;
}

export interface SmtpSinkOptions {
  readonly smtpPort?: number;
  readonly httpPort?: number;
  readonly host?: string;
  /** Names its HTTP API answers to besides 127.0.0.1, localhost and [::1] on its port. @defaultValue none */
  readonly allowedHosts?: readonly string[];
  /** Beyond loopback its HTTP API (every customer's mail) answers only to this operator token. */
  readonly adminToken?: string;
}

export interface SmtpSink {
  readonly smtpPort: number;
  readonly httpPort: number;
  /** Every message kept, oldest first. */
  messages(): Promise<StoredMessage[]>;
  /** Answers the next `count` messages with a temporary failure (451), to test retries. */
  failNext(count: number): void;
  /** Greets every new connection only after `ms` (0: at once): a slow server, to test timeouts and leases. */
  slowGreeting(ms: number): void;
  /** Accepts (or refuses) each message only `ms` after its data ended (0: at once): a server slow to take mail. */
  slowAnswers(ms: number): void;
  clear(): void;
  close(): Promise<void>;
}

export async function startSmtpSink({
  smtpPort = 1025,
  httpPort = 8025,
  host = '127.0.0.1',
  adminToken,
  allowedHosts = [],
}: SmtpSinkOptions = {}): Promise<SmtpSink> {
  // First: beyond loopback without an operator token it must not start at all.
  const operatorOnly = operatorOnlyBeyondLoopback({ host, tokens: [adminToken ?? ''], what: 'ADMIN_TOKEN' });
  // A message is kept as it came and parsed the first time it is asked for: accepting mail is
  // all a sending service waits for, and most of what a sink would spend on it is the parse.
  const stored: Received[] = [];
  let failures = 0;
  let greetingDelayMs = 0;
  let answerDelayMs = 0;
  // A message is kept when the sink answers it, as a server commits a message when it accepts
  // it: one whose connection closed before that (the client stopped waiting, or the network went down)
  // is not kept, and the client, which heard no answer, sends it again.
  const closed = new Set<string>();

  const smtp = new SMTPServer({
    authOptional: true,
    disabledCommands: ['STARTTLS'],
    logger: false,
    onConnect(_session, callback) {
      setTimeout(() => callback(), greetingDelayMs);
    },
    onClose(session) {
      closed.add(session.id);
      setTimeout(() => closed.delete(session.id), 60_000).unref();
    },
    onData(stream, session, callback) {
      const chunks: Buffer[] = [];
      stream.on('data', (chunk: Buffer) => chunks.push(chunk));
      stream.on('end', () => setTimeout(answer, answerDelayMs));
      const answer = () => {
        if (closed.has(session.id)) return callback(new Error('the connection closed before the message was accepted'));
        if (failures > 0) {
          failures -= 1;
          const error = Object.assign(new Error('Temporary failure, try again later (simulated)'), {
            responseCode: 451,
          });
          return callback(error);
        }
        stored.push(received(Buffer.concat(chunks)));
        callback();
      };
    },
  });
  await new Promise<void>((resolve, reject) => {
    smtp.once('error', reject);
    smtp.listen(smtpPort, host, () => resolve());
  });

  const app = express();
  app.disable('x-powered-by');
  // The messages hold customers' addresses, /_sink changes its behaviour: no other page may
  // read the one or post to the other from the developer's browser.
  app.use(localToolGuard({ allowedHosts }), operatorOnly);
  app.use(express.json());
  const summary = ({ Text, HTML: _html, Headers: _headers, Date: _date, ...rest }: StoredMessage) => ({
    ...rest,
    Snippet: Text.slice(0, 250),
    Attachments: 0,
    Tags: [],
  });
  /** Mailpit's answer to a listing or a search: a page of `found`, newest first, with the counts. */
  const listing = async (query: Request['query'], found: Received[]) => {
    const start = Math.max(0, Number(query.start ?? 0) || 0);
    const limit = Math.max(1, Number(query.limit ?? 50) || 50);
    const newestFirst = [...found].reverse();
    const page = await Promise.all(newestFirst.slice(start, start + limit).map((m) => m.parsed()));
    return {
      total: stored.length,
      unread: stored.filter((m) => !m.read).length,
      count: page.length,
      messages_count: found.length,
      messages_unread: found.filter((m) => !m.read).length,
      start,
      tags: [],
      messages: page.map(summary),
    };
  };
  app.get('/api/v1/messages', async (req, res) => void res.json(await listing(req.query, stored)));
  // Mailpit's search, for the one term a sender asks it: `message-id:<a part of the Message-ID>`.
  // A dispatcher whose send's reply was lost asks it before sending again (its lookup).
  app.get('/api/v1/search', async (req, res) => {
    const query = typeof req.query.query === 'string' ? req.query.query.trim() : '';
    const term = /^message-id:<?([^<>\s]+?)>?$/i.exec(query)?.[1];
    if (!term) return void res.status(400).send('the sink searches by message-id:<Message-ID> only');
    res.json(
      await listing(
        req.query,
        stored.filter((m) => m.messageId.includes(term)),
      ),
    );
  });
  // Mailpit accepts `latest` wherever a message id goes: the newest message.
  const find = (id: string) => (id === 'latest' ? stored.at(-1) : stored.find((m) => m.ID === id));
  app.get('/api/v1/message/:id', async (req, res) => {
    const message = find(req.params.id);
    if (!message) return void res.status(404).send('message not found');
    message.read = true;
    const { Headers: _headers, Created: _created, ...rest } = await message.parsed();
    res.json({ ...rest, Tags: [], Inline: [], Attachments: [] });
  });
  app.get('/api/v1/message/:id/headers', async (req, res) => {
    const message = find(req.params.id);
    if (!message) return void res.status(404).send('message not found');
    res.json((await message.parsed()).Headers);
  });
  app.delete('/api/v1/messages', (req, res) => {
    const ids = (req.body as { IDs?: string[] } | undefined)?.IDs;
    if (ids?.length) {
      for (const id of ids) {
        const index = stored.findIndex((m) => m.ID === id);
        if (index >= 0) stored.splice(index, 1);
      }
    } else {
      stored.length = 0;
    }
    res.send('ok');
  });
  // Not Mailpit: a switch for tests and demos.
  app.post('/_sink/slow-greeting', (req, res) => {
    greetingDelayMs = Number((req.body as { ms?: number }).ms ?? 0);
    res.json({ greetingMs: greetingDelayMs });
  });
  app.post('/_sink/slow-answers', (req, res) => {
    answerDelayMs = Number((req.body as { ms?: number }).ms ?? 0);
    res.json({ answerMs: answerDelayMs });
  });
  app.post('/_sink/fail-next', (req, res) => {
    failures = Number((req.body as { count?: number }).count ?? 1);
    res.json({ failNext: failures });
  });
  app.get('/health', (_req, res) => void res.json({ status: 'ok' }));
  const http = await new Promise<Server>((resolve, reject) => {
    const server = app.listen(httpPort, host, (error?: Error) => (error ? reject(error) : resolve(server)));
  });

  return {
    smtpPort: (smtp.server.address() as AddressInfo).port,
    httpPort: (http.address() as AddressInfo).port,
    messages: () => Promise.all(stored.map((m) => m.parsed())),
    failNext: (count) => void (failures = count),
    slowGreeting: (ms) => void (greetingDelayMs = ms),
    slowAnswers: (ms) => void (answerDelayMs = ms),
    clear: () => void (stored.length = 0),
    close: async () => {
      await new Promise<void>((resolve) => smtp.close(() => resolve()));
      await new Promise<void>((resolve) => http.close(() => resolve()));
    },
  };
}

/** A message as the sink keeps it: as it came, parsed once someone asks. */
interface Received {
  readonly ID: string;
  /** Its Message-ID without the angle brackets, read from its header when it came: searched unparsed. */
  readonly messageId: string;
  read: boolean;
  parsed(): Promise<StoredMessage>;
}

function received(raw: Buffer, at = new Date()): Received {
  const ID = randomUUID();
  const size = raw.length;
  let unparsed: Buffer | undefined = raw;
  let parse: Promise<Omit<StoredMessage, 'Read'>> | undefined;
  const message: Received = {
    ID,
    messageId: messageIdOf(raw),
    read: false,
    parsed: () => {
      if (!parse) {
        // Only what toStored keeps: no HTML made from the text, and so no links found in it.
        parse = simpleParser(unparsed!, { skipTextToHtml: true, skipTextLinks: true, skipImageLinks: true }).then(
          (mail) => toStored(mail, { ID, size, received: at }),
        );
        unparsed = undefined; // the parse holds it now; once parsed, only what it made is kept
      }
      return parse.then((stored) => ({ ...stored, Read: message.read }));
    },
  };
  return message;
}

/** The Message-ID header of a raw message (its header block only), without angle brackets; '' without one. */
function messageIdOf(raw: Buffer): string {
  const end = raw.indexOf('\r\n\r\n');
  const headers = raw.subarray(0, end < 0 ? raw.length : end).toString('latin1');
  return /^message-id:\s*<?([^>\r\n]*)>?/im.exec(headers)?.[1]?.trim() ?? '';
}

function toStored(
  mail: ParsedMail,
  { ID, size, received }: { ID: string; size: number; received: Date },
): Omit<StoredMessage, 'Read'> {
  const list = (value: AddressObject | AddressObject[] | undefined): Address[] =>
    (Array.isArray(value) ? value : value ? [value] : []).flatMap((group) =>
      group.value.map((a) => ({ Name: a.name ?? '', Address: a.address ?? '' })),
    );
  // No prototype: a header may be named `constructor`, `toString` or `__proto__`.
  const headers: Record<string, string[]> = Object.create(null) as Record<string, string[]>;
  for (const line of mail.headerLines) {
    const [name, ...value] = line.line.split(':');
    (headers[name!.trim()] ??= []).push(value.join(':').trim());
  }
  return {
    ID,
    MessageID: (mail.messageId ?? '').replace(/^<|>$/g, ''),
    From: list(mail.from)[0] ?? { Name: '', Address: '' },
    To: list(mail.to),
    Cc: list(mail.cc),
    Bcc: list(mail.bcc),
    ReplyTo: list(mail.replyTo),
    Subject: mail.subject ?? '',
    Created: received.toISOString(),
    Date: (mail.date ?? received).toISOString(),
    Size: size,
    Text: mail.text ?? '',
    HTML: typeof mail.html === 'string' ? mail.html : '',
    Headers: headers,
  };
}
