-- One row per order payments has heard of, written first by every handler about the order: a
-- stock-reserved and a cancellation of one order arrive on two queues at the same moment, and
-- a row both of them write makes them apply one after the other (the tombstone alone could not:
-- under READ COMMITTED neither saw the other's uncommitted insert, and a cancelled order was
-- charged). The cancellation tombstones move here.
CREATE TABLE "payment_orders" (
    "order_id" UUID NOT NULL,
    "cancelled_at" TIMESTAMPTZ(6),
    "cancel_message_id" UUID,
    "created_at" TIMESTAMPTZ(6) NOT NULL,

    CONSTRAINT "payment_orders_pkey" PRIMARY KEY ("order_id")
);

INSERT INTO "payment_orders" ("order_id", "cancelled_at", "cancel_message_id", "created_at")
SELECT "order_id", "cancelled_at", "message_id", "cancelled_at" FROM "order_cancellations";
INSERT INTO "payment_orders" ("order_id", "created_at")
SELECT "order_id", "created_at" FROM "payment_attempts"
ON CONFLICT ("order_id") DO NOTHING;

DROP TABLE "order_cancellations";
