/**
 * The failure windows, opened on real processes: a part of the running system is restarted
 * with a fault switch, dies by SIGKILL exactly there, is restarted plainly, and the order still
 * ends once — checked through HTTP, the provider, the mail server and read-only SQL.
 */
import { asOperator, getJson, placeOrder, waitForStatus, type RunningSystem } from '@idem/native-run';
import { listStripe } from '@idem/checker';
import { waitFor } from '@idem/testkit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { checkSystem, readRows, restartPart, restartWithFaults, startIsolatedSystem, stripeOf } from './support.js';

let system: RunningSystem;
beforeAll(async () => {
  system = await startIsolatedSystem();
}, 180_000);
afterAll(() => system?.stop(), 60_000);

const order = (idempotencyKey?: string) =>
  placeOrder(system.urls, [{ sku: 'cable', quantity: 1 }], 'pm_card_visa', idempotencyKey);
const paid = (orderId: string) => waitForStatus(system.urls, orderId, new Set(['PAID']), 60_000);
const reservationsOf = (orderId: string) =>
  readRows(system.databaseUrls.inventory, `SELECT status FROM reservations WHERE order_id = $1`, [orderId]);
const metricsOf = (url: string) => fetch(`${url}/metrics`).then((r) => r.text());
const count = (metrics: string, consumer: string, outcome: string) =>
  Number(
    metrics
      .split('\n')
      .find(
        (l) =>
          l.startsWith('idem_deliveries_total{') &&
          l.includes(`consumer="${consumer}"`) &&
          l.includes(`outcome="${outcome}"`),
      )
      ?.split(' ')
      .at(-1) ?? 0,
  );

