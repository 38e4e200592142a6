import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { dropDatabase, migrate } from '@idem/database';
import { connectDatabase, createDispatcher, PACKAGE_TABLES } from '@idem/notifications';
import { createLogger } from '@idem/runtime';
import { postgresServerUrl, uniqueName } from '@idem/testkit';
import { median } from './stats.js';

/** One drain of a backlog of e-mails against the SMTP sink. */
export interface EmailDrainSample {
  readonly emails: number;
  readonly seconds: number;
  readonly perSecond: number;
}

/** Section 7: how fast the dispatcher drains a backlog, with the service's defaults. */
export interface EmailDrainResult {
  readonly emails: number;
  readonly connections: number;
  readonly samples: EmailDrainSample[];
  /** The median rate of the samples, e-mails a second. */
  readonly perSecond: number;
}

/** The e-mails a second a backlog must drain at, at least: twice what 20 orders/s make (40), and room to catch up. */
export const EMAIL_DRAIN_TARGET = 100;

const root = fileURLToPath(new URL('../../../', import.meta.url));
const migrationsDir = fileURLToPath(new URL('../../../services/notifications/prisma/migrations', import.meta.url));

/**
 * A backlog of `emails` due e-mail work items (as notifications' consumers leave them after an
 * outage: oldest first, nothing notifies), one dispatcher with the service's defaults (5 SMTP
 * connections, its poll, LISTEN), and the SMTP sink in its own process as the native run starts
 * it: the time from the dispatcher's start until every one is sent, `repetitions` times on a
 * fresh database each.
 */
export async function runEmailDrain({
  emails,
  repetitions,
  log,
}: {
  emails: number;
  repetitions: number;
  log: (line: string) => void;
}): Promise<EmailDrainResult> {
  const sink = await startSink();
  const connections = 5;
  const samples: EmailDrainSample[] = [];
  try {
    for (let repetition = 0; repetition < repetitions; repetition++) {
      const databaseUrl = `${postgresServerUrl}/${uniqueName('idem_bench_emails').toLowerCase()}`;
      await migrate({ databaseUrl, migrationsDir, include: PACKAGE_TABLES });
      const db = connectDatabase(databaseUrl);
      try {
        await db.$executeRawUnsafe(backlogInsert(emails));
        const dispatcher = createDispatcher({
          db,
          smtpUrl: sink.smtpUrl,
          lookupUrl: sink.httpUrl,
          from: 'shop@idem.local',
          log: createLogger('notifications', 'silent'),
          databaseUrl,
          smtpConnections: connections,
        });
        const started = performance.now();
        dispatcher.start();
        let sent = 0;
        while (sent < emails) {
          await new Promise((resolve) => setTimeout(resolve, 50));
          sent = Number((await db.$queryRawUnsafe<{ n: number }[]>(SENT))[0]!.n);
        }
        const seconds = (performance.now() - started) / 1000;
        await dispatcher.stop();
        samples.push({ emails, seconds, perSecond: emails / seconds });
        log(`  ${emails} e-mails in ${seconds.toFixed(1)} s: ${Math.round(emails / seconds)} e-mails/s`);
      } finally {
        await db.$disconnect();
        await dropDatabase(databaseUrl);
      }
      await fetch(`${sink.httpUrl}/api/v1/messages`, { method: 'DELETE' });
    }
  } finally {
    await sink.stop();
  }
  return { emails, connections, samples, perSecond: median(samples.map((s) => s.perSecond)) };
}

const SENT = `SELECT count(*)::int AS n FROM email_work_items WHERE status = 'sent'`;

/** `count` order-received e-mails, written and due a millisecond apart, the oldest first. */
function backlogInsert(count: number): string {
  return `
    INSERT INTO email_work_items (id, business_key, kind, order_id, to_address, subject, text_body, html_body,
                                  message_id, status, attempts, next_attempt_at, created_at, updated_at)
    SELECT id, 'order-received:' || order_id, 'order-received', order_id, 'ada@example.com',
           'We received your order', 'Thank you for your order ' || order_id, '<p>Thank you for your order</p>',
           '<email-' || id || '@idem.local>', 'pending', 0, due, due, due
      FROM (SELECT gen_random_uuid() AS id, gen_random_uuid() AS order_id,
                   now() - (${count} - n) * interval '1 millisecond' AS due
              FROM generate_series(1, ${count}) AS n) AS backlog`;
}

/** The SMTP sink in a process of its own, as the native run starts it, on ports the system picks. */
async function startSink(): Promise<{ smtpUrl: string; httpUrl: string; stop(): Promise<void> }> {
  const child = spawn(
    process.execPath,
    ['--conditions=development', '--import', 'tsx', 'infra/smtp-sink/src/main.ts'],
    {
      cwd: root,
      env: { ...process.env, SMTP_SINK_PORT: '0', SMTP_SINK_HTTP_PORT: '0' },
      stdio: ['ignore', 'pipe', 'inherit'],
    },
  );
  const ports = await new Promise<{ smtp: string; http: string }>((resolve, reject) => {
    let out = '';
    child.once('exit', (code) => reject(new Error(`the SMTP sink exited (${code}) before it listened`)));
    child.stdout.on('data', (chunk: Buffer) => {
      out += chunk.toString();
      const found = /SMTP on :(\d+), HTTP API on :(\d+)/.exec(out);
      if (found) resolve({ smtp: found[1]!, http: found[2]! });
    });
  });
  return {
    smtpUrl: `smtp://127.0.0.1:${ports.smtp}`,
    httpUrl: `http://127.0.0.1:${ports.http}`,
    stop: () =>
      new Promise<void>((resolve) => {
        child.removeAllListeners('exit');
        child.once('exit', () => resolve());
        child.kill('SIGTERM');
      }),
  };
}
