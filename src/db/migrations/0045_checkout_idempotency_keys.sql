-- checkout_pay {idempotencyKey}: the key a client chose for one purchase, kept on the checkout it opened, so
-- that a retry with the same key (its answer lost: a dropped connection, a server killed) answers or
-- finishes that checkout instead of paying again. One checkout per wallet and key.
ALTER TABLE checkouts ADD COLUMN idempotency_key TEXT;
CREATE UNIQUE INDEX checkouts_wallet_idempotency_key ON checkouts (wallet, idempotency_key) WHERE idempotency_key IS NOT NULL;
