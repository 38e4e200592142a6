-- Owned by @idem/inbox (partitions.ts). The two functions the runtime role may call run as the
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
