-- Payment gating (paygate.md): owners and their tiers, API keys (SHA-256 at rest), products.
-- Times are Unix milliseconds; prices are integers of the currency's base units.

CREATE TABLE owners (
  wallet TEXT PRIMARY KEY,
  tier TEXT NOT NULL DEFAULT 'free' CHECK (tier IN ('free', 'pro', 'unlimited')),
  created_at INTEGER NOT NULL
) STRICT;

CREATE TABLE api_keys (
  id TEXT PRIMARY KEY,
  owner TEXT NOT NULL REFERENCES owners (wallet),
  -- hex SHA-256 of the whole key: the key itself is shown once and never stored
  key_hash TEXT NOT NULL UNIQUE,
  prefix TEXT NOT NULL,
  label TEXT NOT NULL,
  created_at INTEGER NOT NULL,
  last_used_at INTEGER,
  revoked_at INTEGER
) STRICT;
CREATE INDEX api_keys_owner ON api_keys (owner, created_at);

CREATE TABLE products (
  id TEXT PRIMARY KEY,
  owner TEXT NOT NULL REFERENCES owners (wallet),
  title TEXT NOT NULL,
  description TEXT NOT NULL,
  type TEXT NOT NULL CHECK (type IN ('feature_unlock', 'access')),
  price INTEGER NOT NULL CHECK (price > 0),
  -- the ledger's token key: 'usdc' or the service token's symbol
  token TEXT NOT NULL,
  feature_ids TEXT NOT NULL,
  pay_to TEXT NOT NULL,
  access_days INTEGER CHECK (access_days IS NULL OR access_days > 0),
  redirect_origins TEXT NOT NULL,
  status TEXT NOT NULL CHECK (status IN ('active', 'archived')),
  created_at INTEGER NOT NULL,
  updated_at INTEGER NOT NULL
) STRICT;
CREATE INDEX products_owner ON products (owner, created_at);
