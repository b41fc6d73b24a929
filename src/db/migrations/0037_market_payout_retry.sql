-- When a due payout that waits for its recipient's token account (the escrow opens none on RPC networks) is
-- looked at again. Kept apart from due_at, which also bounds the delivery (a paid order's deadline) and the
-- dispute (72 hours after delivery): moving due_at on would have reopened both.
ALTER TABLE market_orders ADD COLUMN payout_retry_at INTEGER;
