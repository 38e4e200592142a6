-- One word per idea (docs/concepts.md, the glossary): the email's key is its business key (the
-- dedupe key is the inbox's `(consumer, message_id)` alone), and an email the dispatcher stopped
-- trying is parked, as an outbox row or a payment attempt waiting for an operator is.
ALTER TABLE "email_work_items" RENAME COLUMN "dedupe_key" TO "business_key";
ALTER INDEX "email_work_items_dedupe_key_key" RENAME TO "email_work_items_business_key_key";
ALTER TABLE "email_work_items" DROP CONSTRAINT "email_work_items_status_check";
UPDATE "email_work_items" SET "status" = 'parked' WHERE "status" = 'dead';
ALTER TABLE "email_work_items" ADD CONSTRAINT "email_work_items_status_check"
  CHECK ("status" IN ('pending', 'sent', 'parked'));
