import { mastersOf, type RedisClient } from './redis.js';

/**
 * Stops a Lua script that holds Redis past its `busy-reply-threshold` — say a service user's
 * `EVAL "while true do end" 0`, which ACLs cannot refuse (BullMQ needs EVAL): every `everyMs` it
 * pings each master, and a master that answers `BUSY` is sent `SCRIPT KILL`. A script that wrote
 * nothing then ends with an error for its caller; one that wrote cannot be killed (Redis answers
 * `UNKILLABLE`, and only an operator's `SHUTDOWN NOSAVE` ends it: docs/operations.md, "A script
 * that never ends"). Returns a function that stops watching.
 *
 * Run it in one process per deployment, on a connection of its own as a user of
 * `scriptWatcherRedisUser` (PING and SCRIPT KILL, no key; connect with `enableReadyCheck: false`):
 * no service's user may kill a script, and a watch in every process would ping Redis from each.
 * idem's native run watches in the process of `pnpm start`; compose and Kubernetes run
 * infra/redis-script-watcher.sh beside Redis instead.
 */
export function killRunawayScripts(
  redis: RedisClient,
  { everyMs = 1_000, onBusy }: { everyMs?: number; onBusy?: (outcome: 'killed' | 'unkillable' | 'ended') => void } = {},
): () => void {
  let pinging = false;
  const timer = setInterval(() => {
    if (pinging) return; // a ping still waiting: the script has not reached the threshold yet
    pinging = true;
    void Promise.all(
      mastersOf(redis).map((node) =>
        node.ping().then(
          () => undefined,
          async (error: unknown) => {
            if (!/^BUSY/.test((error as Error).message)) return; // unreachable: not this watch's business
            await node.call('SCRIPT', 'KILL').then(
              () => onBusy?.('killed'),
              (refusal: unknown) => onBusy?.(/^UNKILLABLE/.test((refusal as Error).message) ? 'unkillable' : 'ended'),
            );
          },
        ),
      ),
    ).finally(() => {
      pinging = false;
    });
  }, everyMs);
  timer.unref();
  return () => clearInterval(timer);
}
