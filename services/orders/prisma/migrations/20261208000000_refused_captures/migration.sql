-- Why an order reached a status, in words its customer can read (a declined or refused payment,
-- an expired reservation, the reason a cancel gave); null where the status says it all.
ALTER TABLE "order_status_changes" ADD COLUMN "reason" VARCHAR(500);

-- Captures the orders service would not accept as its order's payment, each answered by asking
-- for a refund: a capture for an order that can no longer be paid (cancelled, refunded, failed),
-- or one that is not the order's total (mischarged). One row per capture message.
CREATE TABLE "refused_captures" (
    "message_id" UUID NOT NULL,
    "order_id" UUID NOT NULL,
    "payment_intent_id" TEXT NOT NULL,
    "amount_cents" INTEGER NOT NULL,
    "currency" CHAR(3) NOT NULL,
    "refusal" TEXT NOT NULL,
    "order_status" TEXT NOT NULL,
    "refused_at" TIMESTAMPTZ(6) NOT NULL,

    CONSTRAINT "refused_captures_pkey" PRIMARY KEY ("message_id"),
    CONSTRAINT "refused_captures_refusal_check" CHECK ("refusal" IN ('not_payable', 'mischarged'))
);

CREATE INDEX "refused_captures_order_id_idx" ON "refused_captures"("order_id");
