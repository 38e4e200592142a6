import { transitionOn } from '../application/order-transitions.js';

/** orders.stock-reserved.v1: moves the order on through its state machine (stale when it no longer applies). */
export const handleStockReserved = ({ now }: { now: () => Date }) =>
  transitionOn<'orders.stock-reserved.v1'>('stock-reserved', { now });
