-- CreateTable
CREATE TABLE "processed_messages" (
    "consumer" TEXT NOT NULL,
    "message_id" UUID NOT NULL,
    "body_hash" CHAR(64) NOT NULL,
    "processed_at" TIMESTAMPTZ(6) NOT NULL,

    CONSTRAINT "processed_messages_pkey" PRIMARY KEY ("consumer","message_id")
);

-- CreateIndex
CREATE INDEX "processed_messages_processed_at_idx" ON "processed_messages"("processed_at");

-- CreateTable
CREATE TABLE "dead_letters" (
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

-- CreateIndex
CREATE INDEX "dead_letters_dead_lettered_at_idx" ON "dead_letters"("dead_lettered_at");

-- CreateTable
CREATE TABLE "aggregate_versions" (
    "scope" TEXT NOT NULL,
    "aggregate_id" TEXT NOT NULL,
    "version" INTEGER NOT NULL,
    "applied_at" TIMESTAMPTZ(6) NOT NULL,

    CONSTRAINT "aggregate_versions_pkey" PRIMARY KEY ("scope","aggregate_id")
);

-- CreateTable
CREATE TABLE "outbox_messages" (
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

-- CreateIndex
CREATE INDEX "outbox_messages_published_at_position_idx" ON "outbox_messages"("published_at", "position");
