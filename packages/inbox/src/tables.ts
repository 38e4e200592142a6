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
  consumer       String
  messageId      String    @map("message_id")
  payload        Json
  code           String
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
