import { randomBytes, randomInt, randomUUID } from 'node:crypto';
import { createWriteStream } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { runChecks, type CheckerOptions, type Report } from '@idem/checker';
import { dropDatabase, readOnly } from '@idem/database';
import {
  asCustomer,
  CUSTOMER,
  QUICK_TAKEOVER_ENV,
  UNLIMITED_ORDERS_ENV,
  startSystem,
  SERVICES,
  type RunningSystem,
  type SystemOptions,
} from '@idem/native-run';
import { SIMULATOR_API_KEY } from '@idem/stripe-sim';
import { exited, type ReceivedSpan } from '@idem/testkit';
import type pg from 'pg';

/**
 * Starts the whole system as real processes (the native run), isolated from any other run:
 * its own databases, queue prefix and ports. stop() also drops the databases.
 */
export async function startIsolatedSystem(
  options: Omit<SystemOptions, 'name' | 'portOffset'> = {},
): Promise<RunningSystem> {
  const name = `e2e_${Date.now().toString(36)}_${randomInt(1000)}`;
  // The processes' output goes to a file (its path is printed) instead of flooding the run.
  const logFile = join(tmpdir(), `idem-${name}.log`);
  const log = createWriteStream(logFile);
  console.log(`e2e system ${name}: process logs in ${logFile}`);
  const system = await startSystem({
    ...options,
    name,
    // Every port stays below Linux's ephemeral range (32768+), where outgoing connections take theirs.
    portOffset: randomInt(8_000, 20_000),
    env: {
      LOG_LEVEL: 'info',
      ...QUICK_TAKEOVER_ENV,
      ...UNLIMITED_ORDERS_ENV,
      ...options.env,
    },
    log: (part, line) => void log.write(`${part.padEnd(13)}| ${line}\n`),
  });
  return {
    ...system,
    async stop() {
      await system.stop();
      await Promise.all(SERVICES.map((service) => dropDatabase(system.databaseUrls[service])));
      log.end();
    },
  };
}

/** Resolves with what ended a process: its signal, or its exit code. */
/**
 * Stops one part of the system (SIGTERM) and starts it again with `env` added; once it is
 * healthy, returns the promise of its end.
 */
export async function restartPart(
  system: RunningSystem,
  part: string,
  env: Record<string, string> = {},
): Promise<{ exited: Promise<NodeJS.Signals | number | null> }> {
  const running = system.processes.get(part)!;
  const stopped = exited(running);
  running.kill('SIGTERM');
  await stopped;
  await system.restart(part, env);
  return { exited: exited(system.processes.get(part)!) };
}

/** Restarts one part with fault switches on (a crash fault then SIGKILLs it; restart it plainly after). */
export function restartWithFaults(system: RunningSystem, part: string, faults: string) {
  return restartPart(system, part, { IDEM_FAULTS_ENABLED: '1', IDEM_FAULTS: faults });
}

/** Rows from a service's database, read-only: how the black-box tests look inside. */
export function readRows<R extends pg.QueryResultRow>(
  databaseUrl: string,
  sql: string,
  params: unknown[] = [],
): Promise<R[]> {
  return readOnly(databaseUrl, (query) => query<R>(sql, params));
}

/** The system's Stripe simulator, as the checker and the tests read it (it takes any key). */
export function stripeOf(system: RunningSystem): CheckerOptions['stripe'] {
  return { apiBase: system.urls.stripe, apiKey: SIMULATOR_API_KEY };
}

/** The exactly-once checker against the system, counting what was published over 5 s ago. */
export function checkSystem(system: RunningSystem, options: Partial<CheckerOptions> = {}): Promise<Report> {
  return runChecks({
    databaseUrls: system.databaseUrls,
    stripe: stripeOf(system),
    mailApi: system.urls.mail,
    quietWindowMs: 5_000,
    ...options,
  });
}

/** A span as the tests read it back (the OTLP receiver's shape; the compose test converts Jaeger's). */
export type TracedSpan = ReceivedSpan;

const SERVER = 2;
const CLIENT = 3;

/**
 * The spans of an order's trace graph: those of the traces reachable from `traceId` (the HTTP
 * request that placed it) along links, as a consumer's span links to the publication it received.
 */
