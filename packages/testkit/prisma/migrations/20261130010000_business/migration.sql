-- The stand-in service's business tables (the packages' own come from src/tables.ts).

-- CreateTable
CREATE TABLE "stock_items" (
    "sku" TEXT NOT NULL,
    "available" INTEGER NOT NULL,

    CONSTRAINT "stock_items_pkey" PRIMARY KEY ("sku")
);

-- CreateTable
CREATE TABLE "reservations" (
    "order_id" UUID NOT NULL,
    "sku" TEXT NOT NULL,
    "quantity" INTEGER NOT NULL,

    CONSTRAINT "reservations_pkey" PRIMARY KEY ("order_id")
);
