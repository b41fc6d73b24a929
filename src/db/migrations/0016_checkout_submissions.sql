-- Every transaction /submit (and checkout_pay) sent for a checkout, recorded before it is sent (its fee
-- payer's signature checked first): their outcomes are read by signature, however many strangers'
-- transactions carry the checkout's reference too.
CREATE TABLE checkout_submissions (
  checkout_id TEXT NOT NULL REFERENCES checkouts (id),
  signature TEXT NOT NULL,
  -- its recent blockhash: while that is valid, a transaction not seen yet may still land
  blockhash TEXT NOT NULL,
  submitted_at INTEGER NOT NULL,
  PRIMARY KEY (checkout_id, signature)
) STRICT, WITHOUT ROWID;
