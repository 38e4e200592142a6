-- Owned by @idem/inbox (partitions.ts). processed_messages becomes a table partitioned by
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
       AND substring(pg_get_expr(c.relpartbound, c.oid) FROM 'TO \(''([0-9a-f-]{36})''\)')::uuid
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
