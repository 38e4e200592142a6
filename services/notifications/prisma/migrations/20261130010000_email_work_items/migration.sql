-- CreateTable
CREATE TABLE "order_summaries" (
    "order_id" UUID NOT NULL,
    "customer_email" TEXT NOT NULL,
    "currency" CHAR(3) NOT NULL,
    "lines" JSONB NOT NULL,
    "total_cents" INTEGER NOT NULL,
    "placed_at" TIMESTAMPTZ(6) NOT NULL,

    CONSTRAINT "order_summaries_pkey" PRIMARY KEY ("order_id")
);

-- CreateTable
CREATE TABLE "email_work_items" (
    "id" UUID NOT NULL,
    "dedupe_key" TEXT NOT NULL,
    "kind" TEXT NOT NULL,
    "order_id" UUID NOT NULL,
    "to_address" TEXT NOT NULL,
    "subject" TEXT NOT NULL,
    "text_body" TEXT NOT NULL,
    "html_body" TEXT NOT NULL,
    "message_id" TEXT NOT NULL,
    "status" TEXT NOT NULL,
    "attempts" INTEGER NOT NULL DEFAULT 0,
    "next_attempt_at" TIMESTAMPTZ(6) NOT NULL,
    "lease_owner" TEXT,
    "lease_expires_at" TIMESTAMPTZ(6),
    "last_error" VARCHAR(500),
    "sent_at" TIMESTAMPTZ(6),
    "created_at" TIMESTAMPTZ(6) NOT NULL,
    "updated_at" TIMESTAMPTZ(6) NOT NULL,

    CONSTRAINT "email_work_items_pkey" PRIMARY KEY ("id"),
    CONSTRAINT "email_work_items_status_check" CHECK ("status" IN ('pending', 'sent', 'dead'))
);

-- CreateIndex
CREATE UNIQUE INDEX "email_work_items_dedupe_key_key" ON "email_work_items"("dedupe_key");

-- CreateIndex
CREATE UNIQUE INDEX "email_work_items_message_id_key" ON "email_work_items"("message_id");

-- CreateIndex
CREATE INDEX "email_work_items_status_next_attempt_at_idx" ON "email_work_items"("status", "next_attempt_at");

-- CreateIndex
CREATE INDEX "email_work_items_order_id_idx" ON "email_work_items"("order_id");
