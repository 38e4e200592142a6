-- When the attempt's provider idempotency key was made: Stripe forgets a key after about 24
-- hours, so a key is used only while it is young, and an old attempt is reconciled first.
ALTER TABLE "payment_attempts" ADD COLUMN "idempotency_key_created_at" TIMESTAMPTZ(6);
UPDATE "payment_attempts" SET "idempotency_key_created_at" = "created_at";
ALTER TABLE "payment_attempts" ALTER COLUMN "idempotency_key_created_at" SET NOT NULL;
