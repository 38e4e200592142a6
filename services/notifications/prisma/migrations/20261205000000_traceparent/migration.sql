-- The trace context (W3C traceparent) of the delivery that asked for the e-mail: the dispatcher
-- continues that trace, so an order's trace reaches its e-mails.
ALTER TABLE "email_work_items" ADD COLUMN "traceparent" VARCHAR(256);
