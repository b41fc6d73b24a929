-- Wallet sign-in: challenges (single-use nonces), issued session tokens, per-wallet revocation cutoffs
-- and fingerprint links. Times are Unix milliseconds.

CREATE TABLE auth_challenges (
  nonce TEXT PRIMARY KEY,
  wallet TEXT NOT NULL,
  message TEXT NOT NULL,
  issued_at INTEGER NOT NULL,
  expires_at INTEGER NOT NULL,
  consumed_at INTEGER
) STRICT;
CREATE INDEX auth_challenges_expires_at ON auth_challenges (expires_at);

CREATE TABLE auth_tokens (
  jti TEXT PRIMARY KEY,
  session_id TEXT NOT NULL,
  wallet TEXT NOT NULL,
  issued_at INTEGER NOT NULL,
  expires_at INTEGER NOT NULL,
  session_started_at INTEGER NOT NULL,
  fingerprint TEXT,
  revoked_at INTEGER
) STRICT;
CREATE INDEX auth_tokens_wallet ON auth_tokens (wallet);
-- No index on expires_at: only the hourly purge asks by it, and the index cost every sign-in ~10 us.

CREATE TABLE auth_wallet_cutoffs (
  wallet TEXT PRIMARY KEY,
  tokens_valid_after INTEGER NOT NULL
) STRICT;

CREATE TABLE fingerprint_wallet_links (
  fingerprint TEXT PRIMARY KEY,
  wallet TEXT NOT NULL,
  session_id TEXT NOT NULL,
  jti TEXT NOT NULL,
  updated_at INTEGER NOT NULL
) STRICT;
CREATE INDEX fingerprint_wallet_links_wallet ON fingerprint_wallet_links (wallet);
CREATE INDEX fingerprint_wallet_links_jti ON fingerprint_wallet_links (jti);
