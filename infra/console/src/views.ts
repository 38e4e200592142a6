import { SERVICE_NAMES } from '@idem/shop';
import type { Report } from '@idem/checker';
import type { FaultRule } from '@idem/faults';
import type { Lesson, LessonRun } from '@idem/lessons';
import type { SmallSpace } from '@idem/explorer';
import type { MessageView, OrderRow, Timeline } from './reads.js';

/** Server-rendered pages: plain HTML, one small script for the live view. */

export const escape = (value: unknown): string =>
  String(value ?? '').replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
const time = (value: Date | string | null | undefined) => {
  const at = value ? new Date(value) : undefined;
  return at && !Number.isNaN(at.getTime()) ? at.toISOString().slice(11, 23) : '—';
};
const short = (id: string | null | undefined) => (id ? escape(id.slice(0, 8)) : '—');

const LANES = SERVICE_NAMES;

/**
 * The console's stylesheet and its one script (the live view), served as files of its own: the
 * Content-Security-Policy runs nothing inline, so injected markup could run nothing either.
 */
export const ASSETS = {
  '/assets/console.css': {
    type: 'text/css',
    body: `  body { font: 14px/1.45 system-ui, sans-serif; margin: 0; color: #1d2330; background: #f6f7f9; }
  header { background: #1d2330; color: #fff; padding: .6rem 1.2rem; display: flex; gap: 1.5rem; align-items: baseline; }
  header a { color: #cfe0ff; text-decoration: none; } header strong { font-size: 1.1rem; }
  main { padding: 1rem 1.2rem; max-width: 1400px; }
  table { border-collapse: collapse; background: #fff; } td, th { padding: .3rem .6rem; border-bottom: 1px solid #e3e6eb; text-align: left; }
  code, .id { font-family: ui-monospace, monospace; font-size: 12px; }
  .lanes { display: grid; grid-template-columns: repeat(4, 1fr); gap: .5rem; }
  .lane-head { font-weight: 600; text-transform: uppercase; font-size: 12px; color: #55607a; border-bottom: 2px solid #c9cfdb; }
  .cell { background: #fff; border: 1px solid #e3e6eb; border-radius: 6px; padding: .4rem .5rem; min-height: 1rem; }
  .cell.empty { background: transparent; border: none; }
  .message { grid-column: 1 / -1; margin-top: .8rem; font-size: 12px; color: #55607a; }
  .outcome { display: inline-block; border-radius: 4px; padding: 0 .35rem; font-size: 12px; font-weight: 600; }
  .processed { background: #d8f3dc; color: #1b5e20; } .duplicate { background: #fff3c4; color: #7a5b00; }
  .stale { background: #e7e1f7; color: #4a2f8f; } .conflicting_duplicate, .permanent_failure, .dead { background: #ffd9d9; color: #8c1d1d; }
  .transient_failure { background: #ffe8cc; color: #8a4b00; } .note { color: #55607a; font-size: 12px; }
  .deliveries { margin: .2rem 0 0; padding-left: 1rem; } form.inline { display: inline; }
  fieldset { border: 1px solid #c9cfdb; background: #fff; margin: 0 0 1rem; } button { cursor: pointer; }
  .warn { background: #fff3c4; border: 1px solid #e6cf6e; padding: .5rem .8rem; }
`,
  },
  '/assets/live.js': {
    type: 'text/javascript',
    body: `const box = document.getElementById('timeline');
new EventSource(location.pathname + '/live').addEventListener('change', (event) => {
  box.innerHTML = JSON.parse(event.data);
});
`,
  },
} as const;

