-- MCP sessions outlive their place in memory (mcp.md): an idle session swept from memory is rebuilt
-- under the same id from this record; DELETE ends it for good. Times are Unix milliseconds.

CREATE TABLE mcp_sessions (
  id TEXT PRIMARY KEY,
  created_at INTEGER NOT NULL,
  last_activity_at INTEGER NOT NULL,
  protocol_version TEXT NOT NULL,
  -- the client fingerprint (HMAC-stored, as auth_tokens' links) it was opened from
  fingerprint TEXT,
  wallet TEXT,
  session_id TEXT,
  jti TEXT,
  bound_by TEXT CHECK (bound_by IN ('binding', 'fingerprint')),
  ended_at INTEGER,
  CHECK ((wallet IS NULL) = (jti IS NULL))
) STRICT;

-- Custodial wallets may carry the label given to wallet_create.
ALTER TABLE custodial_wallets ADD COLUMN label TEXT;
