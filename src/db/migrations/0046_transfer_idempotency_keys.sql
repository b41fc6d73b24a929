-- wallet_transfer {idempotencyKey}: the key a client chose for one transfer of a custodial wallet, with the
-- transaction sent for it (recorded before it is sent), so that a retry with the same key (its answer lost:
-- a dropped connection, a server killed) answers that transfer, or sends it anew only once it can no longer
-- land, instead of paying again. Kept for a day.
CREATE TABLE transfer_keys (
  wallet TEXT NOT NULL,
  idempotency_key TEXT NOT NULL,
  -- The transfer asked for: to, token, amount in base units and memo, as JSON; a retry must ask the same.
  request TEXT NOT NULL,
  -- A fresh key every transaction sent under this key carries (Solana Pay's reference): no other transfer,
  -- keyed or not, is ever the same bytes.
  reference TEXT NOT NULL,
  signature TEXT NOT NULL,
  blockhash TEXT NOT NULL,
  -- The signed transaction's wire bytes: sent again, as they are, while they may still land.
  wire BLOB NOT NULL,
  -- A block height past which it can no longer land (its blockhash's last valid height, plus a margin for
  -- a node behind another): judged by the chain's height, not the wall clock.
  valid_height INTEGER NOT NULL,
  created_at INTEGER NOT NULL,
  PRIMARY KEY (wallet, idempotency_key)
) WITHOUT ROWID;
CREATE INDEX transfer_keys_created_at ON transfer_keys (created_at);
