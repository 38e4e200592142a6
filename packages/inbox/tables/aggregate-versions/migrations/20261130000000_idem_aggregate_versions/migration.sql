-- Owned by @idem/inbox (advanceAggregateVersion).
CREATE TABLE IF NOT EXISTS "aggregate_versions" (
    "scope" TEXT NOT NULL,
    "aggregate_id" TEXT NOT NULL,
    "version" INTEGER NOT NULL,
    "applied_at" TIMESTAMPTZ(6) NOT NULL,

    CONSTRAINT "aggregate_versions_pkey" PRIMARY KEY ("scope","aggregate_id")
);
