-- A reservation whose payment was captured is committed: its units leave `reserved` (they are
-- sold), so `reserved` means one thing — held for orders not paid yet — and goes down again.
ALTER TABLE "reservations" DROP CONSTRAINT "reservations_status_check";
ALTER TABLE "reservations" ADD CONSTRAINT "reservations_status_check"
  CHECK ("status" IN ('reserved', 'committed', 'rejected', 'released'));
