-- CreateTable
CREATE TABLE "stock_items" (
    "sku" TEXT NOT NULL,
    "available" INTEGER NOT NULL,
    "reserved" INTEGER NOT NULL DEFAULT 0,
    "updated_at" TIMESTAMPTZ(6) NOT NULL,

    CONSTRAINT "stock_items_pkey" PRIMARY KEY ("sku"),
    -- Stock can never go negative, whatever the code above it does.
    CONSTRAINT "stock_items_available_check" CHECK ("available" >= 0),
    CONSTRAINT "stock_items_reserved_check" CHECK ("reserved" >= 0)
);

-- CreateTable
CREATE TABLE "reservations" (
    "order_id" UUID NOT NULL,
    "status" TEXT NOT NULL,
    "lines" JSONB NOT NULL,
    "created_at" TIMESTAMPTZ(6) NOT NULL,
    "released_at" TIMESTAMPTZ(6),

    CONSTRAINT "reservations_pkey" PRIMARY KEY ("order_id"),
    CONSTRAINT "reservations_status_check" CHECK ("status" IN ('reserved', 'rejected', 'released'))
);
