-- The library's own table: a book lent to a member, with the fee the member owes for it.
CREATE TABLE "loans" (
    "id" UUID NOT NULL,
    "book_id" TEXT NOT NULL,
    "member_id" TEXT NOT NULL,
    "fee_cents" INTEGER NOT NULL,
    "lent_at" TIMESTAMPTZ(6) NOT NULL,

    CONSTRAINT "loans_pkey" PRIMARY KEY ("id")
);
