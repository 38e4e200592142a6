import {
  connectDatabase,
  createDispatcher,
  handleOrderPlaced,
  handlePaymentCaptured,
  handlePaymentRefunded,
  PACKAGE_TABLES,
  type PrismaClient,
  type Tx,
} from '@idem/notifications';
import { createLogger } from '@idem/runtime';
import { startSmtpSink } from '@idem/smtp-sink';
import { testMessage } from '@idem/testkit';
import { deliver, type Model, type Service, type Story } from '../model.js';
import { worldOf } from './world.js';

const ORDER = '5a0c1d2e-0000-4000-8000-000000000004';
const CUSTOMER = 'ada@example.com';

/**
 * Notifications, for one order: placed (its summary kept, the "order received" e-mail queued),
 * paid (the receipt), refunded (the refund notice), and the dispatcher's turn — a send to a real
 * SMTP server (the sink), then the record. A crash after the server accepted an e-mail and
 * before its record sends it again: SMTP's documented window, counted apart.
 */
export const notifications: Model = {
  name: 'notifications',
  wrongWays: [],
  async open() {
    const world = await worldOf<Tx, PrismaClient>('notifications', PACKAGE_TABLES, connectDatabase);
    const { db, explored, clock, switches, inbox } = world;
    const sink = await startSmtpSink({ smtpPort: 0, httpPort: 0, host: '127.0.0.1' });
    const dispatcher = createDispatcher({
      db: explored,
      smtpUrl: `smtp://127.0.0.1:${sink.smtpPort}`,
      from: 'shop@idem.local',
      log: createLogger('notifications', 'silent'),
      now: clock.now,
      faults: switches,
      leaseMs: 30_000,
      smtpTimeoutMs: 2_000,
      // One e-mail a turn: a scheduled side is one flow of statements.
      batchSize: 1,
      smtpConnections: 1,
    });
    const order = { aggregateId: ORDER, correlationId: ORDER };
    const placed = testMessage('orders.order-placed.v1', {
      ...order,
      body: { orderId: ORDER, customerEmail: CUSTOMER },
    });
    const captured = testMessage('payments.payment-captured.v1', { ...order, body: { orderId: ORDER } });
    const refunded = testMessage('payments.payment-refunded.v1', { ...order, body: { orderId: ORDER } });
    const steps: Record<string, () => Promise<unknown>> = {
      placed: () => deliver(inbox, 'notifications.order-placed.v1', placed, handleOrderPlaced(clock)),
      captured: () => deliver(inbox, 'notifications.payment-captured.v1', captured, handlePaymentCaptured(clock)),
      refunded: () => deliver(inbox, 'notifications.payment-refunded.v1', refunded, handlePaymentRefunded(clock)),
      dispatcher: () => dispatcher.runOnce(),
    };
    let crashes = 0;
    let windows: string[] = [];
    const service: Service = {
      databaseUrl: world.databaseUrl,
      stories: [
        { name: 'placed, paid, e-mailed', steps: ['placed', 'captured', 'dispatcher'] },
        {
          name: 'placed, paid, refunded, e-mailed',
          steps: ['placed', 'captured', 'refunded', 'dispatcher'],
          copies: 1,
        },
      ],
      async reset() {
        await world.reset();
        sink.clear();
        crashes = 0;
      },
      step(name, { crash = false } = {}) {
        if (crash && name === 'dispatcher') crashes++;
        return world.step(steps[name]!, crash ? ['rollback-after-handler', 'crash-after-send'] : undefined);
      },
      async settle() {
        // The dispatcher's turns until nothing is left to send (an e-mail waiting for its order looks again later).
        for (let turn = 0; turn < 20; turn++) {
          clock.advance(10 * 60_000);
          await dispatcher.runOnce();
          const [open] = await db.$queryRaw<{ n: number }[]>`
            SELECT count(*)::int AS n FROM email_work_items WHERE status <> 'sent'`;
          if (open!.n === 0) return;
        }
      },
      // One read of the e-mails per schedule: what check finds, windows says.
      async check(story) {
        const read = await mail(db, sink, story, crashes);
        windows = read.windows;
        return read.broken;
      },
      windows: async () => windows,
      async state() {
        const rows = await db.$queryRaw<unknown[]>`
          SELECT array_agg(kind || ':' || status ORDER BY kind) AS items FROM email_work_items`;
        const received = (await sink.messages()).map((m) => m.Subject).sort();
        return JSON.stringify({ rows, received });
      },
      async close() {
        await dispatcher.stop();
        await sink.close();
        await world.close();
      },
    };
    return service;
  },
};

/** The e-mails one business fact each, as the server received them, after the story settled. */
async function mail(
  db: ReturnType<typeof connectDatabase>,
  sink: Awaited<ReturnType<typeof startSmtpSink>>,
  story: Story,
  crashes: number,
): Promise<{ broken: string[]; windows: string[] }> {
  const items = await db.$queryRaw<{ kind: string; status: string; message_id: string }[]>`
    SELECT kind, status, message_id FROM email_work_items ORDER BY kind`;
  const received = await sink.messages();
  const facts = story.steps.filter((step) => step !== 'dispatcher').length;
  const broken: string[] = [];
  const windows: string[] = [];
  if (items.length !== facts) broken.push(`${items.length} e-mails queued for ${facts} business facts`);
  for (const item of items) {
    const copies = received.filter((m) => m.MessageID === item.message_id.replace(/^<|>$/g, '')).length;
    if (item.status !== 'sent') broken.push(`the ${item.kind} e-mail ended ${item.status}, not sent`);
    if (copies === 0) broken.push(`the ${item.kind} e-mail never reached the server`);
    if (copies > 1 + crashes) broken.push(`the ${item.kind} e-mail reached the server ${copies} times`);
    else if (copies > 1) windows.push('crash_window_send');
  }
  if (received.some((m) => m.To.some((to) => to.Address !== CUSTOMER)))
    broken.push('an e-mail went to an address that is not the customer’s');
  return { broken, windows };
}
