import { randomUUID } from 'node:crypto';
import { asCustomer, asOperator, type OperatorTokens } from './tokens.js';

/**
 * The demo's four stories, driven through the public HTTP APIs only: one order that is paid,
 * one rejected for stock, one whose card is declined, one cancelled after payment (refunded).
 * The customer `ada` places and reads the orders; the operator reads payments and e-mails.
 */

/** Who places the clients' orders unless told otherwise. */
export const CUSTOMER = 'ada';

export interface SystemUrls {
  readonly orders: string;
  readonly inventory: string;
  readonly payments: string;
  readonly notifications: string;
}

export interface StoryResult {
  readonly story: string;
  readonly orderId: string;
  readonly expected: string;
  readonly status: string;
  readonly emails: string[];
  readonly payment: string;
  readonly ok: boolean;
}

interface Order {
  orderId: string;
  status: string;
}

const FINAL = new Set(['PAID', 'REJECTED', 'PAYMENT_FAILED', 'REFUNDED']);

export async function placeOrder(
  urls: SystemUrls,
  lines: { sku: string; quantity: number }[],
  paymentMethod = 'pm_card_visa',
  idempotencyKey?: string,
  customerId = CUSTOMER,
): Promise<Order> {
  // Always with an Idempotency-Key: a 503 can come after an ambiguous commit, and the retry
  // below must not place a second order.
  const key = idempotencyKey ?? randomUUID();
  const auth = await asCustomer(customerId);
  const res = await retryUnavailable(() =>
    fetch(`${urls.orders}/orders`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'idempotency-key': key, ...auth },
      body: JSON.stringify({ paymentMethod, lines }),
    }),
  );
  if (res.status !== 201) throw new Error(`POST /orders answered ${res.status}: ${await res.text()}`);
  return (await res.json()) as Order;
}

/** Repeats a request answered 503 (a busy or reconnecting dependency), after its Retry-After, a few times. */
async function retryUnavailable(request: () => Promise<Response>, attempts = 5): Promise<Response> {
  for (let attempt = 1; ; attempt++) {
    const res = await request();
    if (res.status !== 503 || attempt === attempts) return res;
    await new Promise((resolve) => setTimeout(resolve, Number(res.headers.get('retry-after') ?? 1) * 1000));
  }
}

/** GETs JSON, with `Authorization` when the resource needs a caller (see asCustomer, asOperator). */
export async function getJson<T>(url: string, auth: { authorization?: string } = {}): Promise<T> {
  const res = await fetch(url, { headers: auth });
  if (!res.ok) throw new Error(`GET ${url} answered ${res.status}`);
  return (await res.json()) as T;
}

/** Polls an order until it reaches one of `statuses`. */
export async function waitForStatus(
  urls: SystemUrls,
  orderId: string,
  statuses: ReadonlySet<string>,
  timeoutMs = 30_000,
  customerId = CUSTOMER,
): Promise<Order> {
  const deadline = Date.now() + timeoutMs;
  const auth = await asCustomer(customerId);
  for (;;) {
    const order = await getJson<Order>(`${urls.orders}/orders/${orderId}`, auth);
    if (statuses.has(order.status) || Date.now() > deadline) return order;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

async function settle(
  urls: SystemUrls,
  tokens: OperatorTokens,
  story: string,
  orderId: string,
  expected: string,
  wantEmails: string[],
): Promise<StoryResult> {
  const { status } = await waitForStatus(urls, orderId, new Set([expected]));
  const deadline = Date.now() + 15_000;
  let emails: { kind: string; status: string }[] = [];
  while (Date.now() < deadline) {
    emails = (
      await getJson<{ emails: { kind: string; status: string }[] }>(
        `${urls.notifications}/emails?orderId=${orderId}`,
        asOperator(tokens.notifications),
      )
    ).emails;
    if (wantEmails.every((kind) => emails.some((e) => e.kind === kind && e.status === 'sent'))) break;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  const payments = (
    await getJson<{ payments: { status: string }[] }>(
      `${urls.payments}/payments?orderId=${orderId}`,
      asOperator(tokens.payments),
    )
  ).payments;
  const sent = emails.filter((e) => e.status === 'sent').map((e) => e.kind);
  return {
    story,
    orderId,
    expected,
    status,
    emails: sent,
    payment: payments.map((p) => p.status).join(',') || '-',
    ok: status === expected && wantEmails.every((kind) => sent.includes(kind)),
  };
}

/** Needs payments' and notifications' operator tokens: payments and e-mails are operator reads. */
export async function runStories(urls: SystemUrls, tokens: OperatorTokens): Promise<StoryResult[]> {
  const paid = await placeOrder(urls, [{ sku: 'keyboard', quantity: 1 }]);
  const rejected = await placeOrder(urls, [{ sku: 'sold-out', quantity: 1 }]);
  const declined = await placeOrder(urls, [{ sku: 'mouse', quantity: 1 }], 'pm_card_chargeDeclined');
  const refunded = await placeOrder(urls, [{ sku: 'monitor', quantity: 1 }]);

  const results = await Promise.all([
    settle(urls, tokens, 'paid', paid.orderId, 'PAID', ['order-received', 'receipt']),
    settle(urls, tokens, 'rejected for stock', rejected.orderId, 'REJECTED', ['order-received']),
    settle(urls, tokens, 'card declined', declined.orderId, 'PAYMENT_FAILED', ['order-received']),
    (async () => {
      await waitForStatus(urls, refunded.orderId, FINAL);
      const cancel = await fetch(`${urls.orders}/orders/${refunded.orderId}/cancel`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...(await asCustomer(CUSTOMER)) },
        body: JSON.stringify({ reason: 'changed my mind' }),
      });
      if (!cancel.ok) throw new Error(`cancel answered ${cancel.status}: ${await cancel.text()}`);
      return settle(urls, tokens, 'cancelled after payment', refunded.orderId, 'REFUNDED', [
        'order-received',
        'receipt',
        'refund',
      ]);
    })(),
  ]);
  return results;
}
