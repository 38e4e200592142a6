import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { MIN_LIVENESS_CHECK_MS, SILENT, watchLiveness } from './liveness.js';

beforeEach(() => void vi.useFakeTimers());
afterEach(() => void vi.useRealTimers());

/** A worker that starts nothing, with room, over a queue where `waiting` deliveries wait. */
function wedged(waiting: () => Promise<number | typeof SILENT | undefined>) {
  const replace = vi.fn();
  const watch = watchLiveness({
    everyMs: 1_000,
    progress: () => ({ started: 0, roomLeft: true }),
    waiting,
    replace,
  });
  return { replace, watch };
}

describe('watchLiveness', () => {
  it('replaces a worker that started nothing while deliveries waited at two looks in a row', async () => {
    const { replace, watch } = wedged(async () => 3);
    await vi.advanceTimersByTimeAsync(MIN_LIVENESS_CHECK_MS);
    expect(replace).not.toHaveBeenCalled();
    await vi.advanceTimersByTimeAsync(MIN_LIVENESS_CHECK_MS);
    expect(replace).toHaveBeenCalledWith('it started no delivery while 3 waited');
    watch.stop();
  });

  it('replaces a worker whose Redis answers neither of two looks in a row, and not after one', async () => {
    const answers: (number | typeof SILENT)[] = [SILENT, 0, SILENT, SILENT];
    const { replace, watch } = wedged(async () => answers.shift()!);
    await vi.advanceTimersByTimeAsync(3 * MIN_LIVENESS_CHECK_MS); // silent, answered, silent
    expect(replace).not.toHaveBeenCalled();
    await vi.advanceTimersByTimeAsync(MIN_LIVENESS_CHECK_MS); // silent again
    expect(replace).toHaveBeenCalledExactlyOnceWith('its Redis connection answered nothing at two looks in a row');
    watch.stop();
  });

  it('starts no worker once stopped, even when a look was still asking Redis', async () => {
    let answer: (count: number) => void = () => {};
    const answers = [Promise.resolve(3), new Promise<number>((resolve) => (answer = resolve))];
    const { replace, watch } = wedged(() => answers.shift()!);
    await vi.advanceTimersByTimeAsync(MIN_LIVENESS_CHECK_MS); // deliveries waited at the first look
    await vi.advanceTimersByTimeAsync(MIN_LIVENESS_CHECK_MS); // the second look asks…
    watch.stop(); // …and the consumer closes before Redis answers
    answer(3);
    await vi.advanceTimersByTimeAsync(MIN_LIVENESS_CHECK_MS);
    expect(replace).not.toHaveBeenCalled();
  });
});
