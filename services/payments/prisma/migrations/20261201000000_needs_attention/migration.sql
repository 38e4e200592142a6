-- A payment attempt the provider refused as an invalid request (an integration fault, not a
-- customer's decline) waits for an operator in its own status.
ALTER TABLE "payment_attempts" DROP CONSTRAINT "payment_attempts_status_check";
ALTER TABLE "payment_attempts" ADD CONSTRAINT "payment_attempts_status_check"
  CHECK ("status" IN ('pending', 'captured', 'failed', 'needs_attention', 'cancelled', 'refund_pending', 'refunded'));
