-- Owned by @idem/inbox. The BullMQ job a dead letter came as, in a column of its own: message_id
-- is the envelope's message id (the delivery identity), and a republished copy's job has an id of
-- its own. Null for dead letters from before, and for those recorded with no job.
ALTER TABLE "dead_letters" ADD COLUMN "job_id" TEXT;
