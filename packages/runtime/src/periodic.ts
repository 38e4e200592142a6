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

/**
 * Runs `runOnce` back to back while it finds work (it returns how many items it handled) and
 * sleeps `idleMs` when it found none; a failed round is logged and retried after the sleep.
 */
export function pollingWorker(
  name: string,
  runOnce: () => Promise<number>,
  { idleMs, log }: { idleMs: number; log: Logger },
): BackgroundWorker & { runOnce(): Promise<number> } {
  let stopped = true;
  let loop: Promise<void> = Promise.resolve();
  return {
    runOnce,
    start() {
      stopped = false;
      loop = (async () => {
        while (!stopped) {
          let handled = 0;
          try {
            handled = await runOnce();
          } catch (error) {
            log.warn({ err: error, worker: name }, `${name}: a round failed; trying again`);
          }
          if (handled === 0 && !stopped) await new Promise((resolve) => setTimeout(resolve, idleMs));
        }
      })();
    },
    async stop() {
      stopped = true;
      await loop;
    },
  };
}

/**
 * Waits for every task of a round, even when one fails (so none is still running when the
 * round ends), then rethrows the first failure.
 */
export async function awaitAll(tasks: readonly Promise<unknown>[]): Promise<void> {
  const failed = (await Promise.allSettled(tasks)).find((result) => result.status === 'rejected');
  if (failed) throw failed.reason;
}
