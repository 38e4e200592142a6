-- CreateTable
CREATE TABLE "payment_attempts" (
    "id" UUID NOT NULL,
    "order_id" UUID NOT NULL,
    "amount_cents" INTEGER NOT NULL,
    "currency" CHAR(3) NOT NULL,
    "payment_method" TEXT NOT NULL,
    "status" TEXT NOT NULL,
    "idempotency_key" TEXT NOT NULL,
    "payment_intent_id" TEXT,
    "failure_code" TEXT,
    "failure_reason" VARCHAR(500),
    "cancel_requested_at" TIMESTAMPTZ(6),
    "cancel_causation_id" UUID,
    "refund_idempotency_key" TEXT,
    "refund_id" TEXT,
    "provider_calls" INTEGER NOT NULL DEFAULT 0,
    "next_attempt_at" TIMESTAMPTZ(6) NOT NULL,
    "lease_owner" TEXT,
    "lease_expires_at" TIMESTAMPTZ(6),
    "last_error" VARCHAR(500),
    "correlation_id" UUID NOT NULL,
    "causation_id" UUID NOT NULL,
    "created_at" TIMESTAMPTZ(6) NOT NULL,
    "updated_at" TIMESTAMPTZ(6) NOT NULL,

    CONSTRAINT "payment_attempts_pkey" PRIMARY KEY ("id"),
    CONSTRAINT "payment_attempts_status_check" CHECK ("status" IN ('pending', 'captured', 'failed', 'cancelled', 'refund_pending', 'refunded'))
);

-- CreateTable
CREATE TABLE "order_cancellations" (
    "order_id" UUID NOT NULL,
    "message_id" UUID NOT NULL,
    "cancelled_at" TIMESTAMPTZ(6) NOT NULL,

    CONSTRAINT "order_cancellations_pkey" PRIMARY KEY ("order_id")
);

-- CreateIndex
CREATE UNIQUE INDEX "payment_attempts_order_id_key" ON "payment_attempts"("order_id");

-- CreateIndex
CREATE UNIQUE INDEX "payment_attempts_idempotency_key_key" ON "payment_attempts"("idempotency_key");

-- CreateIndex
CREATE UNIQUE INDEX "payment_attempts_refund_idempotency_key_key" ON "payment_attempts"("refund_idempotency_key");

-- CreateIndex
CREATE INDEX "payment_attempts_status_next_attempt_at_idx" ON "payment_attempts"("status", "next_attempt_at");
