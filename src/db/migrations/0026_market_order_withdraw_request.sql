-- A provider's withdraw refused because an escrow transfer offered to the consumer may still land is
-- recorded: from then on the consumer gets no new offer (which would start a new window), so the withdraw
-- succeeds once the offer out can no longer land, unless that offer pays the order. NULL: none asked.
ALTER TABLE market_orders ADD COLUMN withdraw_requested_at INTEGER;
