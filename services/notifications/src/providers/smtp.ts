import nodemailer from 'nodemailer';

/** One email as the dispatcher hands it to the mail server. */
export interface OutgoingEmail {
  readonly from: string;
  readonly to: string;
  readonly subject: string;
  readonly text: string | null;
  readonly html: string | null;
  readonly messageId: string;
}

/** The mail server's client: what the dispatcher asks of it. */
export interface SmtpClient {
  /** Sends one email; rejects with an {@link SmtpSendError} saying whether the server may have taken it. */
  send(mail: OutgoingEmail): Promise<void>;
  /**
   * Whether the provider accepted a message with this Message-ID, asked before an email whose
   * last send has an unknown outcome is sent again; absent, or resolving `undefined`, when the
   * provider offers no way to ask (then the email is sent again, and the copy counted). Rejects
   * when it cannot be asked now.
   */
  readonly lookup?: (messageId: string) => Promise<boolean | undefined>;
  /** The mail server, for the SMTP client span (never the recipient: customer data stays out of traces). */
  readonly server: Record<string, string | number>;
  close(): void;
}

/** What a failed send says; see {@link smtpFailureOf}. */
export interface SmtpFailure {
  /** The server's reply code, 0 when it never answered. */
  readonly responseCode: number;
  /** Why, in words: nodemailer's code, which wait ran out or which socket error, and its message. */
  readonly reason: string;
  /** The server may have taken the message all the same: all of it went and no reply came. */
  readonly unconfirmed: boolean;
}

/** A send that failed, with what the dispatcher needs to know of it. */
export class SmtpSendError extends Error {
  readonly code = 'smtp_send_failed';
  constructor(
    readonly failure: SmtpFailure,
    options: { cause: unknown },
  ) {
    super(`the email was not sent: ${failure.reason}`, options);
  }
}

/**
 * SMTP over nodemailer, pooled: a few connections kept open and shared, instead of one per email.
 * Nodemailer waits minutes by default; `timeoutMs` bounds each of its waits (connecting, the
 * greeting, any silence after), which is what the dispatcher's lease covers. With `lookupUrl`
 * (a Mailpit-compatible API: Mailpit's own, or the SMTP sink's) it can say whether a message
 * was accepted ({@link SmtpClient.lookup}).
 */
export function createSmtpClient({
  smtpUrl,
  connections,
  timeoutMs,
  lookupUrl,
}: {
  /** e.g. smtp://127.0.0.1:1025; credentials in the URL are never logged. */
  smtpUrl: string;
  connections: number;
  timeoutMs: number;
  /** e.g. http://127.0.0.1:8025; credentials in the URL are sent as basic auth, never logged. */
  lookupUrl?: string;
}): SmtpClient {
  const connection = connectionOf(smtpUrl);
  const transport = nodemailer.createTransport({
    ...connection, // nodemailer ignores the options below beside a `url`
    pool: true,
    maxConnections: connections,
    connectionTimeout: timeoutMs,
    greetingTimeout: timeoutMs,
    socketTimeout: timeoutMs,
  });
  // The sends under way, by Message-ID: each learns here when its connection has read the whole
  // message (after the server's 354), which is when the server may take it.
  const underWay = new Map<string, { handedOver: boolean }>();
  transport.use('stream', (mail, done) => {
    const send = underWay.get(String(mail.data.messageId));
    // The message's stream ends once the connection has read all of it, to write it and the
    // final dot: a failure before that, the server cannot have taken the message.
    if (send) mail.message.processFunc((message) => message.once('end', () => void (send.handedOver = true)));
    done();
  });
  return {
    send: async ({ text, html, ...mail }) => {
      const send = { handedOver: false };
      underWay.set(mail.messageId, send);
      try {
        await transport.sendMail({ ...mail, text: text ?? undefined, html: html ?? undefined });
      } catch (error) {
        throw new SmtpSendError(failureOf(error, send), { cause: error });
      } finally {
        underWay.delete(mail.messageId);
      }
    },
    ...(lookupUrl ? { lookup: mailpitLookup(lookupUrl, timeoutMs) } : {}),
    server: { 'server.address': connection.host, 'server.port': connection.port },
    close: () => transport.close(),
  };
}

