-- Owned by @idem/inbox.
CREATE TABLE IF NOT EXISTS "processed_messages" (
    "consumer" TEXT NOT NULL,
    "message_id" UUID NOT NULL,
    "body_hash" CHAR(64) NOT NULL,
    "processed_at" TIMESTAMPTZ(6) NOT NULL,

    CONSTRAINT "processed_messages_pkey" PRIMARY KEY ("consumer","message_id")
);
CREATE INDEX IF NOT EXISTS "processed_messages_processed_at_idx" ON "processed_messages"("processed_at");

CREATE TABLE IF NOT EXISTS "dead_letters" (
    "consumer" TEXT NOT NULL,
    "message_id" TEXT NOT NULL,
    "payload" JSONB NOT NULL,
    "code" TEXT NOT NULL,
    "reason" VARCHAR(500) NOT NULL,
    "attempts" INTEGER NOT NULL,
    "dead_lettered_at" TIMESTAMPTZ(6) NOT NULL,
    "replayed_at" TIMESTAMPTZ(6),
    "replay_count" INTEGER NOT NULL DEFAULT 0,

    CONSTRAINT "dead_letters_pkey" PRIMARY KEY ("consumer","message_id")
);
CREATE INDEX IF NOT EXISTS "dead_letters_dead_lettered_at_idx" ON "dead_letters"("dead_lettered_at");
