import type { ConsumerName } from '@idem/shop';
import { permanentFailure, processed, stale, type MessageHandler } from '@idem/inbox';
import type { MessageOf } from '@idem/shop';
import type { Tx } from '../db.js';
import type { OrderTrigger } from '../domain/order-status.js';
import { applyTransition, type OrderView } from './orders.js';

/**
 * The orders service's consumers all do one thing: move the order on the event, through the
 * state machine. An event that no longer applies (a late stock-reserved for a cancelled
 * order) is stale, not an error.
 */
export function transitionOn<C extends ConsumerName>(
  trigger: OrderTrigger,
  {
    now,
    reasonOf = () => undefined,
    then = async () => {},
  }: {
    now: () => Date;
    /** Why the order moved, in words its customer can read (a declined payment's message). */
    reasonOf?: (message: MessageOf<C>) => string | undefined;
    /** What else the change means, in the same transaction (an announcement through the outbox). */
    then?: (tx: Tx, order: OrderView, message: MessageOf<C>, at: Date) => Promise<void>;
  },
): MessageHandler<Tx, MessageOf<C> & { body: { orderId: string } }> {
  return async (message, tx) => {
    const { orderId } = message.body;
    const at = now();
    const reason = reasonOf(message);
    const result = await applyTransition(tx, orderId, trigger, {
      now: at,
      causationId: message.messageId,
      ...(reason === undefined ? {} : { reason }),
    });
    switch (result.kind) {
      case 'changed':
        await then(tx, result.order, message, at);
        return processed;
      case 'not_applicable':
        return stale(`order ${orderId} is ${result.status}; ${trigger} no longer applies`);
      case 'unknown_order':
        // The order commits before any event about it can exist; this one was never ours.
        return permanentFailure('unknown_order', `no order ${orderId} in the orders database`);
    }
  };
}
