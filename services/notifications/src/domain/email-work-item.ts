/**
 * The email work item's state machine. Pure; the dispatcher applies it.
 *
 *   pending ──accepted by the SMTP server──▶ sent
 *      ├──refused (4xx, connection lost) ──▶ pending, retried later with backoff
 *      └──refused for good (5xx), or the last attempt failed ──▶ parked (an operator looks)
 */
export type WorkItemStatus = 'pending' | 'sent' | 'parked';

/**
 * What a failed send makes of the item: parked when the server refused it for good (a 5xx reply)
 * or it had its last attempt; otherwise pending, retried after a delay that doubles per attempt
 * from `retryDelayMs`, at most ten minutes.
 */
export function afterFailedSend(
  { attempts }: { attempts: number },
  { responseCode, maxAttempts, retryDelayMs }: { responseCode: number; maxAttempts: number; retryDelayMs: number },
): { status: Exclude<WorkItemStatus, 'sent'>; retryInMs: number } {
  const permanent = responseCode >= 500 && responseCode < 600;
  return {
    status: permanent || attempts >= maxAttempts ? 'parked' : 'pending',
    retryInMs: Math.min(600_000, retryDelayMs * 2 ** Math.max(0, attempts - 1)),
  };
}
