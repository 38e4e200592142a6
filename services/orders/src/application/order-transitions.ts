import type { ConsumerName } from '@idem/contracts';
import { permanentFailure, processed, stale, type MessageHandler } from '@idem/inbox';
import type { MessageOf } from '@idem/contracts';
import type { Tx } from '../db.js';
import type { OrderTrigger } from '../domain/order-status.js';
import { applyTransition } from './orders.js';

/**
 * The orders service's consumers all do one thing: move the order on the event, through the
 * state machine. An event that no longer applies (a late stock-reserved for a cancelled
 * order) is stale, not an error.
 */
export function transitionOn<C extends ConsumerName>(
  trigger: OrderTrigger,
  { now }: { now: () => Date },
): MessageHandler<Tx, MessageOf<C> & { body: { orderId: string } }> {
  return async (message, tx) => {
    const { orderId } = message.body;
    const result = await applyTransition(tx, orderId, trigger, { now: now(), causationId: message.messageId });
    switch (result.kind) {
      case 'changed':
        return processed;
      case 'not_applicable':
        return stale(`order ${orderId} is ${result.status}; ${trigger} no longer applies`);
      case 'unknown_order':
        // The order commits before any event about it can exist; this one was never ours.
        return permanentFailure('unknown_order', `no order ${orderId} in the orders database`);
    }
  };
}
