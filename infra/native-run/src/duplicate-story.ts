import { randomUUID } from 'node:crypto';
import { readJournal, type DeliveryEntry } from '@idem/messaging';
import { SERVICE_NAMES } from '@idem/shop';
import { Redis } from 'ioredis';
import { CUSTOMER, waitForStatus, type SystemUrls } from './stories.js';
import { asCustomer } from './tokens.js';

export type DuplicateStory =
  | { readonly ran: true; readonly orderId: string; readonly status: string; readonly consumers: ConsumerCount[] }
  | { readonly ran: false; readonly why: string };

export interface ConsumerCount {
  readonly consumer: string;
  readonly processed: number;
  readonly suppressed: number;
}

/**
 * The fifth story: one order placed while the orders process publishes every message twice
 * (`publish-twice`, switched on for this order only, through the process's fault switches),
 * then, from the delivery journal, how many deliveries each consumer processed and how many
 * it suppressed as duplicates. Needs a system started with IDEM_FAULTS_ENABLED=1 and orders'
 * operator token (ORDERS_ADMIN_TOKEN), which opens its fault switches.
 */
export async function duplicateStory(
  urls: SystemUrls,
  {
    ordersToken,
    redisUrl,
    queuePrefix,
  }: {
    /** Orders' operator token (or its fault switches' token): it opens the orders process's switches. */
    ordersToken: string | undefined;
    redisUrl: string;
    queuePrefix: string;
  },
): Promise<DuplicateStory> {
  if (!ordersToken) return { ran: false, why: 'set ORDERS_ADMIN_TOKEN (orders’ operator token) to run it' };
  const switches = (rules: unknown[]) =>
    fetch(`${urls.orders}/faults`, {
      method: 'PUT',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${ordersToken}` },
      body: JSON.stringify({ rules }),
    });
  const on = await switches([{ name: 'publish-twice', target: 'publisher' }]);
  if (!on.ok) {
    return {
      ran: false,
      why: `the orders process refused its fault switches (${on.status}): start it with IDEM_FAULTS_ENABLED=1 and this ORDERS_ADMIN_TOKEN`,
    };
  }
  const correlationId = randomUUID();
  let orderId: string;
  try {
    const res = await fetch(`${urls.orders}/orders`, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        'idempotency-key': randomUUID(),
        'x-correlation-id': correlationId,
        ...(await asCustomer(CUSTOMER)),
      },
      body: JSON.stringify({
        paymentMethod: 'pm_card_visa',
        lines: [{ sku: 'keyboard', quantity: 1 }],
      }),
    });
    if (res.status !== 201) throw new Error(`POST /orders answered ${res.status}: ${await res.text()}`);
    orderId = ((await res.json()) as { orderId: string }).orderId;
    await waitForStatus(urls, orderId, new Set(['PAID']));
  } finally {
    await switches([]);
  }
  const { status } = await waitForStatus(urls, orderId, new Set(['PAID']));
  // The journal is written after settlement and flushed every 100 ms: give the last ones a moment,
  // and a consumer seen with no processed delivery yet up to ten seconds more.
  await new Promise((resolve) => setTimeout(resolve, 1_000));
  const redis = new Redis(redisUrl);
  try {
    const deadline = Date.now() + 10_000;
    let consumers = await countDeliveries(redis, queuePrefix, correlationId);
    while (consumers.some((c) => c.processed === 0) && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 200));
      consumers = await countDeliveries(redis, queuePrefix, correlationId);
    }
    return { ran: true, orderId, status, consumers };
  } finally {
    redis.disconnect();
  }
}

/** Per consumer, the deliveries of one story the journal holds: processed, and suppressed as duplicates. */
async function countDeliveries(redis: Redis, queuePrefix: string, correlationId: string): Promise<ConsumerCount[]> {
  const deliveries = (await readJournal(redis, queuePrefix, SERVICE_NAMES)).entries.filter(
    (e): e is DeliveryEntry => e.kind === 'delivery' && e.correlationId === correlationId,
  );
  return [...new Set(deliveries.map((d) => d.consumer))].sort().map((consumer) => ({
    consumer,
    processed: deliveries.filter((d) => d.consumer === consumer && d.outcome === 'processed').length,
    suppressed: deliveries.filter((d) => d.consumer === consumer && d.outcome === 'duplicate').length,
  }));
}
