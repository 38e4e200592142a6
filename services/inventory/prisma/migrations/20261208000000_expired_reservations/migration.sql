-- No reservation outlives a bound: one whose payment did not complete within RESERVATION_TTL_MS
-- gives its stock back and ends `expired`; the sweep finds them by status and age.
ALTER TABLE "reservations" DROP CONSTRAINT "reservations_status_check";
ALTER TABLE "reservations" ADD CONSTRAINT "reservations_status_check"
  CHECK ("status" IN ('reserved', 'committed', 'rejected', 'released', 'expired'));
CREATE INDEX "reservations_status_created_at_idx" ON "reservations"("status", "created_at");
-- The order's correlation id, so the expiry's event joins the order's flow (null for reservations
-- made before it was kept: their expiry starts a correlation of its own).
ALTER TABLE "reservations" ADD COLUMN "correlation_id" UUID;
