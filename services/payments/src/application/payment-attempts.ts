import type { PrismaClient } from '../db.js';

/** An order's payment attempts, oldest first. */
export const paymentAttemptsOf = (db: PrismaClient, orderId: string) =>
  db.paymentAttempt.findMany({ where: { orderId }, orderBy: { createdAt: 'asc' } });

/**
 * An operator who fixed an integration fault lets the worker try an attempt that needs attention
 * again, with its persisted key: the refused request stored no result at the provider.
 */
export async function retryAttempt(db: PrismaClient, id: string, now: Date): Promise<boolean> {
  const { count } = await db.paymentAttempt.updateMany({
    where: { id, status: 'needs_attention' },
    data: { status: 'pending', failureCode: null, failureReason: null, nextAttemptAt: now, updatedAt: now },
  });
  return count === 1;
}
