/**
 * Group commit for one consumer instance, the way databases batch their log flushes: a delivery
 * that arrives while no batch is committing starts one at once (alone, unless others arrived in
 * the same turn of the event loop); deliveries that arrive while one commits wait for it and then
 * go together, up to `maxBatch` (a full batch goes at once). Under light load nothing waits; under
 * load the batches grow by themselves.
 *
 * `commit` gets the waiting items and resolves with one result per item, in order; each caller's
 * promise settles with its own result only when the whole batch is done.
 */
export function createGroupCommit<T, R>(
  commit: (items: readonly T[]) => Promise<readonly R[]>,
  maxBatch: number,
): (item: T) => Promise<R> {
  let waiting: { item: T; resolve: (result: R) => void; reject: (error: unknown) => void }[] = [];
  let committing = 0;
  let scheduled = false;

  function flush(): void {
    scheduled = false;
    if (waiting.length === 0) return;
    const batch = waiting;
    waiting = [];
    committing++;
    commit(batch.map((entry) => entry.item))
      .then(
        (results) => batch.forEach((entry, i) => entry.resolve(results[i]!)),
        (error: unknown) => batch.forEach((entry) => entry.reject(error)),
      )
      .finally(() => {
        committing--;
        if (committing === 0) schedule();
      });
  }

  function schedule(): void {
    if (scheduled || waiting.length === 0) return;
    scheduled = true;
    setImmediate(flush);
  }

  return (item) =>
    new Promise<R>((resolve, reject) => {
      waiting.push({ item, resolve, reject });
      if (waiting.length >= maxBatch) flush();
      else if (committing === 0) schedule();
    });
}
