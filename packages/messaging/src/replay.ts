import type { DeadLetter, DeadLetters } from '@idem/inbox';
import type { Publisher } from './publisher.js';

/**
 * Delivers dead letters again, under their original message ids, and marks them replayed.
 * A message that had in fact been processed is still suppressed by the inbox on replay.
 */
export async function replayDeadLetters(
  deadLetters: DeadLetters,
  publisher: Publisher,
  filter: { consumer?: string; messageIds?: readonly string[]; limit?: number } = {},
): Promise<DeadLetter[]> {
  const candidates = await deadLetters.list({ consumer: filter.consumer, limit: filter.limit });
  const chosen = filter.messageIds ? candidates.filter((d) => filter.messageIds!.includes(d.messageId)) : candidates;
  for (const deadLetter of chosen) {
    // Redeliver first, mark second: if this process dies in between, the dead letter is still
    // listed, and replaying it once more delivers the same message id, which is harmless. If
    // the redelivery fails again before the mark, the mark leaves the new dead letter listed.
    await publisher.redeliver(deadLetter.consumer, deadLetter.messageId, deadLetter.payload);
    await deadLetters.markReplayed(deadLetter);
  }
  return chosen;
}
