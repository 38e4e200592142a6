-- The trace context (W3C traceparent) of the delivery that made the attempt's next provider call
-- due (stock-reserved for a charge, order-cancelled for a refund): the worker continues that
-- trace, so an order's trace reaches its provider call and the messages that follow.
ALTER TABLE "payment_attempts" ADD COLUMN "traceparent" VARCHAR(256);
