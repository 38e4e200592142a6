import { explore, type Explored, type Report } from './explore.js';
import { payments } from './models/payments.js';

/** A space small enough to look at whole: every schedule of it, as it ran and ended. */
export interface SmallSpace {
  readonly report: Report;
  readonly schedules: readonly Explored[];
}

/**
 * Every interleaving of a cancellation and a reservation of one order at payments, statement by
 * statement, each followed by the payment worker's turns: the right way, or with the order's row
 * left unlocked (`wrong`), where one interleaving charges the cancelled order. The console shows it,
 * and gives it up (`signal`) when the page that asked for it is closed.
 */
export async function cancelVersusReservation(
  way: 'right' | 'wrong',
  { signal }: { signal?: AbortSignal } = {},
): Promise<SmallSpace> {
  const schedules: Explored[] = [];
  const report = await explore(payments, {
    ...(way === 'wrong' ? { wrongWay: 'unlocked-order-row' } : {}),
    ...(signal ? { signal } : {}),
    only: { story: 'reserved, cancelled, paid or not', pair: ['reserved', 'cancelled'] },
    onSchedule: (schedule) => schedules.push(schedule),
  });
  return { report, schedules };
}
