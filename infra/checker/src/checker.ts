import { serviceOf } from '@idem/contracts';
import { PUBLISHERS, SERVICE_NAMES, subscriptions, type EventType, type ServiceName } from '@idem/shop';
import { readOnly } from '@idem/database';

/**
 * The exactly-once checker: reads every service's database (in read-only transactions), the
 * payment provider and the mail server, and reports — per consumer and contract, against the
 * topology in @idem/contracts — what was lost, what happened twice, and what is stuck. It
 * writes nothing, so it is safe to point at production.
 */

export const SERVICES = SERVICE_NAMES;
export type Service = ServiceName;

export interface CheckerOptions {
  readonly databaseUrls: Record<Service, string>;
  /**
   * Stripe or the simulator, read through its list endpoints. Without it (a live key, which only
   * payments holds) the provider's checks are left out, and the report says so.
   */
  readonly stripe?: { readonly apiBase: string; readonly apiKey: string };
  /**
   * A Mailpit-compatible API (optional): a Message-ID received more than once fails the check,
   * unless a dispatcher that died or froze mid-send explains each copy (the documented window).
   */
  readonly mailApi?: string;
  /**
   * The operator token, for a mail sink that serves a network and answers only to it; never sent
   * where `mailApi` carries a login of its own (`http://user:password@host`, sent as basic authentication).
   */
  readonly mailApiToken?: string;
  /** A published message counts as lost only if older than this. @defaultValue 60000 */
  readonly quietWindowMs?: number;
  /** Unpublished rows, unsent emails, unfinished payment attempts older than this are stuck. @defaultValue 300000 */
  readonly stuckAfterMs?: number;
  readonly now?: Date;
}

export interface Finding {
  readonly check:
    'lost' | 'duplicated' | 'mischarged' | 'cancelled_but_charged' | 'stuck' | 'repeated_send' | 'crash_window_send';
  readonly subject: string;
  readonly count: number;
  readonly examples: readonly string[];
}

export interface Report {
  readonly findings: readonly Finding[];
  /** Per consumer: published messages it should have received, and how many it processed or dead-lettered. */
  readonly coverage: readonly {
    consumer: string;
    contract: string;
    published: number;
    processed: number;
    deadLettered: number;
  }[];
  /**
   * Violations make the check fail; a copy of an email that a dispatcher's death or freeze
   * explains (`crash_window_send`, SMTP's documented limit) is reported and does not.
   */
  readonly ok: boolean;
  /** Whether the payment provider was read (not without a key the checker may hold). */
  readonly providerRead: boolean;
}

