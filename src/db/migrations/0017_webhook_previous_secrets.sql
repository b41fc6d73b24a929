-- paygate.md: during a rotation the old secret keeps signing alongside the new one for 24 hours. Each
-- replaced secret keeps its own 24 hours, so two rotations within a day leave two old secrets signing
-- (the endpoint's row held one: a second rotation cut the first old secret's day short). Old secrets
-- move to their own table, sealed as before (the endpoint id as additional data); the endpoint's row
-- keeps its current secret only. No foreign key, as for deliveries: deleting an endpoint deletes them.
CREATE TABLE webhook_previous_secrets (
  endpoint_id TEXT NOT NULL,
  secret_iv BLOB NOT NULL CHECK (length(secret_iv) = 12),
  secret_ciphertext BLOB NOT NULL CHECK (length(secret_ciphertext) = 48),
  -- it signs while the time is before this (Unix ms)
  signs_until INTEGER NOT NULL
) STRICT;
CREATE INDEX webhook_previous_secrets_endpoint ON webhook_previous_secrets (endpoint_id, signs_until);
INSERT INTO webhook_previous_secrets (endpoint_id, secret_iv, secret_ciphertext, signs_until)
  SELECT id, previous_secret_iv, previous_secret_ciphertext, previous_secret_until FROM webhook_endpoints WHERE previous_secret_iv IS NOT NULL;

CREATE TABLE webhook_endpoints_current (
  id TEXT PRIMARY KEY,
  -- the owner's wallet address; no foreign key, so the outbox does not depend on paygate's tables
  owner TEXT NOT NULL,
  url TEXT NOT NULL,
  -- JSON array of event types
  events TEXT NOT NULL,
  enabled INTEGER NOT NULL CHECK (enabled IN (0, 1)),
  secret_iv BLOB NOT NULL CHECK (length(secret_iv) = 12),
  -- ciphertext || 16-byte tag of the 32 secret bytes
  secret_ciphertext BLOB NOT NULL CHECK (length(secret_ciphertext) = 48),
  created_at INTEGER NOT NULL,
  updated_at INTEGER NOT NULL
) STRICT;
INSERT INTO webhook_endpoints_current (id, owner, url, events, enabled, secret_iv, secret_ciphertext, created_at, updated_at)
  SELECT id, owner, url, events, enabled, secret_iv, secret_ciphertext, created_at, updated_at FROM webhook_endpoints ORDER BY rowid;
DROP TABLE webhook_endpoints;
ALTER TABLE webhook_endpoints_current RENAME TO webhook_endpoints;
CREATE INDEX webhook_endpoints_owner ON webhook_endpoints (owner, created_at);
