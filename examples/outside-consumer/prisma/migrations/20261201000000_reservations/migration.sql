CREATE TABLE "reservations" (
    "order_id" UUID NOT NULL,
    "units" INTEGER NOT NULL,
    "reserved_at" TIMESTAMPTZ(6) NOT NULL,

    CONSTRAINT "reservations_pkey" PRIMARY KEY ("order_id")
);
