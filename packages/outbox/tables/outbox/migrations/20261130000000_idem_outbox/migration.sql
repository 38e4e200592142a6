-- Owned by @idem/outbox.
CREATE TABLE IF NOT EXISTS "outbox_messages" (
    "message_id" UUID NOT NULL,
    "position" BIGSERIAL NOT NULL,
    "type" TEXT NOT NULL,
    "envelope" JSONB NOT NULL,
    "created_at" TIMESTAMPTZ(6) NOT NULL,
    "published_at" TIMESTAMPTZ(6),
    "attempts" INTEGER NOT NULL DEFAULT 0,
    "next_attempt_at" TIMESTAMPTZ(6) NOT NULL,
    "last_error" VARCHAR(500),

    CONSTRAINT "outbox_messages_pkey" PRIMARY KEY ("message_id")
);
CREATE INDEX IF NOT EXISTS "outbox_messages_published_at_position_idx" ON "outbox_messages"("published_at", "position");
