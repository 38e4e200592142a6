import nodemailer from 'nodemailer';

/** The mail server's client: one method, the only thing the dispatcher asks of it. */
export interface SmtpClient {
  /** Sends one email; rejects with what the server or the connection said (`smtpFailureOf`). */
  send(mail: {
    readonly from: string;
    readonly to: string;
    readonly subject: string;
    readonly text: string | null;
    readonly html: string | null;
    readonly messageId: string;
  }): Promise<void>;
  /** The mail server, for the SMTP client span (never the recipient: customer data stays out of traces). */
  readonly server: Record<string, string | number>;
  close(): void;
}

/**
 * SMTP over nodemailer, pooled: a few connections kept open and shared, instead of one per email.
 * Nodemailer waits minutes by default; `timeoutMs` bounds each of its waits (connecting, the
 * greeting, any silence after), which is what the dispatcher's lease covers.
 */
export function createSmtpClient({
  smtpUrl,
  connections,
  timeoutMs,
}: {
  /** e.g. smtp://127.0.0.1:1025; credentials in the URL are never logged. */
  smtpUrl: string;
  connections: number;
  timeoutMs: number;
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
  return {
    send: async ({ text, html, ...mail }) => {
      await transport.sendMail({ ...mail, text: text ?? undefined, html: html ?? undefined });
    },
    server: { 'server.address': connection.host, 'server.port': connection.port },
    close: () => transport.close(),
  };
}

/**
 * What a failed send says: the server's reply code (0 when it never answered), why, in words, and
 * whether the server may have taken the message all the same (`unconfirmed`): any failure with no
 * reply from the server, since it may have been a 250 lost on the way, except a connection refused
 * or never made, or one that timed out before its greeting: nothing was sent on it.
 */
export function smtpFailureOf(error: unknown): { responseCode: number; reason: string; unconfirmed: boolean } {
  const responseCode = (error as { responseCode?: number }).responseCode ?? 0;
  // nodemailer's code says what kind of failure it was (ETIMEDOUT, ECONNECTION, EAUTH…).
  const { code, message, timeoutType } = error as { code?: unknown; message?: string; timeoutType?: unknown };
  const reason = [typeof code === 'string' ? code : undefined, message ?? String(error)].filter(Boolean).join(': ');
  // No reply to the message: unless the connection or its greeting never came, a 250 may have been lost.
  const neverSent =
    NEVER_CONNECTED.test(reason) ||
    (code === 'ETIMEDOUT' && (timeoutType === 'connection' || timeoutType === 'greeting'));
  const unconfirmed = responseCode === 0 && !neverSent;
  return { responseCode, reason, unconfirmed };
}

/** A socket error of a connection that was never made: nothing was sent on it. */
const NEVER_CONNECTED = /ECONNREFUSED|ENOTFOUND|EAI_AGAIN|EHOSTUNREACH|ENETUNREACH/;

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
