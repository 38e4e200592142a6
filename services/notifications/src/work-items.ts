import { randomUUID } from 'node:crypto';
import type { Tx } from './db.js';
import type { Email } from './domain/emails.js';

/**
 * Records an email to send, in the caller's (inbox) transaction, unless one with the same
 * business dedupe key exists. Nothing is sent here: SMTP is not transactional, so the
 * dispatcher sends after the commit. The Message-ID is fixed now, so every send of this item
 * carries the same one.
 */
export async function addEmailWorkItem(
  tx: Tx,
  item: { dedupeKey: string; kind: string; orderId: string; to: string; email: Email },
  now: Date,
): Promise<boolean> {
  const id = randomUUID();
  const { count } = await tx.emailWorkItem.createMany({
    data: {
      id,
      dedupeKey: item.dedupeKey,
      kind: item.kind,
      orderId: item.orderId,
      toAddress: item.to,
      subject: item.email.subject,
      textBody: item.email.text,
      htmlBody: item.email.html,
      messageId: `<email-${id}@idem.local>`,
      status: 'pending',
      nextAttemptAt: now,
      createdAt: now,
      updatedAt: now,
    },
    skipDuplicates: true,
  });
  return count === 1;
}
