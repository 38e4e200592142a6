// Replay of dead letters, on any transport: the store is the inbox's (`inbox.deadLetters`, with
// its table), the operator's routes are @idem/runtime's `deadLetters()` part (dead-letter-routes.ts).
import type { DeadLetter, DeadLetters } from '@idem/inbox';
import type { Publisher } from './transport.js';

/** Which dead letters to deliver again. */
export interface ReplayFilter {
  readonly consumer?: string;
  /** Only these (chosen in the query, among every dead letter, not among the first page). */
  readonly messageIds?: readonly string[];
  readonly limit?: number;
}

/** How late a replay may come: a copy replayed later than the inbox keeps records could apply twice. */
export interface ReplayWindow {
  /** How long after the fact a message may still be replayed (REPLAY_WINDOW_MS). */
  readonly replayWindowMs: number;
  readonly now?: () => Date;
  /**
   * Replays older dead letters too, and truncated ones (their kept start, not what was
   * delivered), for a reason an operator gives (the audit trail records it).
   */
  readonly force?: { readonly reason: string };
}

/** Dead letters older than the replay window, refused without `force`. */
export class ReplayWindowError extends Error {
  readonly code = 'replay_window_passed';
  constructor(readonly tooOld: readonly Pick<DeadLetter, 'consumer' | 'messageId' | 'deadLetteredAt'>[]) {
    super(
      `${tooOld.length} dead letter(s) are older than the replay window: their processed records may have been ` +
        `purged, so a replay could apply them twice. Force it with a reason if you know it is safe: ` +
        tooOld.map((d) => `${d.consumer}/${d.messageId}`).join(', '),
    );
  }
}

/** Dead letters kept only in part (over the size a dead letter keeps), refused without `force`. */
export class ReplayTruncatedError extends Error {
  readonly code = 'payload_truncated';
  constructor(readonly truncated: readonly Pick<DeadLetter, 'consumer' | 'messageId' | 'payloadBytes'>[]) {
    super(
      `${truncated.length} dead letter(s) were kept truncated: what a replay would send is not the message that ` +
        `was delivered. Force it with a reason if you mean to: ` +
        truncated.map((d) => `${d.consumer}/${d.messageId} (${d.payloadBytes} bytes)`).join(', '),
    );
  }
}

/**
 * Delivers dead letters again, under their original message ids, and marks them replayed.
 * A message that had in fact been processed is still suppressed by the inbox on replay — as
 * long as its processed record is kept, which retention promises only within the replay
 * window: older ones are refused unless forced.
 */
export async function replayDeadLetters(
  deadLetters: DeadLetters,
  publisher: Publisher,
  filter: ReplayFilter = {},
  window?: ReplayWindow,
): Promise<DeadLetter[]> {
  const chosen = await deadLetters.list(filter);
  if (window && !window.force) {
    const oldest = (window.now ?? (() => new Date()))().getTime() - window.replayWindowMs;
    const tooOld = chosen.filter((d) => d.deadLetteredAt.getTime() < oldest);
    if (tooOld.length > 0) throw new ReplayWindowError(tooOld);
  }
  const truncated = chosen.filter((d) => d.truncated);
  if (truncated.length > 0 && !window?.force) throw new ReplayTruncatedError(truncated);
  for (const deadLetter of chosen) {
    // Redeliver first, mark second: if this process dies in between, the dead letter is still
    // listed, and replaying it once more delivers the same message id, which is harmless. If
    // the redelivery fails again before the mark, the mark leaves the new dead letter listed.
    await publisher.redeliver(deadLetter.consumer, deadLetter.messageId, deadLetter.payload);
    await deadLetters.markReplayed(deadLetter);
  }
  return chosen;
}
