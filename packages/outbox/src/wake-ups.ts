/**
 * How the relay's loops sleep and what wakes them: a notification that rows were written (one
 * loop), a full batch (one more loop: rows are waiting), or stopping (all of them). A loop backing
 * off from a failing broker sleeps on through notifications.
 */
export class WakeUps {
  /** A notification that arrives while a batch is being published must not be lost: the next sleep is skipped. */
  private notified = false;
  private stopping = false;
  private readonly sleepers = new Set<(notification: boolean) => boolean>();

  /** Rows were written: wake a sleeping loop, or the next one that would sleep. */
  readonly notify = (): void => {
    this.notified = true;
    this.wakeOne();
  };

  /** Wakes one loop sleeping until rows are due; a loop backing off from a failing broker stays asleep. */
  wakeOne(): void {
    for (const wake of this.sleepers) if (wake(true)) return;
  }

  /** A loop starts a batch: notifications from now on are for the next one. */
  beginBatch(): void {
    this.notified = false;
  }

  /**
   * Sleeps for `ms` (forever for Infinity); a wake-up for due rows ends the sleep early unless the
   * broker is failing (`wakeable` false); stopping always does.
   */
  sleep(ms: number, wakeable: boolean): Promise<void> {
    // A loop that comes to sleep after stop() woke the sleepers must not sleep at all.
    if (this.stopping || (wakeable && this.notified)) return Promise.resolve();
    return new Promise((resolve) => {
      const wake = (notification: boolean) => {
        if (notification && !wakeable) return false;
        clearTimeout(timer);
        this.sleepers.delete(wake);
        resolve();
        return true;
      };
      const timer = ms === Infinity ? undefined : setTimeout(() => wake(false), ms);
      this.sleepers.add(wake);
    });
  }

  get stopped(): boolean {
    return this.stopping;
  }

  start(): void {
    this.stopping = false;
  }

  stop(): void {
    this.stopping = true;
    for (const wake of this.sleepers) wake(false);
  }
}