describe('crash points, on real processes', () => {
  it('a consumer SIGKILLed after its commit and before settlement: redelivered, classified duplicate, effect once', async () => {
    const { exited: died } = await restartWithFaults(
      system,
      'inventory',
      'crash-after-commit consumer=inventory.order-placed.v1 count=1',
    );
    const { orderId } = await order();
    expect(await died).toBe('SIGKILL');
    await system.restart('inventory');
    expect((await paid(orderId)).status).toBe('PAID');

    expect(await reservationsOf(orderId)).toEqual([{ status: expect.stringMatching(/^(reserved|committed)$/) }]);
    await waitFor(
      async () => count(await metricsOf(system.urls.inventory), 'inventory.order-placed.v1', 'duplicate') >= 1,
      {
        what: 'the redelivery to be counted as a duplicate',
      },
    );
  }, 120_000);

  it('a transaction forced to roll back after the handler ran: no record, the redelivery processes it, effect once', async () => {
    await restartWithFaults(system, 'inventory', 'rollback-after-handler consumer=inventory.order-placed.v1 count=1');
    const { orderId } = await order();
    expect((await paid(orderId)).status).toBe('PAID');
    expect(await reservationsOf(orderId)).toEqual([{ status: expect.stringMatching(/^(reserved|committed)$/) }]);
    const metrics = await metricsOf(system.urls.inventory);
    expect(count(metrics, 'inventory.order-placed.v1', 'transient_failure')).toBe(1);
    expect(count(metrics, 'inventory.order-placed.v1', 'processed')).toBeGreaterThanOrEqual(1);
    await restartPart(system, 'inventory'); // without the fault
  }, 120_000);

  it('a relay SIGKILLed after publishing and before marking: published again, the copy suppressed, one effect per consumer', async () => {
    const { exited: died } = await restartWithFaults(system, 'orders', 'crash-after-publish count=1');
    // The relay wakes at the commit and may kill the process before the HTTP answer is out: the
    // client retries with its Idempotency-Key and gets the stored answer, not a second order.
    const key = `crash-${Date.now()}`;
    const first = await order(key).catch(() => undefined);
    expect(await died).toBe('SIGKILL');
    await system.restart('orders');
    const { orderId } = await order(key);
    if (first) expect(first.orderId).toBe(orderId);
    expect((await paid(orderId)).status).toBe('PAID');
    const [placed] = await readRows<{ message_id: string; attempts: number }>(
      system.databaseUrls.orders,
      `SELECT message_id::text, attempts FROM outbox_messages WHERE envelope->'body'->>'orderId' = $1 AND type = 'orders.order-placed.v1'`,
      [orderId],
    );
    for (const [service, consumer] of [
      ['inventory', 'inventory.order-placed.v1'],
      ['notifications', 'notifications.order-placed.v1'],
    ] as const) {
      expect(
        await readRows(
          system.databaseUrls[service],
          `SELECT 1 FROM processed_messages WHERE consumer = $1 AND message_id = $2`,
          [consumer, placed!.message_id],
        ),
      ).toHaveLength(1);
    }
    const emails = await getJson<{ emails: { kind: string }[] }>(
      `${system.urls.notifications}/emails?orderId=${orderId}`,
      asOperator(system.adminTokens.notifications),
    );
    expect(emails.emails.filter((e) => e.kind === 'order-received')).toHaveLength(1);
  }, 120_000);

  it('payments SIGKILLed after Stripe answered and before recording: one PaymentIntent, order PAID', async () => {
    const { exited: died } = await restartWithFaults(system, 'payments', 'crash-after-provider-call count=1');
    const { orderId } = await order();
    expect(await died).toBe('SIGKILL');
    await system.restart('payments');
    expect((await paid(orderId)).status).toBe('PAID');
    const intents = await listStripe<{ id: string; metadata: { order_id: string } }>(
      stripeOf(system),
      '/v1/payment_intents',
    );
    expect(intents.filter((p) => p.metadata.order_id === orderId)).toHaveLength(1);
  }, 120_000);

  it('notifications SIGKILLed after SMTP accepted and before marking sent: sent, at most one extra copy with the same Message-ID', async () => {
    const { exited: died } = await restartWithFaults(system, 'notifications', 'crash-after-send count=1');
    const { orderId } = await order();
    expect(await died).toBe('SIGKILL');
    await system.restart('notifications');
    const sent = await waitFor(
      async () => {
        const { emails } = await getJson<{ emails: { kind: string; status: string; messageId: string }[] }>(
          `${system.urls.notifications}/emails?orderId=${orderId}`,
          asOperator(system.adminTokens.notifications),
        );
        const received = emails.find((e) => e.kind === 'order-received');
        return received?.status === 'sent' && received;
      },
      { timeoutMs: 60_000, what: 'the order-received email to be marked sent' },
    );
    const mail = await getJson<{ messages: { MessageID: string }[] }>(`${system.urls.mail}/api/v1/messages?limit=1000`);
    const copies = mail.messages.filter((m) => `<${m.MessageID}>` === sent.messageId);
    expect(copies.length).toBeGreaterThanOrEqual(1);
    expect(copies.length).toBeLessThanOrEqual(2);
  }, 120_000);

  it('notifications SIGKILLed after the commit that leased its e-mail to its own dispatcher, before sending: sent once, by a claim once the lease ran out', async () => {
    // The consumer writes the e-mail already leased to the process's dispatcher, which takes it
    // once the transaction commits; the kill comes right after that commit, before any SMTP.
    const { exited: died } = await restartWithFaults(
      system,
      'notifications',
      'crash-after-commit consumer=notifications.order-placed.v1 count=1',
    );
    const { orderId } = await order();
    expect(await died).toBe('SIGKILL');
    await system.restart('notifications');
    const receivedEmail = () =>
      readRows<{ status: string; attempts: number; message_id: string }>(
        system.databaseUrls.notifications,
        `SELECT status, attempts, message_id FROM email_work_items WHERE order_id = $1 AND kind = 'order-received'`,
        [orderId],
      );
    const [sent] = await waitFor(
      async () => ((await receivedEmail())[0]?.status === 'sent' ? receivedEmail() : false),
      {
        timeoutMs: 60_000,
        what: 'the order-received e-mail to be sent by the restarted dispatcher',
      },
    );
    // Written leased (one attempt), then claimed by the restarted process (the second): the dead
    // process sent nothing, so the mail server has exactly one copy.
    expect(sent!.attempts).toBe(2);
    const mail = await getJson<{ messages: { MessageID: string }[] }>(`${system.urls.mail}/api/v1/messages?limit=1000`);
    expect(mail.messages.filter((m) => `<${m.MessageID}>` === sent!.message_id)).toHaveLength(1);
  }, 120_000);

  it('after all of it, the checker finds nothing lost and nothing doubled', async () => {
    const report = await waitFor(
      async () => {
        const current = await checkSystem(system);
        return current.ok && current;
      },
      { timeoutMs: 60_000, what: 'a clean checker report' },
    );
    expect(report.findings.filter((f) => f.check !== 'crash_window_send')).toEqual([]);
  }, 90_000);
});
