/**
 * A consumer's fetch loop can wedge for good: a BullMQ worker whose blocking Redis connection
 * never comes back after a failover (BullMQ issues #4138 and #3185; seen here when the master of a
 * cluster was SIGKILLed on a loaded machine) takes nothing more while its queue fills, with no
 * error to say so. The library's advice is to replace such a worker, and this watch does: every
 * `everyMs` it asks how many deliveries wait; when some waited at two looks in a row while this
 * worker started none and had room for more, it calls `replace`. A healthy worker takes a waiting
 * delivery within BullMQ's drain delay (5 s), so `everyMs` is never shorter than
 * MIN_LIVENESS_CHECK_MS. A worker whose Redis answers neither look at all is replaced too: behind a
 * dead link nothing ever closes its connections (no FIN, no RST), and a new worker opens new ones.
 * A replacement by mistake costs a reconnect: what was in flight is finished or, past the close
 * timeout, redelivered, which the inbox makes safe.
 */
export const MIN_LIVENESS_CHECK_MS = 5_000;

export interface Liveness {
  /** Deliveries this worker has started so far, and whether it has room for another. */
  readonly progress: () => { readonly started: number; readonly roomLeft: boolean };
  /** How many deliveries wait in the queue; undefined when Redis refused; SILENT when it did not answer in time. */
  readonly waiting: () => Promise<number | typeof SILENT | undefined>;
  /** Replaces the worker; `why` says what the looks saw. */
  readonly replace: (why: string) => void;
  readonly everyMs: number;
}

/** What `waiting` answers when Redis answered nothing in time. */
export const SILENT = Symbol('silent');

export function watchLiveness({ progress, waiting, replace, everyMs }: Liveness): { stop(): void } {
  let seen = progress().started;
  /** What the last look found wrong, if anything: the same at two looks in a row replaces the worker. */
  let found: string | undefined;
  let looking = false;
  let stopped = false;
  const look = async () => {
    if (looking) return; // a look that outlasts the interval is not stacked
    looking = true;
    try {
      const now = progress();
      const count = await waiting().catch(() => undefined); // Redis down: the next look will tell
      // Stopped while asking (the consumer is closing): a worker started now would outlive it.
      if (stopped) return;
      const waited = typeof count === 'number' && count > 0 && now.started === seen && now.roomLeft;
      const wrong = count === SILENT ? 'silent' : waited ? 'wedged' : undefined;
      if (wrong && wrong === found) {
        replace(
          wrong === 'silent'
            ? 'its Redis connection answered nothing at two looks in a row'
            : `it started no delivery while ${count as number} waited`,
        );
        found = undefined;
      } else found = wrong;
      seen = progress().started;
    } finally {
      looking = false;
    }
  };
  const timer = setInterval(() => void look(), Math.max(everyMs, MIN_LIVENESS_CHECK_MS));
  timer.unref();
  return {
    stop: () => {
      stopped = true;
      clearInterval(timer);
    },
  };
}
