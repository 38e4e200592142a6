import { listen } from '@idem/database';
import type { Logger } from './logger.js';

/** Work a service process runs beside its consumers (payment worker, e-mail dispatcher, cleanups). */
export interface BackgroundWorker {
  start(): void;
  stop(): Promise<void>;
}

/** Runs `task` every `intervalMs` (never two at once), logging failures; stop() waits for a run in progress. */
export function periodic(
  name: string,
  intervalMs: number,
  task: () => Promise<unknown>,
  log: Logger,
): BackgroundWorker {
  let timer: NodeJS.Timeout | undefined;
  let running: Promise<void> = Promise.resolve();
  let stopped = true;
  const schedule = () => {
    if (stopped) return;
    timer = setTimeout(() => {
      running = task()
        .then(
          (result) => log.debug({ task: name, result }, `${name} done`),
          (error: unknown) => log.warn({ err: error, task: name }, `${name} failed; will try again`),
        )
        .finally(schedule);
    }, intervalMs);
  };
  return {
    start() {
      stopped = false;
      schedule();
    },
    async stop() {
      stopped = true;
      clearTimeout(timer);
      await running;
    },
  };
}

export interface PollingOptions {
  readonly idleMs: number;
  readonly log: Logger;
  readonly wakeOn?: { databaseUrl: string; channel: string };
  /**
   * The most a round claims: with `wakeOn`, a round that handled fewer took all that was due, and
   * sleeps. A round that says so itself ({@link PollingRound}) is taken at its word instead.
   */
  readonly batchSize?: number;
}

/**
 * What a round did: how many items it handled, and, when only the round can know it, whether more
 * may be due now (`moreDue`: it took all it had room for, e.g. one item per free connection, which
 * can be fewer than the batch size however much is due).
 */
export type PollingRound = number | { readonly handled: number; readonly moreDue: boolean };

/** A polling worker, and its round to run by hand. */
export interface PollingWorker<R> extends BackgroundWorker {
  runOnce(): Promise<R>;
  /** Looks again at once, as a notification would: for work its own process knows is due. */
  wake(): void;
}

/** How long a worker woken by a notification waits for more work to arrive before its round. */
const GATHER_MS = 20;

/**
 * Runs `runOnce` back to back while it finds work (it returns how many items it handled) and
 * sleeps `idleMs` when it found none (or, woken by notifications, less than a full batch, or the
 * round said no more is due); a
 * failed round is logged and retried after the sleep. With `wakeOn`, it LISTENs on that channel
 * and a notification ends the sleep at once (one that comes during a round skips the next
 * sleep): work is taken when it is written, and the sleep is only the fallback for a
 * notification that never came.
 */
export function pollingWorker<R extends PollingRound>(
  name: string,
  runOnce: () => Promise<R>,
  { idleMs, log, wakeOn, batchSize }: PollingOptions,
): PollingWorker<R> {
  let stopped = true;
  let loop: Promise<void> = Promise.resolve();
  let listener: { close(): Promise<void> } | undefined;
  let notified = false;
  /** Ends the current sleep; `byNotification` only when the sleep is not after a failed round. */
  let wake: ((byNotification: boolean) => void) | undefined;
  const sleep = (wakeable: boolean) =>
    new Promise<void>((resolve) => {
      const end = () => {
        clearTimeout(timer);
        wake = undefined;
        resolve();
      };
      const timer = setTimeout(end, idleMs);
      wake = (byNotification) => {
        if (!byNotification || wakeable) end();
      };
    });
  const onNotification = () => {
    notified = true;
    wake?.(true);
  };
  return {
    runOnce,
    wake: onNotification,
    start() {
      stopped = false;
      if (wakeOn) {
        const onError = (error: unknown) => log.warn({ err: error, worker: name }, `${name}: LISTEN failed; polling`);
        listener = listen(wakeOn.databaseUrl, wakeOn.channel, { onNotification, onError, retryMs: idleMs });
      }
      loop = (async () => {
        while (!stopped) {
          notified = false;
          const round = await runOnce().catch((error: unknown) => {
            log.warn({ err: error, worker: name }, `${name}: a round failed; trying again`);
            return undefined;
          });
          if (stopped) break;
          if (round === undefined) await sleep(false);
          else if (!moreMayBeDue(round, { wakeOn, batchSize })) {
            if (!notified) await sleep(true);
            // Woken for new work: what is written with it gathers for a moment, so a burst is one
            // round (one claim for many items) instead of a round per item.
            if (notified && !stopped) await new Promise((r) => setTimeout(r, GATHER_MS));
          }
        }
      })();
    },
    async stop() {
      stopped = true;
      wake?.(false);
      await loop;
      await listener?.close();
    },
  };
}

/**
 * Whether to look again at once. A round short of a full batch took everything due when it
 * claimed; what is written since notifies, so looking again at once would only cost an empty
 * claim. A round that says whether more is due is believed: counting cannot tell a round bounded
 * by its free connections from one that found little.
 */
function moreMayBeDue(round: PollingRound, { wakeOn, batchSize }: Pick<PollingOptions, 'wakeOn' | 'batchSize'>) {
  if (typeof round !== 'number') return round.moreDue;
  return round > 0 && !(wakeOn && batchSize !== undefined && round < batchSize);
}

/**
 * Waits for every task of a round, even when one fails (so none is still running when the
 * round ends), then rethrows the first failure.
 */
export async function awaitAll(tasks: readonly Promise<unknown>[]): Promise<void> {
  const failed = (await Promise.allSettled(tasks)).find((result) => result.status === 'rejected');
  if (failed) throw failed.reason;
}