export function page(title: string, body: string, { live = false }: { live?: boolean } = {}): string {
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>${escape(title)} · idem console</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<link rel="stylesheet" href="/assets/console.css"></head>
<body><header><strong>idem console</strong><a href="/">orders</a><a href="/faults">fault switches</a><a href="/lessons">lessons</a><a href="/explorer">explorer</a><a href="/checker">checker</a></header>
<main>${body}</main>${live ? '<script src="/assets/live.js"></script>' : ''}</body></html>`;
}

export const SCENARIOS = {
  paid: 'paid (keyboard, Visa)',
  'out-of-stock': 'out of stock (sold-out)',
  declined: 'card declined',
  'cancel-after-payment': 'cancel after payment (refund)',
} as const;
export type Scenario = keyof typeof SCENARIOS;

export function ordersPage(orders: OrderRow[], notice?: string): string {
  return page(
    'orders',
    `<h1>Orders</h1>
${notice ? `<p class="warn">${escape(notice)}</p>` : ''}
<fieldset><legend>Place an order</legend>
<form method="post" action="/orders">
${Object.entries(SCENARIOS)
  .map(
    ([value, label], i) =>
      `<label><input type="radio" name="scenario" value="${value}"${i === 0 ? ' checked' : ''}> ${escape(label)}</label>`,
  )
  .join('\n')}
<button type="submit">Place order</button></form>
<p class="note">The console places orders through the orders API, like any client; everything else here is read-only.</p>
</fieldset>
<table><thead><tr><th>order</th><th>status</th><th>total</th><th>customer</th><th>placed</th></tr></thead><tbody>
${orders
  .map(
    (o) =>
      `<tr><td><a class="id" href="/orders/${escape(o.id)}">${short(o.id)}</a></td><td>${escape(o.status)}</td><td>${(o.total_cents / 100).toFixed(2)} ${escape(o.currency.toUpperCase())}</td><td>${escape(o.customer_email)}</td><td>${time(o.created_at)}</td></tr>`,
  )
  .join('\n')}
</tbody></table>`,
  );
}

export function timelinePage(timeline: Timeline): string {
  return page(
    `order ${timeline.order.id.slice(0, 8)}`,
    `<div id="timeline">${timelineFragment(timeline)}</div>
<p class="note" id="live">live: new deliveries appear as they happen</p>`,
    { live: true },
  );
}

/** The timeline itself: the part the live view swaps in. */
export function timelineFragment(t: Timeline): string {
  const { order } = t;
  const lane = (service: string, html: string) =>
    `<div class="cell${html ? '' : ' empty'}" data-lane="${service}">${html}</div>`;
  const row = (cells: Partial<Record<(typeof LANES)[number], string>>) =>
    LANES.map((service) => lane(service, cells[service] ?? '')).join('');
  return `<h1>Order <span class="id">${escape(order.id)}</span> — <span id="status">${escape(order.status)}</span></h1>
<p class="note">correlation id <code>${escape(t.correlationId ?? '—')}</code> · ${escape(order.customer_email)} ·
${order.lines.map((l) => `${l.quantity} × ${escape(l.sku)}`).join(', ')} · ${(order.total_cents / 100).toFixed(2)} ${escape(order.currency.toUpperCase())}</p>
<div class="lanes">
${LANES.map((s) => `<div class="lane-head">${s}</div>`).join('')}
<div class="message">HTTP <code>POST /orders</code> → the order row and its first outbox row, in one transaction</div>
${row({ orders: `status history: ${t.history.map((h) => `<div>v${h.version} <b>${escape(h.status)}</b> ${time(h.occurred_at)} <span class="note">${h.causation_id ? `caused by ${short(h.causation_id)}` : 'by the HTTP request'}</span></div>`).join('')}` })}
${t.messages.map((m) => messageRows(m, row)).join('\n')}
<div class="message">effects outside the databases</div>
${row({
  inventory: t.reservation
    ? `reservation <b data-effect="reservation">${escape(t.reservation.status)}</b> ${time(t.reservation.created_at)}`
    : '<span class="note">no reservation</span>',
  payments: paymentCell(t),
  notifications: t.emails.length
    ? t.emails
        .map(
          (e) =>
            `<div data-effect="email" data-kind="${escape(e.kind)}">${escape(e.kind)}: <b>${escape(e.status)}</b> ${time(e.sentAt)}<br><span class="note">Message-ID <code>${escape(e.messageId)}</code>${e.sends === undefined ? '' : ` · sent ${e.sends}×${e.sends > 1 ? ' <span class="outcome duplicate">repeated send, same Message-ID</span>' : ''}`}</span></div>`,
        )
        .join('')
    : '<span class="note">no email work items</span>',
})}
</div>`;
}

function paymentCell(t: Timeline): string {
  if (!t.payment) return '<span class="note">no payment attempt</span>';
  const calls = t.providerCalls
    .map(
      (c) =>
        `<li>${escape(c.operation)} → ${escape(c.result)} ${c.objectId ? `<code data-effect="payment-intent">${escape(c.objectId)}</code>` : ''}${c.replayed ? ' <span class="outcome duplicate">Idempotent-Replayed</span>' : ''} <span class="note">${time(c.at)}</span></li>`,
    )
    .join('');
  return `payment attempt <b>${escape(t.payment.status)}</b> · PaymentIntent <code>${escape(t.payment.payment_intent_id ?? '—')}</code>
<br><span class="note">persisted key <code>${escape(t.payment.idempotency_key)}</code> · provider calls ${t.payment.provider_calls}</span>
${calls ? `<ul class="deliveries">${calls}</ul>` : ''}`;
}

function messageRows(m: MessageView, row: (cells: Partial<Record<(typeof LANES)[number], string>>) => string): string {
  const copies = m.publications.map((p) => (p.copies > 1 ? `${p.copies} copies` : '1 copy')).join(', ');
  const produced = `<div data-message="${escape(m.messageId)}">outbox row <b>${escape(m.contract)}</b><br>
<span class="note">message <code>${short(m.messageId)}</code> · written ${time(m.createdAt)} ·
${m.publishedAt ? `published ${time(m.publishedAt)}` : '<b>not published yet</b>'}${m.publications.length ? ` · relay published ${m.publications.length}× (${copies})` : ''}</span></div>`;
  const cells: Partial<Record<(typeof LANES)[number], string>> = {
    [m.producer as (typeof LANES)[number]]: produced,
  };
  for (const s of m.subscribers) {
    const html = `<div data-consumer="${escape(s.consumer)}"><b>${escape(s.consumer)}</b>
<ul class="deliveries">${s.deliveries
      .map(
        (d) =>
          `<li><span class="outcome ${escape(d.outcome)}" data-outcome="${escape(d.outcome)}">${escape(d.outcome)}</span> attempt ${escape(d.attempt)} · ${escape(d.durationMs)} ms · ${time(d.at)}${d.deadLettered ? ' <span class="outcome dead">dead-lettered</span>' : ''}${d.reason ? ` <span class="note">${escape(d.reason)}</span>` : ''} <span class="note">${escape(d.process)}</span></li>`,
      )
      .join('')}</ul>
<span class="note">${s.processedAt ? `inbox record committed ${time(s.processedAt)}` : 'no inbox record'}${s.deadLettered ? ` · dead letter: ${escape(s.deadLettered.code)}` : ''}${s.unsettled === 'never_settled' ? ' · the delivery that committed it never settled (its process died); the redelivery found the record' : s.unsettled === 'settling' ? ' · <span data-settling>settling: committed, the broker is being told</span>' : ''}</span></div>`;
    const key = s.service as (typeof LANES)[number];
    cells[key] = (cells[key] ?? '') + html;
  }
  return `<div class="message">${escape(m.contract)} <code>${short(m.messageId)}</code>${m.causationId ? ` caused by <code>${short(m.causationId)}</code>` : ''}</div>\n${row(cells)}`;
}

export interface ProcessFaults {
  readonly name: string;
  readonly url: string;
  /** undefined: the process did not answer or refused (see `problem`). */
  readonly state?: { pid: number; startedAt: string; switches: string[]; rules: FaultRule[] };
  readonly problem?: string;
}

export function faultsPage(processes: ProcessFaults[], targets: string[], tokenConfigured: boolean): string {
  const unavailable = processes.filter((p) => !p.state);
  return page(
    'fault switches',
    `<h1>Fault switches</h1>
<p class="note">Each switch opens one failure window on purpose, in one process. A switch with a count fires that many times in
that process; a restarted process starts again from its <code>IDEM_FAULTS</code>.</p>
${!tokenConfigured ? '<p class="warn">The console has no fault switches token: set each service\'s (<code>ORDERS_FAULTS_TOKEN</code>, …, as its processes\' <code>FAULTS_TOKEN</code>).</p>' : ''}
${unavailable.length ? `<p class="warn" id="unavailable">Switches are unavailable in ${unavailable.map((p) => escape(p.name)).join(', ')}: a process accepts them only when started with <code>IDEM_FAULTS_ENABLED=1</code> and <code>ADMIN_TOKEN</code> (${escape(unavailable[0]!.problem ?? '')}).</p>` : ''}
<datalist id="targets">${targets.map((t) => `<option value="${escape(t)}">`).join('')}</datalist>
<table><thead><tr><th>process</th><th>pid · started</th><th>switches on</th><th>switch one on</th></tr></thead><tbody>
${processes
  .map((p) =>
    p.state
      ? `<tr data-process="${escape(p.name)}"><td>${escape(p.name)}</td><td><span data-pid>${escape(p.state.pid)}</span> · ${time(p.state.startedAt)}</td>
<td>${p.state.rules.length ? p.state.rules.map((r) => `<div data-rule><code>${escape(r.name)}</code>${r.target ? ` for ${escape(r.target)}` : ''}${r.count ? ` ×${escape(r.count)}` : ''}${r.probability < 1 ? ` p=${escape(r.probability)}` : ''}</div>`).join('') : '<span class="note">none</span>'}
${p.state.rules.length ? `<form class="inline" method="post" action="/faults/${escape(p.name)}/clear"><button>switch all off</button></form>` : ''}</td>
<td><form method="post" action="/faults/${escape(p.name)}">
<select name="name">${p.state.switches.map((s) => `<option>${escape(s)}</option>`).join('')}</select>
<input name="target" list="targets" placeholder="target (every one when empty)" size="28">
<input name="count" type="number" min="1" placeholder="count" size="5">
<input name="probability" type="number" min="0" max="1" step="0.05" value="1" size="4">
<button>switch on</button></form></td></tr>`
      : `<tr data-process="${escape(p.name)}"><td>${escape(p.name)}</td><td colspan="3" class="note">${escape(p.problem ?? '')}</td></tr>`,
  )
  .join('\n')}
</tbody></table>`,
  );
}

export function checkerPage(report: Report | undefined, error?: string): string {
  if (!report) return page('checker', `<h1>Exactly-once checker</h1><p class="warn">${escape(error)}</p>`);
  const rows = report.coverage
    .map(
      (c) =>
        `<tr><td>${escape(c.consumer)}</td><td>${escape(c.contract)}</td><td>${c.published}</td><td>${c.processed}</td><td>${c.deadLettered}</td></tr>`,
    )
    .join('');
  const findings = report.findings
    .map(
      (f) =>
        `<tr><td><span class="outcome ${f.check === 'crash_window_send' ? 'duplicate' : 'dead'}">${escape(f.check)}</span></td><td>${escape(f.subject)}</td><td>${escape(f.count)}</td><td class="id">${f.examples.map(escape).join('<br>')}</td></tr>`,
    )
    .join('');
  return page(
    'checker',
    `<h1>Exactly-once checker</h1>
<p id="verdict"><b>${report.ok ? 'OK — nothing lost, nothing doubled, nothing stuck' : 'VIOLATIONS FOUND'}</b></p>
<h2>Findings</h2>${findings ? `<table><thead><tr><th>check</th><th>subject</th><th>count</th><th>examples</th></tr></thead><tbody>${findings}</tbody></table>` : '<p>none: lost none, duplicated none, stuck none</p>'}
<h2>Per consumer and contract</h2>
<table><thead><tr><th>consumer</th><th>contract</th><th>published</th><th>processed</th><th>dead-lettered</th></tr></thead><tbody>${rows}</tbody></table>`,
  );
}

export function lessonsPage(
  lessons: Record<string, Lesson> | undefined,
  result?: { name: string; runs: LessonRun[] },
): string {
  if (!lessons) {
    return page(
      'lessons',
      `<h1>Lessons</h1><p class="warn">Lessons run from a checkout of idem: <code>pnpm lesson</code> lists them,
<code>pnpm lesson &lt;name&gt;</code> runs one (the console of <code>pnpm start</code> runs them too).</p>`,
    );
  }
  const rows = Object.entries(lessons)
    .map(
      ([name, l]) =>
        `<tr data-lesson="${escape(name)}"><td><b>${escape(l.mistake)}</b><br><span class="note">${escape(name)} · window: ${escape(l.fault)}</span></td>
<td>the wrong way ends <span class="outcome ${l.expect === 'lost' ? 'dead' : 'duplicate'}">${escape(l.expect)}</span></td>
<td class="note">${escape(l.code)}</td>
<td><form method="post" action="/lessons/${escape(name)}"><button>run it both ways</button></form></td></tr>`,
    )
    .join('\n');
  const output = result
    ? `<h2>${escape(result.name)}</h2>${result.runs
        .map((run) => `<pre data-way="${run.way}">${escape(run.narrative.join('\n'))}</pre>`)
        .join('')}`
    : '';
  return page(
    'lessons',
    `<h1>Lessons: the article's common mistakes, made on purpose</h1>
<p class="note">Each lesson switches one mistake on (a wrong-way switch), opens the failure window that exposes it, and
counts how many times the business change was applied to one message; then it does the same the right way, under
the same fault. It runs in a database and queue prefix of its own, never in this system. One more lesson lives with
the payments tests (a new provider key per try charges twice): <code>pnpm test services/payments -t lesson</code>.</p>
${output}
<table><thead><tr><th>mistake</th><th>expect</th><th>where in the code</th><th></th></tr></thead><tbody>${rows}</tbody></table>`,
  );
}

/**
 * The explorer's small space: every interleaving of a cancellation and a reservation of one order
 * at payments, each schedule's statements in the order they ran and how it ended, the right way
 * and with the order's row left unlocked.
 */
export function explorerPage(
  enabled: boolean,
  result?: SmallSpace & { way: 'right' | 'wrong' },
  /** Another exploration is running: come back in this many seconds. */
  busyFor?: number,
): string {
  const intro = `<h1>Explorer: every way two messages about one order can meet</h1>
<p class="note">A cancellation and a reservation of the same order reach payments on two queues, so two consumers
may run them at once. The explorer runs both on two connections of a database of its own, one statement at a time,
in every order PostgreSQL allows (a statement waiting on a lock lets the other go), then lets the payment worker charge
what is due at the Stripe simulator, and checks that a cancelled order keeps no money. <code>pnpm explore</code>
does this for every pair of one order's messages at every service (docs/verification.md).</p>`;
  if (!enabled)
    return page(
      'explorer',
      `${intro}<p class="warn">The explorer runs from a checkout of idem: <code>pnpm explore payments</code>
(the console of <code>pnpm start</code> runs it too).</p>`,
    );
  const forms = `<form method="post" action="/explorer/right"><button>explore it the right way</button></form>
<form method="post" action="/explorer/wrong"><button>explore it with the order's row left unlocked</button></form>`;
  const busy =
    busyFor === undefined
      ? ''
      : `<p class="warn" id="busy">Another exploration is running here: one at a time, since each makes a database of its own.
Try again in ${busyFor} s.</p>`;
  if (!result) return page('explorer', intro + busy + forms);
  const { report, schedules, way } = result;
  const reached = new Map<string, number>();
  for (const schedule of schedules) reached.set(schedule.state, (reached.get(schedule.state) ?? 0) + 1);
  const states = [...reached]
    .map(([state, n]) => `<li data-state>${escape(state)} — <b>${n}</b> schedule${n === 1 ? '' : 's'}</li>`)
    .join('');
  const listed = schedules
    .map(
      (schedule, i) => `<details${schedule.broken.length > 0 ? ' class="broken" data-broken' : ''} data-schedule>
<summary>schedule ${i + 1}: ${escape(schedule.state)}${schedule.broken.map((b) => ` <b class="dead">✗ ${escape(b)}</b>`).join('')}</summary>
<pre>${escape(schedule.trace.join('\n'))}</pre></details>`,
    )
    .join('\n');
  return page(
    'explorer',
    `${intro}${forms}<h2 data-way="${way}">${way === 'right' ? 'The right way' : "The order's row left unlocked"}:
<span id="schedules">${schedules.length}</span> schedules, <span id="states">${report.states}</span> final states,
<span id="broken">${report.counterexamples.length}</span> breaking an invariant (${(report.ms / 1000).toFixed(1)} s)</h2>
<ul>${states}</ul>${listed}`,
  );
}
