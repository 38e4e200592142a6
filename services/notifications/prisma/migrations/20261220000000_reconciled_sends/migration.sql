-- Of an email's unconfirmed sends, how many a lookup at the provider has since settled (it found
-- the message, or found none before a send again): the copies left to explain are the rest.
ALTER TABLE "email_work_items" ADD COLUMN "reconciled_sends" INTEGER NOT NULL DEFAULT 0;
