-- Every order belongs to the customer who placed it (the `sub` of their token), and an
-- Idempotency-Key is scoped per customer, as Stripe scopes keys per account. Orders and keys
-- from before owners existed belong to nobody: only the operator sees them.

-- AlterTable
ALTER TABLE "orders" ADD COLUMN "customer_id" TEXT NOT NULL DEFAULT '';
ALTER TABLE "orders" ALTER COLUMN "customer_id" DROP DEFAULT;

-- AlterTable
ALTER TABLE "idempotency_keys" ADD COLUMN "customer_id" TEXT NOT NULL DEFAULT '';
ALTER TABLE "idempotency_keys" ALTER COLUMN "customer_id" DROP DEFAULT;
ALTER TABLE "idempotency_keys" DROP CONSTRAINT "idempotency_keys_pkey";
ALTER TABLE "idempotency_keys" ADD CONSTRAINT "idempotency_keys_pkey" PRIMARY KEY ("customer_id", "key");

-- CreateIndex
CREATE INDEX "orders_customer_id_created_at_id_idx" ON "orders"("customer_id", "created_at", "id");
