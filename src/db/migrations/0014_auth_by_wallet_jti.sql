-- Token rows, and the fingerprint links that point at them, are found by (wallet, jti): every lookup has
-- both (the JWT's walletAddress and jti, an MCP binding's, a fingerprint link's), and revoke-all finds a
-- wallet's rows by the prefix of the same index. One index keyed by a random value per table instead of
-- two (jti and wallet): a sign-in's commit writes one random index page fewer for the token, and one fewer
-- for its fingerprint link.
CREATE TABLE auth_tokens_by_wallet (
  jti TEXT NOT NULL,
  session_id TEXT NOT NULL,
  wallet TEXT NOT NULL,
  issued_at INTEGER NOT NULL,
  expires_at INTEGER NOT NULL,
  session_started_at INTEGER NOT NULL,
  fingerprint TEXT,
  revoked_at INTEGER
) STRICT;
INSERT INTO auth_tokens_by_wallet (jti, session_id, wallet, issued_at, expires_at, session_started_at, fingerprint, revoked_at)
  SELECT jti, session_id, wallet, issued_at, expires_at, session_started_at, fingerprint, revoked_at FROM auth_tokens ORDER BY rowid;
DROP TABLE auth_tokens;
ALTER TABLE auth_tokens_by_wallet RENAME TO auth_tokens;
CREATE UNIQUE INDEX auth_tokens_wallet_jti ON auth_tokens (wallet, jti);

DROP INDEX fingerprint_wallet_links_wallet;
DROP INDEX fingerprint_wallet_links_jti;
CREATE INDEX fingerprint_wallet_links_wallet_jti ON fingerprint_wallet_links (wallet, jti);