/**
 * What a failed send says (see {@link SmtpFailure}). A send's own failure says whether its message
 * was handed over whole; any other error is taken as one that may have gone.
 */
export function smtpFailureOf(error: unknown): SmtpFailure {
  return error instanceof SmtpSendError ? error.failure : failureOf(error, { handedOver: true });
}

/**
 * A failure is unconfirmed only when the server never answered and the whole message had been
 * handed to the connection: a server commits a message at its final dot, so a connection that
 * was refused, timed out before its greeting (nodemailer's ETIMEDOUT with timeoutType
 * CONNECT_TIMEOUT or GREETING_TIMEOUT), or ended anywhere before the message did, sent nothing.
 */
function failureOf(error: unknown, { handedOver }: { handedOver: boolean }): SmtpFailure {
  const { responseCode, code, timeoutType, originalCode, message } = error as {
    responseCode?: number;
    code?: unknown;
    timeoutType?: unknown;
    originalCode?: unknown;
    message?: string;
  };
  // nodemailer's code says what kind of failure it was (ETIMEDOUT, ECONNECTION, ESOCKET, EAUTH…);
  // timeoutType which wait ran out, originalCode the socket's own error (ECONNREFUSED…).
  const kind = [code, timeoutType, originalCode].filter((part) => typeof part === 'string').join(' ');
  const reason = [kind, message ?? String(error)].filter(Boolean).join(': ');
  const replied = responseCode ?? 0;
  return { responseCode: replied, reason, unconfirmed: replied === 0 && handedOver };
}

/**
 * Mailpit's message search (`GET /api/v1/search?query=message-id:…`), which the SMTP sink serves
 * too. Both store a message before they answer its 250, so a message they accepted is found at once.
 * A server without the search (404: an older or a look-alike Mailpit) offers no way to ask.
 */
function mailpitLookup(lookupUrl: string, timeoutMs: number): (messageId: string) => Promise<boolean | undefined> {
  const url = new URL(lookupUrl);
  const authorization = url.username
    ? `Basic ${Buffer.from(`${decodeURIComponent(url.username)}:${decodeURIComponent(url.password)}`).toString('base64')}`
    : undefined;
  url.username = url.password = '';
  return async (messageId) => {
    const bare = messageId.replace(/^<|>$/g, '');
    const search = new URL('api/v1/search', url.href.endsWith('/') ? url : `${url.href}/`);
    search.searchParams.set('query', `message-id:${bare}`);
    search.searchParams.set('limit', '10');
    const res = await fetch(search, {
      headers: authorization ? { authorization } : {},
      signal: AbortSignal.timeout(timeoutMs),
    });
    if (!res.ok) {
      await res.body?.cancel(); // the connection goes back to the pool, not to the garbage collector
      if (res.status === 404) return undefined;
      throw new Error(`the message search answered ${res.status}`);
    }
    const { messages } = (await res.json()) as { messages?: { MessageID?: string }[] };
    // Mailpit matches a part of the Message-ID: only the whole one counts.
    return (messages ?? []).some((message) => message.MessageID === bare);
  };
}

/** smtp://user:password@host:port (smtps:// for TLS from the start) as nodemailer's connection options. */
function connectionOf(smtpUrl: string) {
  const url = new URL(smtpUrl);
  const secure = url.protocol === 'smtps:';
  return {
    host: url.hostname,
    port: Number(url.port || (secure ? 465 : 587)),
    secure,
    ...(url.username
      ? { auth: { user: decodeURIComponent(url.username), pass: decodeURIComponent(url.password) } }
      : {}),
  };
}
