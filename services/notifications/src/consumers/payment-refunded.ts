import type { MessageOf } from '@idem/shop';
import { emailAboutOrderHandler } from '../application/work-items.js';

/** notifications.payment-refunded.v1: queue the refund notice, once per order. */
export const handlePaymentRefunded = ({ now }: { now: () => Date }) =>
  emailAboutOrderHandler<MessageOf<'notifications.payment-refunded.v1'>>('refund', { now });
