import { periodic, type BackgroundWorker, type Logger } from '@idem/runtime';
import { purgeExpiredKeys } from '../application/idempotency-keys.js';
import type { PrismaClient } from '../db.js';

/**
 * Every `intervalMs`, deletes the Idempotency-Keys past their expiry (in bounded batches), so a
 * client's retry window is what the table holds and no more.
 */
export function createIdempotencyKeyCleanup({
  db,
  now,
  intervalMs,
  log,
}: {
  db: PrismaClient;
  now: () => Date;
  intervalMs: number;
  log: Logger;
}): BackgroundWorker {
  return periodic('idempotency key cleanup', intervalMs, () => purgeExpiredKeys(db, now()), log);
}
