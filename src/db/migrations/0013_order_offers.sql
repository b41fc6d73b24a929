-- When the offer in offer_hash was handed out: the escrow transfer it offers can only land shortly after, and
-- the order timer looks for one the consumer sent itself from then on (updated_at moves with every change).
ALTER TABLE market_orders ADD COLUMN offered_at INTEGER;
UPDATE market_orders SET offered_at = updated_at WHERE offer_hash IS NOT NULL;
-- One escrow payment pays one order: an accept looks up whether its transaction already paid another.
CREATE INDEX market_orders_escrow_tx ON market_orders (escrow_tx) WHERE escrow_tx IS NOT NULL;
