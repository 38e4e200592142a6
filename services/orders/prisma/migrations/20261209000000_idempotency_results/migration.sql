-- An Idempotency-Key keeps what its first request did (the order it placed), not an HTTP answer:
-- the route says that in HTTP, the same way for the first request and every replay.
ALTER TABLE "idempotency_keys" DROP COLUMN "response_status";
ALTER TABLE "idempotency_keys" RENAME COLUMN "response_body" TO "result";
