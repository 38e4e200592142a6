-- The catalog: what each SKU costs, owned by the orders service so an order is priced in its
-- own transaction (docs/services.md, "Where prices come from"). Only the operator changes it;
-- a placed order keeps the unit prices of its lines, so a later change never alters it.

-- CreateTable
CREATE TABLE "catalog_items" (
    "sku" TEXT NOT NULL,
    "name" TEXT NOT NULL,
    "unit_price_cents" INTEGER NOT NULL,
    "currency" CHAR(3) NOT NULL,
    "withdrawn" BOOLEAN NOT NULL DEFAULT false,
    "updated_at" TIMESTAMPTZ(6) NOT NULL,

    CONSTRAINT "catalog_items_pkey" PRIMARY KEY ("sku"),
    CONSTRAINT "catalog_items_unit_price_cents_check" CHECK ("unit_price_cents" >= 0)
);