export function traceGraph(spans: readonly TracedSpan[], traceId: string): TracedSpan[] {
  const reached = new Set([traceId]);
  for (let grew = true; grew;) {
    grew = false;
    for (const span of spans) {
      if (!reached.has(span.traceId) && span.links.some((link) => reached.has(link.traceId))) {
        reached.add(span.traceId);
        grew = true;
      }
    }
  }
  return spans.filter((span) => reached.has(span.traceId));
}

/**
 * What a paid order's trace graph lacks, from its request on: every delivery of the messages it
 * led to, the payment worker's charge with its provider call, and both e-mails with their SMTP
 * sends (each of the three carries the order's id). Empty when nothing is missing.
 */
export function paidOrderTraceGaps(spans: readonly TracedSpan[], traceId: string, orderId: string): string[] {
  const graph = traceGraph(spans, traceId);
  const gaps: string[] = [];
  const childOf = (parent: TracedSpan | undefined, kind: number) =>
    parent && graph.some((s) => s.parentSpanId === parent.spanId && s.kind === kind);
  if (!graph.some((s) => s.service === 'orders' && s.kind === SERVER)) gaps.push('the POST /orders request');
  for (const consumer of [
    'inventory.order-placed.v1',
    'notifications.order-placed.v1',
    'payments.stock-reserved.v1',
    'orders.stock-reserved.v1',
    'orders.payment-captured.v1',
    'notifications.payment-captured.v1',
    'inventory.payment-captured.v1',
  ]) {
    if (!graph.some((s) => s.name === `process ${consumer}` && s.attributes['idem.outcome'] === 'processed')) {
      gaps.push(`the delivery to ${consumer}`);
    }
  }
  const charge = graph.find((s) => s.name === 'charge' && s.attributes['idem.order_id'] === orderId);
  if (!charge) gaps.push("the payment worker's charge");
  else if (!childOf(charge, CLIENT)) gaps.push("the charge's call to the provider");
  for (const kind of ['order-received', 'receipt']) {
    const send = graph.find(
      (s) =>
        s.name === 'send email' &&
        s.attributes['idem.order_id'] === orderId &&
        s.attributes['idem.email_kind'] === kind,
    );
    if (!send) gaps.push(`the ${kind} e-mail`);
    else if (!childOf(send, CLIENT)) gaps.push(`the ${kind} e-mail's SMTP send`);
  }
  return gaps;
}

/** A W3C traceparent of a trace of the test's own, to start an order's trace with a known id. */
export function newTraceparent(): { traceparent: string; traceId: string } {
  const traceId = randomBytes(16).toString('hex');
  return { traceparent: `00-${traceId}-${randomBytes(8).toString('hex')}-01`, traceId };
}

/**
 * Places a paid order of one keyboard as a caller that traces its own requests would: with a
 * `traceparent`, so the test knows the trace the order starts. Returns it and the order's id.
 */
export async function placeTracedOrder(ordersUrl: string): Promise<{ orderId: string; traceId: string }> {
  const { traceparent, traceId } = newTraceparent();
  const res = await fetch(`${ordersUrl}/orders`, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      'idempotency-key': randomUUID(),
      traceparent,
      ...(await asCustomer(CUSTOMER)),
    },
    body: JSON.stringify({ paymentMethod: 'pm_card_visa', lines: [{ sku: 'keyboard', quantity: 1 }] }),
  });
  if (res.status !== 201) throw new Error(`POST /orders answered ${res.status}: ${await res.text()}`);
  return { orderId: ((await res.json()) as { orderId: string }).orderId, traceId };
}

/** Reads spans until the order's trace graph has no gaps, or the time is up; returns the gaps. */
export async function traceGapsOnceQuiet(
  spans: () => Promise<readonly TracedSpan[]> | readonly TracedSpan[],
  traceId: string,
  orderId: string,
  timeoutMs = 30_000,
): Promise<string[]> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const gaps = paidOrderTraceGaps(await spans(), traceId, orderId);
    if (gaps.length === 0 || Date.now() > deadline) return gaps;
    await new Promise((resolve) => setTimeout(resolve, 500));
  }
}