export async function runChecks(options: CheckerOptions): Promise<Report> {
  const now = options.now ?? new Date();
  const quietSince = new Date(now.getTime() - (options.quietWindowMs ?? 60_000));
  const stuckBefore = new Date(now.getTime() - (options.stuckAfterMs ?? 300_000));
  const findings: Finding[] = [];
  const coverage: Report['coverage'][number][] = [];
  const add = (check: Finding['check'], subject: string, rows: { key: string }[]) => {
    if (rows.length > 0)
      findings.push({ check, subject, count: rows.length, examples: rows.slice(0, 5).map((r) => r.key) });
  };

  // Lost: every published event must be processed or dead-lettered by every subscriber.
  for (const producer of PUBLISHERS) {
    const published = await readOnly(options.databaseUrls[producer], (q) =>
      q<{ message_id: string; type: string }>(
        `SELECT message_id::text, type FROM outbox_messages WHERE published_at IS NOT NULL AND published_at < $1`,
        [quietSince],
      ),
    );
    for (const [type, subscribers] of Object.entries(subscriptions) as [EventType, readonly string[]][]) {
      if (serviceOf(type) !== producer) continue;
      const ids = published.filter((row) => row.type === type).map((row) => row.message_id);
      for (const consumer of subscribers) {
        const service = serviceOf(consumer) as Service;
        const seen = await readOnly(options.databaseUrls[service], async (q) => ({
          processed: await q<{ id: string }>(
            `SELECT message_id::text AS id FROM processed_messages WHERE consumer = $1 AND message_id = ANY($2::uuid[])`,
            [consumer, ids],
          ),
          deadLettered: await q<{ id: string }>(
            `SELECT message_id AS id FROM dead_letters WHERE consumer = $1 AND message_id = ANY($2::text[])`,
            [consumer, ids],
          ),
        }));
        const handled = new Set([...seen.processed, ...seen.deadLettered].map((r) => r.id));
        add(
          'lost',
          `${consumer} (${type})`,
          ids.filter((id) => !handled.has(id)).map((key) => ({ key })),
        );
        coverage.push({
          consumer,
          contract: type,
          published: ids.length,
          processed: seen.processed.length,
          deadLettered: seen.deadLettered.length,
        });
      }
    }
  }

  // Duplicated effects.
  await readOnly(options.databaseUrls.inventory, async (q) => {
    add(
      'duplicated',
      'stock decisions per order (inventory.stock-reserved/rejected.v1)',
      await q<{ key: string }>(
        `SELECT envelope->'body'->>'orderId' AS key FROM outbox_messages
          WHERE type IN ('inventory.stock-reserved.v1', 'inventory.stock-rejected.v1')
          GROUP BY 1 HAVING count(*) > 1`,
      ),
    );
  });
  await readOnly(options.databaseUrls.orders, async (q) => {
    add(
      'duplicated',
      'order status transitions per causing message',
      await q<{ key: string }>(
        `SELECT causation_id::text AS key FROM order_status_changes WHERE causation_id IS NOT NULL GROUP BY 1 HAVING count(*) > 1`,
      ),
    );
    add(
      'stuck',
      'orders outbox rows unpublished',
      await q<{ key: string }>(
        `SELECT message_id::text AS key FROM outbox_messages WHERE published_at IS NULL AND created_at < $1`,
        [stuckBefore],
      ),
    );
  });
  await readOnly(options.databaseUrls.notifications, async (q) => {
    add(
      'duplicated',
      'email work items per business key',
      await q<{ key: string }>(`SELECT business_key AS key FROM email_work_items GROUP BY 1 HAVING count(*) > 1`),
    );
    add(
      'stuck',
      'email work items not sent',
      await q<{ key: string }>(
        `SELECT business_key AS key FROM email_work_items WHERE status <> 'sent' AND created_at < $1`,
        [stuckBefore],
      ),
    );
  });
  await readOnly(options.databaseUrls.payments, async (q) => {
    add(
      'stuck',
      'payment attempts not finished',
      await q<{ key: string }>(
        `SELECT order_id::text AS key FROM payment_attempts WHERE status IN ('pending', 'refund_pending') AND created_at < $1`,
        [stuckBefore],
      ),
    );
  });
  for (const producer of ['inventory', 'payments'] as const) {
    await readOnly(options.databaseUrls[producer], async (q) =>
      add(
        'stuck',
        `${producer} outbox rows unpublished`,
        await q<{ key: string }>(
          `SELECT message_id::text AS key FROM outbox_messages WHERE published_at IS NULL AND created_at < $1`,
          [stuckBefore],
        ),
      ),
    );
  }

  // At the provider: one PaymentIntent and at most one refund per order.
  const intents = await listStripe<{
    id: string;
    amount: number;
    currency: string;
    status: string;
    metadata: Record<string, string>;
  }>(options.stripe, '/v1/payment_intents');
  const refunds = await listStripe<{ id: string; amount: number; payment_intent: string }>(
    options.stripe,
    '/v1/refunds',
  );
  const orderOfIntent = new Map(intents.map((i) => [i.id, i.metadata.order_id ?? i.id]));
  add(
    'duplicated',
    'PaymentIntents per order at the provider',
    repeated(intents.map((i) => i.metadata.order_id ?? i.id)),
  );
  add(
    'duplicated',
    'refunds per order at the provider',
    repeated(refunds.map((r) => orderOfIntent.get(r.payment_intent) ?? r.payment_intent)),
  );

  // Mischarged: each charge is what its order cost (the prices its lines were placed at, which
  // the catalog decided), and each refund gives back what was charged. Charges of orders this
  // system does not have (another system on the same provider) are not its to judge.
  const costs = await readOnly(options.databaseUrls.orders, (q) =>
    q<{ key: string; total_cents: number; lines_cents: string; currency: string }>(
      `SELECT o.id::text AS key, o.total_cents, o.currency,
              (SELECT sum(quantity::bigint * unit_price_cents) FROM order_lines l WHERE l.order_id = o.id)::text AS lines_cents
         FROM orders o WHERE o.id = ANY($1::uuid[])`,
      [intents.map((i) => i.metadata.order_id).filter((id) => id && /^[0-9a-f-]{36}$/i.test(id))],
    ),
  );
  const costOf = new Map(costs.map((order) => [order.key, order]));
  add(
    'mischarged',
    "charges that are not their order's total (Σ quantity × the unit price it was placed at)",
    intents.flatMap((intent) => {
      const order = costOf.get(intent.metadata.order_id ?? '');
      const right =
        !order ||
        (intent.amount === order.total_cents &&
          Number(order.lines_cents) === order.total_cents &&
          intent.currency === order.currency);
      return right
        ? []
        : [
            {
              key: `${order!.key}: charged ${intent.amount} ${intent.currency}, costs ${order!.total_cents} ${order!.currency}`,
            },
          ];
    }),
  );
  const chargedBy = new Map(intents.map((i) => [i.id, i.amount]));
  add(
    'mischarged',
    'refunds that are not what was charged',
    refunds
      .filter((r) => chargedBy.has(r.payment_intent) && r.amount !== chargedBy.get(r.payment_intent))
      .map((r) => ({ key: `${r.payment_intent}: charged ${chargedBy.get(r.payment_intent)}, refunded ${r.amount}` })),
  );

  // Cancelled but charged: a cancelled order keeps no money. Every order that can no longer be
  // paid (cancelled, refunded, failed, rejected) for a while has all of its captured money back.
  const refundedOf = new Map<string, number>();
  for (const refund of refunds)
    refundedOf.set(refund.payment_intent, (refundedOf.get(refund.payment_intent) ?? 0) + refund.amount);
  const kept = intents.filter(
    (intent) => intent.status === 'succeeded' && intent.amount > (refundedOf.get(intent.id) ?? 0),
  );
  const unpaid = await readOnly(options.databaseUrls.orders, (q) =>
    q<{ key: string; status: string }>(
      `SELECT id::text AS key, status FROM orders
        WHERE id = ANY($1::uuid[]) AND status NOT IN ('PENDING', 'RESERVED', 'PAID') AND updated_at < $2`,
      [kept.map((i) => i.metadata.order_id).filter((id) => id && /^[0-9a-f-]{36}$/i.test(id)), quietSince],
    ),
  );
  const statusOf = new Map(unpaid.map((order) => [order.key, order.status]));
  add(
    'cancelled_but_charged',
    'orders that can no longer be paid (cancelled, refunded, failed, rejected) whose captured money was kept',
    kept.flatMap((intent) => {
      const status = statusOf.get(intent.metadata.order_id ?? '');
      const back = refundedOf.get(intent.id) ?? 0;
      return status
        ? [{ key: `${intent.metadata.order_id}: ${status}, kept ${intent.amount - back} ${intent.currency}` }]
        : [];
    }),
  );

  // At the mail server: the same Message-ID received more than once. Each copy must be explained
  // by an unconfirmed send — a claim that found a dispatcher's lease run out before it said how its
  // send went (it died or froze mid-send), or a connection that dropped mid-send (the reply lost):
  // SMTP's documented window. Any other copy is a violation.
  if (options.mailApi) {
    const copies = repeatedCounts(await listMail(options.mailApi, options.mailApiToken));
    const items = await readOnly(options.databaseUrls.notifications, (q) =>
      q<{ message_id: string; unconfirmed_sends: number; lease_overruns: number }>(
        `SELECT message_id, unconfirmed_sends, lease_overruns FROM email_work_items WHERE message_id = ANY($1::text[])`,
        [[...copies.keys()].map((id) => `<${id.replace(/^<|>$/g, '')}>`)],
      ),
    );
    const itemOf = new Map(items.map((item) => [item.message_id.replace(/^<|>$/g, ''), item]));
    const explained: { key: string }[] = [];
    const unexplained: { key: string }[] = [];
    for (const [id, count] of copies) {
      const item = itemOf.get(id.replace(/^<|>$/g, ''));
      const key = `${id}: ${count} copies, ${item?.unconfirmed_sends ?? 0} unconfirmed sends, ${item?.lease_overruns ?? 0} sends past their lease`;
      (item && count <= 1 + item.unconfirmed_sends ? explained : unexplained).push({ key });
    }
    add('repeated_send', 'emails received more than once that no dispatcher death or freeze explains', unexplained);
    add(
      'crash_window_send',
      'emails received twice after a dispatcher died or froze mid-send (the documented window)',
      explained,
    );
  }

  return {
    findings,
    coverage,
    providerRead: options.stripe !== undefined,
    ok: findings.every((f) => f.check === 'crash_window_send'),
  };
}

