import { periodic, type BackgroundWorker, type Logger } from '@idem/runtime';
import { expireReservations } from '../application/reservations.js';
import type { PrismaClient } from '../db.js';

/**
 * Every `intervalMs`, gives back the stock of reservations whose payment did not complete within
 * `ttlMs` (a bounded batch a round), so no customer's order holds stock for ever.
 */
export function createReservationExpiry({
  db,
  now,
  ttlMs,
  intervalMs,
  log,
}: {
  db: PrismaClient;
  now: () => Date;
  ttlMs: number;
  intervalMs: number;
  log: Logger;
}): BackgroundWorker {
  return periodic('reservation expiry', intervalMs, () => expireReservations(db, { ttlMs, now: now() }), log);
}
