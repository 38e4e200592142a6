-- A capture for an order orders never took (a reservation no placed order caused) is refused
-- and refunded like the others: its refusal is `unknown_order`, its order status `UNKNOWN`.
ALTER TABLE "refused_captures" DROP CONSTRAINT "refused_captures_refusal_check";
ALTER TABLE "refused_captures" ADD CONSTRAINT "refused_captures_refusal_check"
    CHECK ("refusal" IN ('not_payable', 'mischarged', 'unknown_order'));