/** Each key seen more than once, with how often. */
function repeatedCounts(keys: string[]): Map<string, number> {
  const counts = new Map<string, number>();
  for (const key of keys) counts.set(key, (counts.get(key) ?? 0) + 1);
  return new Map([...counts].filter(([, n]) => n > 1));
}

function repeated(keys: string[]): { key: string }[] {
  return [...repeatedCounts(keys).keys()].map((key) => ({ key }));
}

/** Every object of a Stripe list endpoint (e.g. `/v1/refunds?payment_intent=pi_1`), page by page. */
export async function listStripe<T extends { id: string }>(
  provider: CheckerOptions['stripe'],
  path: string,
): Promise<T[]> {
  if (!provider) return [];
  const { apiBase, apiKey } = provider;
  refuseAKeyInTheClear({ apiBase, apiKey });
  const all: T[] = [];
  let after: string | undefined;
  for (;;) {
    const url = new URL(`${apiBase.replace(/\/$/, '')}${path}`);
    url.searchParams.set('limit', '100');
    if (after) url.searchParams.set('starting_after', after);
    const res = await fetch(url, { headers: { authorization: `Bearer ${apiKey}` } });
    if (!res.ok) throw new Error(`GET ${path} at the payment provider answered ${res.status}`);
    const page = (await res.json()) as { data: T[]; has_more: boolean };
    all.push(...page.data);
    if (!page.has_more || page.data.length === 0) return all;
    after = page.data.at(-1)!.id;
  }
}

