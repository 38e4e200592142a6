import type { DeliveryOutcome } from '@idem/inbox';
import type { ConsumerRunner, Delivery } from './consumer-runner.js';

/**
 * Group commit for one consumer instance, the way databases batch their log flushes: a delivery
 * that arrives while no batch is committing starts one at once (alone, unless others arrived in
 * the same turn of the event loop); deliveries that arrive while one commits wait for it and then
 * go together, up to `maxBatch` (a full batch goes at once). Under light load nothing waits; under
 * load the batches grow by themselves. Each batch is the runner's `commitBatch`; each delivery's
 * promise resolves with its own outcome only when its whole batch is done.
 */
export class DeliveryBatches {
  #waiting: { delivery: Delivery; resolve: (outcome: DeliveryOutcome) => void; reject: (error: unknown) => void }[] =
    [];
  #committing = 0;
  #scheduled = false;

  constructor(
    private readonly runner: Pick<ConsumerRunner<never>, 'commitBatch'>,
    private readonly maxBatch: number,
  ) {}

  /** Resolves with the delivery's outcome once the batch it went in has ended. */
  add(delivery: Delivery): Promise<DeliveryOutcome> {
    return new Promise<DeliveryOutcome>((resolve, reject) => {
      this.#waiting.push({ delivery, resolve, reject });
      if (this.#waiting.length >= this.maxBatch) this.#flush();
      else if (this.#committing === 0) this.#schedule();
    });
  }

  #flush(): void {
    this.#scheduled = false;
    if (this.#waiting.length === 0) return;
    const batch = this.#waiting;
    this.#waiting = [];
    this.#committing++;
    this.runner
      .commitBatch(batch.map((entry) => entry.delivery))
      .then(
        (outcomes) => batch.forEach((entry, i) => entry.resolve(outcomes[i]!)),
        (error: unknown) => batch.forEach((entry) => entry.reject(error)),
      )
      .finally(() => {
        this.#committing--;
        if (this.#committing === 0) this.#schedule();
      });
  }

  #schedule(): void {
    if (this.#scheduled || this.#waiting.length === 0) return;
    this.#scheduled = true;
    setImmediate(() => this.#flush());
  }
}
