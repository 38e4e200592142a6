-- One word per idea (docs/concepts.md, the glossary): an attempt the provider refused as an
-- invalid request waits for an operator parked, as an outbox row or an email does.
ALTER TABLE "payment_attempts" DROP CONSTRAINT "payment_attempts_status_check";
UPDATE "payment_attempts" SET "status" = 'parked' WHERE "status" = 'needs_attention';
ALTER TABLE "payment_attempts" ADD CONSTRAINT "payment_attempts_status_check"
  CHECK ("status" IN ('pending', 'captured', 'failed', 'parked', 'cancelled', 'refund_pending', 'refunded'));