/**
 * A key that is not the simulator's goes only over https, as payments sends it: a live key moves
 * money, and a real test key reads a real account's payments, refunds and customers' e-mails.
 */
export class KeyInTheClearError extends Error {
  readonly code = 'key_in_the_clear';
}

/** What every key the Stripe simulator accepts begins with: its placeholder, or compose's key of its own. */
const SIMULATOR_KEY = 'sk_test_idem_simulator';

function refuseAKeyInTheClear({ apiBase, apiKey }: NonNullable<CheckerOptions['stripe']>): void {
  if (!apiKey.startsWith(SIMULATOR_KEY) && new URL(apiBase).protocol !== 'https:')
    throw new KeyInTheClearError(
      `a Stripe key other than the simulator's is sent only over https, not to ${new URL(apiBase).origin}: point STRIPE_API_BASE at https (unset: api.stripe.com)`,
    );
}

/** The Message-ID of every message the mail server holds, page by page. */
export async function listMail(api: string, token: string | undefined): Promise<string[]> {
  const ids: string[] = [];
  for (let start = 0; ; start += 500) {
    const res = await fetchMailApi(api, `/api/v1/messages?start=${start}&limit=500`, token);
    if (!res.ok) throw new Error(`GET /api/v1/messages at the mail server answered ${res.status}`);
    const page = (await res.json()) as { messages: { MessageID: string }[]; total: number };
    ids.push(...page.messages.map((m) => m.MessageID));
    if (page.messages.length === 0 || start + 500 >= page.total) return ids;
  }
}

/**
 * GET `path` of the mail server's API. Credentials in `api` (compose's Mailpit:
 * `http://idem:<password>@mailpit:8025`) log in with basic authentication, and then the operator
 * token stays here; without them the operator token is sent, for the native sink beyond loopback.
 */
export function fetchMailApi(api: string, path: string, token: string | undefined): Promise<Response> {
  const url = new URL(`${api.replace(/\/$/, '')}${path}`);
  const login = url.username ? `${decodeURIComponent(url.username)}:${decodeURIComponent(url.password)}` : undefined;
  // fetch refuses a URL with credentials: they go in the header instead.
  url.username = '';
  url.password = '';
  const authorization = login
    ? `Basic ${Buffer.from(login).toString('base64')}`
    : token
      ? `Bearer ${token}`
      : undefined;
  return fetch(url, { headers: authorization ? { authorization } : {} });
}

/** The report as a table a person reads. */
export function formatReport(report: Report): string {
  const lines = [
    'consumer                              contract                          published  processed  dead-lettered',
  ];
  for (const c of report.coverage) {
    lines.push(
      `${c.consumer.padEnd(38)}${c.contract.padEnd(34)}${String(c.published).padStart(9)}  ${String(c.processed).padStart(9)}  ${String(c.deadLettered).padStart(13)}`,
    );
  }
  lines.push('');
  for (const check of [
    'lost',
    'duplicated',
    'mischarged',
    'cancelled_but_charged',
    'stuck',
    'repeated_send',
    'crash_window_send',
  ] as const) {
    const found = report.findings.filter((f) => f.check === check);
    if (found.length === 0) lines.push(`${check.padEnd(22)} none`);
    for (const f of found) lines.push(`${check.padEnd(22)} ${f.count} × ${f.subject}  e.g. ${f.examples.join(', ')}`);
  }
  if (!report.providerRead)
    lines.push('', 'payment provider       not read (no key the checker may hold: a live key stays with payments)');
  lines.push(
    '',
    report.ok ? 'verdict: OK — nothing lost, doubled, mischarged, kept or stuck' : 'verdict: VIOLATIONS FOUND',
  );
  return lines.join('\n');
}
