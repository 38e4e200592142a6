/** The emails notifications sends, as text and HTML. Pure: no I/O. */

export interface OrderSummary {
  readonly orderId: string;
  readonly currency: string;
  readonly totalCents: number;
  readonly lines: readonly { sku: string; quantity: number; unitPriceCents: number }[];
}

export interface Email {
  readonly subject: string;
  readonly text: string;
  readonly html: string;
}

/**
 * Each currency's sign as Intl's 'en' format writes it, for the two-decimal currencies that have
 * one there; any other code is written before the amount with a no-break space ("CHF 5.00").
 */
const SIGNS: Readonly<Record<string, string>> = {
  EUR: '€',
  USD: '$',
  GBP: '£',
  CAD: 'CA$',
  AUD: 'A$',
  NZD: 'NZ$',
  HKD: 'HK$',
  MXN: 'MX$',
  BRL: 'R$',
  INR: '₹',
  ILS: '₪',
  TWD: 'NT$',
  CNY: 'CN¥',
};

/**
 * An amount in cents, as `Intl.NumberFormat('en', { style: 'currency' })` writes it (the unit
 * test compares the two), without Intl: ICU's locale data, read from the `node` binary by the
 * first formatter made, stays resident — ~6 MB of every notifications process.
 */
export function money(cents: number, currency: string): string {
  const code = currency.toUpperCase();
  const sign = SIGNS[code] ?? `${code}\u00a0`;
  const whole = Math.floor(Math.abs(cents) / 100)
    .toString()
    .replace(/\B(?=(\d{3})+$)/g, ',');
  const fraction = (Math.abs(cents) % 100).toString().padStart(2, '0');
  return `${cents < 0 ? '-' : ''}${sign}${whole}.${fraction}`;
}

function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

function lineTable(order: OrderSummary): { text: string; html: string } {
  const rows = order.lines.map((l) => ({
    sku: l.sku,
    quantity: l.quantity,
    price: money(l.unitPriceCents, order.currency),
    total: money(l.quantity * l.unitPriceCents, order.currency),
  }));
  const total = money(order.totalCents, order.currency);
  return {
    text: [...rows.map((r) => `  ${r.quantity} × ${r.sku} at ${r.price} = ${r.total}`), `  Total: ${total}`].join('\n'),
    html: [
      '<table cellpadding="4" style="border-collapse:collapse">',
      '<tr><th align="left">Item</th><th align="right">Qty</th><th align="right">Price</th><th align="right">Amount</th></tr>',
      ...rows.map(
        (r) =>
          `<tr><td>${escapeHtml(r.sku)}</td><td align="right">${r.quantity}</td><td align="right">${r.price}</td><td align="right">${r.total}</td></tr>`,
      ),
      `<tr><td colspan="3"><strong>Total</strong></td><td align="right"><strong>${total}</strong></td></tr>`,
      '</table>',
    ].join('\n'),
  };
}

function compose(subject: string, intro: string, order: OrderSummary, outro: string): Email {
  const table = lineTable(order);
  const reference = `Order ${order.orderId}`;
  return {
    subject,
    text: `${intro}\n\n${reference}\n${table.text}\n\n${outro}\n`,
    html: `<p>${escapeHtml(intro)}</p>\n<p>${escapeHtml(reference)}</p>\n${table.html}\n<p>${escapeHtml(outro)}</p>\n`,
  };
}

export function orderReceivedEmail(order: OrderSummary): Email {
  return compose(
    `We received your order ${order.orderId.slice(0, 8)}`,
    'Thank you for your order. We are reserving your items and will confirm your payment shortly.',
    order,
    'You will receive a receipt once the payment is captured.',
  );
}

export function receiptEmail(order: OrderSummary, payment: { paymentIntentId: string; amountCents: number }): Email {
  return compose(
    `Receipt for order ${order.orderId.slice(0, 8)}`,
    `Your payment of ${money(payment.amountCents, order.currency)} was captured.`,
    order,
    `Payment reference: ${payment.paymentIntentId}.`,
  );
}

export function refundEmail(order: OrderSummary, refund: { refundId: string; amountCents: number }): Email {
  return compose(
    `Refund for order ${order.orderId.slice(0, 8)}`,
    `Your order was cancelled and ${money(refund.amountCents, order.currency)} has been refunded.`,
    order,
    `Refund reference: ${refund.refundId}. It may take a few days to appear on your statement.`,
  );
}

/**
 * The emails about an order that another service's message asks for, by kind: each written from
 * the order's summary and what that message said (`facts`, its body). One place, so an email that
 * waited for its order is written exactly as one whose order was known.
 */
export const EMAILS_ABOUT_ORDERS = {
  receipt: (order: OrderSummary, facts: { paymentIntentId: string; amountCents: number }) => receiptEmail(order, facts),
  refund: (order: OrderSummary, facts: { refundId: string; amountCents: number }) => refundEmail(order, facts),
} as const;
export type EmailAboutOrderKind = keyof typeof EMAILS_ABOUT_ORDERS;

/** The `kind` email about `order`, from its message's `facts` (as `EMAILS_ABOUT_ORDERS` says). */
export function writeEmailAboutOrder(kind: string, order: OrderSummary, facts: unknown): Email {
  const write = EMAILS_ABOUT_ORDERS[kind as EmailAboutOrderKind] as
    ((order: OrderSummary, facts: unknown) => Email) | undefined;
  if (!write) throw new Error(`no email of kind ${kind}`);
  return write(order, facts);
}
