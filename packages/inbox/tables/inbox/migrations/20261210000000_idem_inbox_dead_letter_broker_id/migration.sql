-- Owned by @idem/inbox. The broker's id for the delivery a dead letter came as (a BullMQ job id, a
-- RabbitMQ message id), named for no broker: the column 20261209000000 added as job_id.
ALTER TABLE "dead_letters" RENAME COLUMN "job_id" TO "broker_id";
