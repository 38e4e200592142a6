-- Billing's own table: the fee charged for a loan, once however often its message arrives.
CREATE TABLE "fees" (
    "loan_id" UUID NOT NULL,
    "member_id" TEXT NOT NULL,
    "cents" INTEGER NOT NULL,
    "charged_at" TIMESTAMPTZ(6) NOT NULL,

    CONSTRAINT "fees_pkey" PRIMARY KEY ("loan_id")
);

-- Reminders' own table (the node-postgres consumer, src/main-pg.ts): one reminder per loan.
CREATE TABLE "reminders" (
    "loan_id" UUID NOT NULL,
    "member_id" TEXT NOT NULL,
    "due_at" TIMESTAMPTZ(6) NOT NULL,

    CONSTRAINT "reminders_pkey" PRIMARY KEY ("loan_id")
);
