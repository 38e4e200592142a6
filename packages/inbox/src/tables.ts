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
    {
      name: '20261207000000_idem_inbox_partitions',
      sql: `-- Owned by @idem/inbox (partitions.ts). processed_messages becomes a table partitioned by
-- ranges of message_id. A UUID v7 id begins with the time its message was made, so a range of ids
-- is a range of time, and the primary key (consumer, message_id) holds the partition key: it
-- stays the one constraint that decides duplicates, since every copy of a message has its id and
-- so its partition. The table as it was becomes the DEFAULT partition, nothing copied: it keeps
-- the records from before and takes any id no range covers (a UUID v4, a time with no partition).
ALTER TABLE "processed_messages" RENAME TO "processed_messages_default";
ALTER INDEX "processed_messages_pkey" RENAME TO "processed_messages_default_pkey";
ALTER INDEX "processed_messages_processed_at_idx" RENAME TO "processed_messages_default_processed_at_idx";
CREATE TABLE "processed_messages" (
    "consumer" TEXT NOT NULL,
    "message_id" UUID NOT NULL,
    "body_hash" CHAR(64) NOT NULL,
    "processed_at" TIMESTAMPTZ(6) NOT NULL,

    CONSTRAINT "processed_messages_pkey" PRIMARY KEY ("consumer","message_id") -- decides every duplicate
) PARTITION BY RANGE ("message_id");
CREATE INDEX "processed_messages_processed_at_idx" ON "processed_messages"("processed_at");
ALTER TABLE "processed_messages" ATTACH PARTITION "processed_messages_default" DEFAULT;

-- The smallest UUID v7 of a time: where the range of ids made from that time on begins.
CREATE FUNCTION idem_inbox_first_id_at(at TIMESTAMPTZ) RETURNS UUID
LANGUAGE sql IMMUTABLE STRICT AS $fn$
  SELECT (substr(h, 1, 8) || '-' || substr(h, 9, 4) || '-0000-0000-000000000000')::uuid
    FROM (SELECT lpad(to_hex(floor(extract(epoch FROM at) * 1000)::bigint), 12, '0') AS h) AS t
$fn$;

-- Retention calls these two as the runtime role, which may change no table: they run as the owner
-- (SECURITY DEFINER), name every table with its schema, and check what they are asked.
-- The partition for messages made in [from_time, to_time): 'added', 'exists', 'overlaps' when a
-- partition or a record in the DEFAULT partition already covers part of it (those ids then stay
-- in the DEFAULT partition, whose records retention deletes row by row), or 'busy' when the DEFAULT
-- partition could not be locked within lock_timeout to be checked (the next purge tries again).
-- Made empty and then attached, which locks the parent only against other schema changes: inserts
-- go on meanwhile, but for those into the DEFAULT partition while it is checked.
CREATE FUNCTION idem_inbox_add_partition(from_time TIMESTAMPTZ, to_time TIMESTAMPTZ) RETURNS TEXT
LANGUAGE plpgsql SECURITY DEFINER SET search_path FROM CURRENT SET lock_timeout = '500ms' AS $fn$
DECLARE
  partition_name TEXT := 'processed_messages_p' || to_char(from_time AT TIME ZONE 'UTC', 'YYYYMMDDHH24MI');
BEGIN
  IF to_regclass(format('%I.%I', current_schema(), partition_name)) IS NOT NULL THEN
    RETURN 'exists';
  END IF;
  EXECUTE format('CREATE TABLE %I.%I (LIKE %I.processed_messages)', current_schema(), partition_name, current_schema());
  EXECUTE format('ALTER TABLE %I.processed_messages ATTACH PARTITION %I.%I FOR VALUES FROM (%L) TO (%L)',
    current_schema(), current_schema(), partition_name,
    idem_inbox_first_id_at(from_time), idem_inbox_first_id_at(to_time));
  RETURN 'added';
EXCEPTION
  WHEN invalid_object_definition OR check_violation THEN RETURN 'overlaps';
  WHEN lock_not_available THEN RETURN 'busy';
END
$fn$;

-- Drops each range partition whose messages were all made before the cutoff and whose records
-- were all processed before it; returns each one dropped with about how many records it held.
-- Nothing writes to processed_messages while a partition is checked and dropped: a record
-- inserted in between (a first delivery of an old message) would go with it.
CREATE FUNCTION idem_inbox_drop_partitions(cutoff TIMESTAMPTZ)
RETURNS TABLE (partition_name TEXT, records BIGINT)
LANGUAGE plpgsql SECURITY DEFINER SET search_path FROM CURRENT SET lock_timeout = '500ms' AS $fn$
DECLARE
  parent REGCLASS := format('%I.processed_messages', current_schema())::regclass;
  candidate RECORD;
  recent BOOLEAN;
BEGIN
  FOR candidate IN
    SELECT c.oid::regclass AS partition, c.relname::text AS name
      FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
     WHERE i.inhparent = parent AND c.relname ~ '^processed_messages_p[0-9]{12}$'
       AND substring(pg_get_expr(c.relpartbound, c.oid) FROM 'TO \\(''([0-9a-f-]{36})''\\)')::uuid
           <= idem_inbox_first_id_at(cutoff)
     ORDER BY c.relname
  LOOP
    EXECUTE format('SELECT count(*) FROM %s', candidate.partition) INTO records;
    BEGIN
      EXECUTE format('LOCK TABLE %s IN ACCESS EXCLUSIVE MODE', parent);
    EXCEPTION WHEN lock_not_available THEN
      RETURN; -- transactions kept it busy for lock_timeout: the next purge tries again
    END;
    EXECUTE format('SELECT EXISTS (SELECT 1 FROM %s WHERE processed_at >= $1)', candidate.partition)
      INTO recent USING cutoff;
    CONTINUE WHEN recent;
    EXECUTE format('DROP TABLE %s', candidate.partition);
    partition_name := candidate.name;
    RETURN NEXT;
  END LOOP;
END
$fn$;
REVOKE EXECUTE ON FUNCTION idem_inbox_add_partition(TIMESTAMPTZ, TIMESTAMPTZ) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION idem_inbox_drop_partitions(TIMESTAMPTZ) FROM PUBLIC;
`,
    },
    {
      name: '20261208000000_idem_inbox_search_path',
      sql: `-- Owned by @idem/inbox (partitions.ts). The two functions the runtime role may call run as the
-- owner: their search_path names the schema they were made in and ends with pg_temp, so no
-- object a caller makes in its temporary schema can stand in for one of theirs (PostgreSQL's
-- advice for SECURITY DEFINER functions: "pg_temp should be last").
DO $do$
BEGIN
  EXECUTE format('ALTER FUNCTION %I.idem_inbox_add_partition(TIMESTAMPTZ, TIMESTAMPTZ) SET search_path = %I, pg_temp',
    current_schema(), current_schema());
  EXECUTE format('ALTER FUNCTION %I.idem_inbox_drop_partitions(TIMESTAMPTZ) SET search_path = %I, pg_temp',
    current_schema(), current_schema());
END
$do$;
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
