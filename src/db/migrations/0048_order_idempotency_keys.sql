-- provider_create_order {idempotencyKey}: the key a provider chose for one proposal, kept on the order it made,
-- so that a retry with the same key (its answer lost: a dropped connection, a restarted server) answers that
-- order instead of proposing a second one. One order per provider and key.
ALTER TABLE market_orders ADD COLUMN idempotency_key TEXT;
CREATE UNIQUE INDEX market_orders_provider_idempotency_key ON market_orders (provider_wallet, idempotency_key) WHERE idempotency_key IS NOT NULL;
