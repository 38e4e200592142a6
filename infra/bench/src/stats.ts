/** Small statistics for the benchmark tables. */

export function median(values: readonly number[]): number {
  return percentile(values, 50);
}

/** Nearest-rank percentile (0 for an empty list). */
export function percentile(values: readonly number[], p: number): number {
  if (values.length === 0) return 0;
  const sorted = [...values].sort((a, b) => a - b);
  const rank = Math.ceil((p / 100) * sorted.length);
  return sorted[Math.min(sorted.length - 1, Math.max(0, rank - 1))]!;
}

/** Runs `work(i)` for i in [0, count) with at most `concurrency` at a time. */
export async function forEachConcurrently(
  count: number,
  concurrency: number,
  work: (index: number) => Promise<void>,
): Promise<void> {
  let next = 0;
  const lane = async () => {
    while (next < count) await work(next++);
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, count) }, lane));
}

/** A promise that resolves once {@link Countdown.tick} was called `count` times. */
export interface Countdown {
  readonly done: Promise<void>;
  tick(): void;
}

export function countdown(count: number): Countdown {
  let left = count;
  let resolve!: () => void;
  const done = new Promise<void>((r) => (resolve = r));
  if (left <= 0) resolve();
  return {
    done,
    tick() {
      if (--left === 0) resolve();
    },
  };
}

/**
 * An open loop: starts `start(i)` for i in [0, count), the i-th `i / perSecond` s after the first,
 * whether or not earlier ones finished; resolves with all of them once all have settled.
 */
export async function atRate<T>(count: number, perSecond: number, start: (index: number) => Promise<T>): Promise<T[]> {
  const started = Date.now();
  const running: Promise<T>[] = [];
  for (let i = 0; i < count; i++) {
    await sleep(started + (i * 1000) / perSecond - Date.now());
    running.push(start(i));
  }
  return Promise.all(running);
}

/** Waits `ms`; none when it is already past (a late open-loop step asks for a negative wait). */
export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, Math.max(0, ms)));
