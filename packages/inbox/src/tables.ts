import type { TableSet } from '@idem/database';

/**
 * The inbox's tables: processed_messages — the processed record whose primary key decides
 * between a first delivery and a duplicate — and dead_letters. `IF NOT EXISTS` lets a
 * database whose own first migration made them (before the package owned them) adopt these.
 */
export const inboxTables: TableSet = {
  owner: '@idem/inbox',
  migrations: [
    {
      name: '20261130000000_idem_inbox',
      sql: `-- Owned by @idem/inbox.
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
`,
    },
    {
      name: '20261204000000_idem_inbox_dead_letter_text',
      sql: `-- Owned by @idem/inbox. A dead letter keeps the JSON text it was delivered as, in a column of
-- its own, never inside a shape a sender could produce: \`payload\` (jsonb) stays for queries,
-- and is null where jsonb refuses the text (a NUL, a lone surrogate) or it was truncated.
ALTER TABLE "dead_letters" ADD COLUMN "payload_text" TEXT;
ALTER TABLE "dead_letters" ADD COLUMN "payload_bytes" INTEGER;
ALTER TABLE "dead_letters" ADD COLUMN "payload_sha256" CHAR(64);
ALTER TABLE "dead_letters" ADD COLUMN "payload_truncated" BOOLEAN NOT NULL DEFAULT false;
ALTER TABLE "dead_letters" ALTER COLUMN "payload" DROP NOT NULL;
-- Rows from before: the in-band wrappers become what they stood for (a payload that only looked
-- like one was already returned unwrapped by the code that stored it).
UPDATE "dead_letters" SET "payload_text" = "payload"->>'$idem_json_text', "payload" = NULL
 WHERE jsonb_typeof("payload") = 'object' AND "payload" ? '$idem_json_text'
   AND (SELECT count(*) FROM jsonb_object_keys("payload")) = 1;
UPDATE "dead_letters"
   SET "payload_text" = "payload"->>'$idem_truncated_json_text', "payload_bytes" = ("payload"->>'bytes')::int,
       "payload_sha256" = "payload"->>'sha256', "payload_truncated" = true, "payload" = NULL
 WHERE jsonb_typeof("payload") = 'object' AND "payload" ? '$idem_truncated_json_text';
UPDATE "dead_letters" SET "payload_text" = "payload"::text WHERE "payload_text" IS NULL;
UPDATE "dead_letters"
   SET "payload_bytes" = octet_length("payload_text"),
       "payload_sha256" = encode(sha256(convert_to("payload_text", 'UTF8')), 'hex')
 WHERE "payload_bytes" IS NULL;
ALTER TABLE "dead_letters" ALTER COLUMN "payload_text" SET NOT NULL;
ALTER TABLE "dead_letters" ALTER COLUMN "payload_bytes" SET NOT NULL;
ALTER TABLE "dead_letters" ALTER COLUMN "payload_sha256" SET NOT NULL;
`,
    },
  ],
  prismaModels: `/// Owned by @idem/inbox: one row per (consumer, message) processed; the key decides duplicates.
model ProcessedMessage {
  consumer    String
  messageId   String   @map("message_id") @db.Uuid
  bodyHash    String   @map("body_hash") @db.Char(64)
  processedAt DateTime @map("processed_at") @db.Timestamptz(6)

  @@id([consumer, messageId])
  @@index([processedAt])
  @@map("processed_messages")
}

/// Owned by @idem/inbox: messages refused permanently, kept for replay.
model DeadLetter {
  consumer         String
  messageId        String    @map("message_id")
  /// The payload as jsonb, for queries; null where jsonb refuses it or it was truncated.
  payload          Json?
  /// The JSON text exactly as delivered (its start when truncated): what a replay sends.
  payloadText      String    @map("payload_text")
  /// The size and sha256 of the delivered JSON text.
  payloadBytes     Int       @map("payload_bytes")
  payloadSha256    String    @map("payload_sha256") @db.Char(64)
  payloadTruncated Boolean   @default(false) @map("payload_truncated")
  code             String
  reason         String    @db.VarChar(500)
  attempts       Int
  deadLetteredAt DateTime  @map("dead_lettered_at") @db.Timestamptz(6)
  replayedAt     DateTime? @map("replayed_at") @db.Timestamptz(6)
  replayCount    Int       @default(0) @map("replay_count")

  @@id([consumer, messageId])
  @@index([deadLetteredAt])
  @@map("dead_letters")
}
`,
};

/** The highest version applied per aggregate, for consumers that classify older events as stale (`advanceAggregateVersion`). */
export const aggregateVersionTables: TableSet = {
  owner: '@idem/inbox',
  migrations: [
    {
      name: '20261130000000_idem_aggregate_versions',
      sql: `-- Owned by @idem/inbox (advanceAggregateVersion).
CREATE TABLE IF NOT EXISTS "aggregate_versions" (
    "scope" TEXT NOT NULL,
    "aggregate_id" TEXT NOT NULL,
    "version" INTEGER NOT NULL,
    "applied_at" TIMESTAMPTZ(6) NOT NULL,

    CONSTRAINT "aggregate_versions_pkey" PRIMARY KEY ("scope","aggregate_id")
);
`,
    },
  ],
  prismaModels: `/// Owned by @idem/inbox: the newest version applied per aggregate; older events are stale.
model AggregateVersion {
  scope       String
  aggregateId String   @map("aggregate_id")
  version     Int
  appliedAt   DateTime @map("applied_at") @db.Timestamptz(6)

  @@id([scope, aggregateId])
  @@map("aggregate_versions")
}
`,
};
