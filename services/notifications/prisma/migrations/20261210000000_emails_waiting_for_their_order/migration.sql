-- An email about a payment whose order is not known here yet waits as a work item without its
-- text: `facts` keeps what its message said, and the dispatcher writes the email once the order's
-- summary has arrived. `unconfirmed_sends` counts the sends whose outcome the dispatcher could not
-- learn: a claim found another dispatcher's lease run out before it said how its send went (it died
-- or froze), or the connection dropped mid-send (the server may have taken the message, its reply
-- lost). Those are the only sends that may be repeated.
-- `lease_overruns` counts sends a dispatcher finished after its lease had run out.
ALTER TABLE "email_work_items"
  ALTER COLUMN "to_address" DROP NOT NULL,
  ALTER COLUMN "subject" DROP NOT NULL,
  ALTER COLUMN "text_body" DROP NOT NULL,
  ALTER COLUMN "html_body" DROP NOT NULL,
  ADD COLUMN "facts" JSONB,
  ADD COLUMN "unconfirmed_sends" INTEGER NOT NULL DEFAULT 0,
  ADD COLUMN "lease_overruns" INTEGER NOT NULL DEFAULT 0;
