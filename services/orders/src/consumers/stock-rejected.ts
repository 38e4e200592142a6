import { transitionOn } from '../application/order-transitions.js';

/** orders.stock-rejected.v1: moves the order on through its state machine (stale when it no longer applies). */
export const handleStockRejected = ({ now }: { now: () => Date }) =>
  transitionOn<'orders.stock-rejected.v1'>('stock-rejected', { now });
