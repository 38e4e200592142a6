import type { TableSet } from '@idem/database';

/**
 * The outbox's table: one row per event, written in the business transaction and published
 * by the relay. `IF NOT EXISTS` lets a database whose own first migration made it (before the
 * package owned it) adopt this one.
 */
export const outboxTables: TableSet = {
  owner: '@idem/outbox',
  migrations: [
    {
      name: '20261130000000_idem_outbox',
      sql: `-- Owned by @idem/outbox.
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
`,
    },
  ],
  prismaModels: `/// Owned by @idem/outbox: events written with the business change, published by the relay.
model OutboxMessage {
  messageId     String    @id @map("message_id") @db.Uuid
  position      BigInt    @default(autoincrement())
  type          String
  envelope      Json
  createdAt     DateTime  @map("created_at") @db.Timestamptz(6)
  publishedAt   DateTime? @map("published_at") @db.Timestamptz(6)
  attempts      Int       @default(0)
  nextAttemptAt DateTime  @map("next_attempt_at") @db.Timestamptz(6)
  lastError     String?   @map("last_error") @db.VarChar(500)

  @@index([publishedAt, position])
  @@map("outbox_messages")
}
`,
};
