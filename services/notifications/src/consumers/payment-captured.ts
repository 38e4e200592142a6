import type { MessageOf } from '@idem/shop';
import { emailAboutOrderHandler } from '../application/work-items.js';

/** notifications.payment-captured.v1: queue the receipt, once per order. */
export const handlePaymentCaptured = ({ now }: { now: () => Date }) =>
  emailAboutOrderHandler<MessageOf<'notifications.payment-captured.v1'>>('receipt', { now });
