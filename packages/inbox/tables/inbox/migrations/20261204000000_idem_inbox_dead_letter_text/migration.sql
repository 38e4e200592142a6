-- Owned by @idem/inbox. A dead letter keeps the JSON text it was delivered as, in a column of
-- its own, never inside a shape a sender could produce: `payload` (jsonb) stays for queries,
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
