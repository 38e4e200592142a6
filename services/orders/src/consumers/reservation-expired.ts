import type { MessageOf } from '@idem/shop';
import { announceCancellation } from '../application/cancel-order.js';
import { transitionOn } from '../application/order-transitions.js';

const REASON =
  'The payment did not complete in time, so the stock held for the order went back: the order is cancelled.';

/**
 * orders.reservation-expired.v1: inventory gave the order's stock back because its payment did not
 * complete in time. The order is cancelled, and says so: payments cancels the payment, or refunds
 * one that completed meanwhile.
 */
export const handleReservationExpired = ({ now }: { now: () => Date }) =>
  transitionOn<'orders.reservation-expired.v1'>('reservation-expired', {
    now,
    reasonOf: () => REASON,
    then: (tx, order, message: MessageOf<'orders.reservation-expired.v1'>, at) =>
      announceCancellation(tx, order, {
        reason: REASON,
        correlationId: message.correlationId,
        causationId: message.messageId,
        at,
      }),
  });
