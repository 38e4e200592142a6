import type { Logger } from './logger.js';
import type { BackgroundWorker } from './run-service.js';

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
