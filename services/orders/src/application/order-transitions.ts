import type { AnyEnvelope } from '@idem/contracts';
import { permanentFailure, processed, stale, type HandlerResult, type OneStatementEffect } from '@idem/inbox';
import type { Tx } from '../db.js';
import type { OrderTrigger } from '../domain/order-status.js';
import { applyTransition, moveWrite, type TransitionResult } from './orders.js';

/**
 * The use case of most of the orders service's consumers: move the order on the event, through
 * the state machine, in the inbox's transaction, recording the message that caused it and why
 * (in words its customer can read).
 */
export function moveOrderOn(
  tx: Tx,
  trigger: OrderTrigger,
  message: AnyEnvelope & { body: { orderId: string } },
  { at, reason }: { at: Date; reason?: string },
): Promise<TransitionResult> {
  return applyTransition(tx, message.body.orderId, trigger, {
    now: at,
    causationId: message.messageId,
    ...(reason === undefined ? {} : { reason }),
  });
}

/** {@link moveOrderOn}'s common case, the move applying, as the inbox's one statement with its record. */
export function moveOrderOnInOneStatement(
  trigger: OrderTrigger,
  message: AnyEnvelope & { body: { orderId: string } },
  { at }: { at: Date },
): OneStatementEffect {
  return {
    with: moveWrite(message.body.orderId, trigger, { now: at, causationId: message.messageId }),
    wrote: 'moved',
  };
}

/**
 * What a move means for the delivery: an event that no longer applies (a late stock-reserved for
 * a cancelled order) is stale, not an error; an order this service never had was never ours.
 */
export function outcomeOfMove(result: TransitionResult, orderId: string, trigger: OrderTrigger): HandlerResult {
  switch (result.kind) {
    case 'changed':
      return processed;
    case 'not_applicable':
      return stale(`order ${orderId} is ${result.status}; ${trigger} no longer applies`);
    case 'unknown_order':
      // The order commits before any event about it can exist; this one was never ours.
      return permanentFailure('unknown_order', `no order ${orderId} in the orders database`);
  }
}
