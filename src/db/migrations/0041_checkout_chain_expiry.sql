-- When a checkout expires on the chain's clock (Unix ms): the chain's time when it opened plus its 15 minutes.
-- A payment's block time is judged against it, so that a server clock behind the chain's (a paused VM not yet
-- corrected) does not refuse a payment it let the buyer send. Null when the node could not say (and for
-- checkouts opened before): then the checkout's own expires_at, on this server's clock, as before.
ALTER TABLE checkouts ADD COLUMN chain_expires_at INTEGER;
