-- The marketplace fee of an order is fixed when it is paid (marketplace.md "completed": the provider gets
-- the escrow less MARKETPLACE_FEE_BPS, sent to MARKETPLACE_FEE_WALLET). It was read from the configuration
-- of whichever process released the money, so `walletgate orders resolve --release` run without the
-- server's fee variables paid no fee, and a fee change applied to orders already paid. NULL: not paid yet,
-- or paid before this migration (then released under the releasing process's configuration, as before).
ALTER TABLE market_orders ADD COLUMN fee_bps INTEGER CHECK (fee_bps BETWEEN 0 AND 10000);
ALTER TABLE market_orders ADD COLUMN fee_wallet TEXT;
