-- Checkouts, purchases and feature access tokens (paygate.md "Checkout", "Public API").
-- Times are Unix milliseconds; amounts are integers of the currency's base units.

-- A buyer's open intent to pay: the price, recipient and token are fixed when it opens, and the
-- transaction that pays it is found on chain by `reference` (a fresh random public key, as Solana Pay does).
CREATE TABLE checkouts (
  id TEXT PRIMARY KEY,
  product_id TEXT NOT NULL REFERENCES products (id),
  owner TEXT NOT NULL REFERENCES owners (wallet),
  wallet TEXT NOT NULL,
  reference TEXT NOT NULL UNIQUE,
  pay_to TEXT NOT NULL,
  amount INTEGER NOT NULL CHECK (amount > 0),
  -- the ledger's token key ('usdc' or the service token's symbol)
  token TEXT NOT NULL,
  created_at INTEGER NOT NULL,
  expires_at INTEGER NOT NULL,
  status TEXT NOT NULL CHECK (status IN ('open', 'completed', 'expired')),
  -- no foreign key: purchases point back here, and a completed checkout always has one
  purchase_id TEXT,
  CHECK ((status = 'completed') = (purchase_id IS NOT NULL))
) STRICT;
-- The watcher walks open checkouts by id.
CREATE INDEX checkouts_open ON checkouts (id) WHERE status = 'open';

CREATE TABLE purchases (
  id TEXT PRIMARY KEY,
  owner TEXT NOT NULL REFERENCES owners (wallet),
  product_id TEXT NOT NULL REFERENCES products (id),
  checkout_id TEXT NOT NULL UNIQUE REFERENCES checkouts (id),
  wallet TEXT NOT NULL,
  -- one signature, one purchase
  tx_hash TEXT NOT NULL UNIQUE,
  -- what the transaction paid (at least the checkout's price)
  amount INTEGER NOT NULL CHECK (amount > 0),
  token TEXT NOT NULL,
  -- Solana cluster name: mainnet-beta, devnet, localnet
  network TEXT NOT NULL,
  purchased_at INTEGER NOT NULL,
  -- null: access does not expire
  expires_at INTEGER
) STRICT;
CREATE INDEX purchases_owner ON purchases (owner, purchased_at);
CREATE INDEX purchases_access ON purchases (product_id, wallet, expires_at);

-- The `ft_` token of a feature_unlock purchase: looked up by SHA-256, kept sealed (AES-256-GCM under
-- WALLET_ENCRYPTION_KEY, the token hash as additional authenticated data) so owners can list it.
CREATE TABLE feature_tokens (
  token_hash TEXT PRIMARY KEY,
  token_iv BLOB NOT NULL CHECK (length(token_iv) = 12),
  token_ciphertext BLOB NOT NULL,
  owner TEXT NOT NULL REFERENCES owners (wallet),
  product_id TEXT NOT NULL REFERENCES products (id),
  purchase_id TEXT NOT NULL UNIQUE REFERENCES purchases (id),
  wallet TEXT NOT NULL,
  -- JSON array of the product's featureIds at purchase time
  features TEXT NOT NULL,
  created_at INTEGER NOT NULL,
  expires_at INTEGER,
  revoked_at INTEGER
) STRICT;
CREATE INDEX feature_tokens_owner ON feature_tokens (owner, created_at);
CREATE INDEX feature_tokens_access ON feature_tokens (product_id, wallet, expires_at);
