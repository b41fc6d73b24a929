-- Webhooks (paygate.md "Webhooks", marketplace.md "Provider notifications"): owners' endpoints with
-- sealed secrets, the durable outbox of events, their deliveries and every attempt. Unix-ms times.

-- An owner's endpoint. The signing secret (32 bytes) is sealed with AES-256-GCM under
-- WALLET_ENCRYPTION_KEY with the endpoint id as additional authenticated data; after a rotation the
-- previous secret keeps signing alongside until previous_secret_until.
CREATE TABLE webhook_endpoints (
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
  previous_secret_iv BLOB CHECK (previous_secret_iv IS NULL OR length(previous_secret_iv) = 12),
  previous_secret_ciphertext BLOB CHECK (previous_secret_ciphertext IS NULL OR length(previous_secret_ciphertext) = 48),
  previous_secret_until INTEGER,
  created_at INTEGER NOT NULL,
  updated_at INTEGER NOT NULL,
  CHECK ((previous_secret_iv IS NULL) = (previous_secret_ciphertext IS NULL)
     AND (previous_secret_iv IS NULL) = (previous_secret_until IS NULL))
) STRICT;
CREATE INDEX webhook_endpoints_owner ON webhook_endpoints (owner, created_at);

-- An event, written in the same transaction as the change that caused it. payload is the JSON body
-- exactly as it is sent, so every attempt signs the same bytes.
CREATE TABLE outbox_events (
  id TEXT PRIMARY KEY,
  target_kind TEXT NOT NULL CHECK (target_kind IN ('owner', 'agent')),
  -- the owner's wallet, or the agent id
  target_id TEXT NOT NULL,
  type TEXT NOT NULL,
  payload TEXT NOT NULL,
  created_at INTEGER NOT NULL
) STRICT;
CREATE INDEX outbox_events_target ON outbox_events (target_kind, target_id, created_at);

-- One event on its way to one endpoint. The URL and secrets are read from the endpoint at each
-- attempt (not snapshotted), so a corrected URL, a rotation, a disable or a delete apply to retries.
-- A worker leases a due row (claimed_until, claim_token) before sending, so no two send it at once.
CREATE TABLE webhook_deliveries (
  id TEXT PRIMARY KEY,
  event_id TEXT NOT NULL REFERENCES outbox_events (id),
  endpoint_kind TEXT NOT NULL CHECK (endpoint_kind IN ('owner_endpoint', 'agent')),
  -- whe_… for an owner endpoint, agt_… for an agent; no foreign key (two kinds)
  endpoint_id TEXT NOT NULL,
  status TEXT NOT NULL CHECK (status IN ('pending', 'succeeded', 'failed')),
  attempts INTEGER NOT NULL DEFAULT 0 CHECK (attempts >= 0),
  -- when the next attempt is due; null once the delivery is final
  next_attempt_at INTEGER,
  last_status_code INTEGER,
  claimed_until INTEGER,
  claim_token TEXT,
  created_at INTEGER NOT NULL,
  updated_at INTEGER NOT NULL,
  CHECK ((status = 'pending') = (next_attempt_at IS NOT NULL))
) STRICT;
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (status, next_attempt_at);
CREATE INDEX webhook_deliveries_endpoint ON webhook_deliveries (endpoint_kind, endpoint_id, created_at);
CREATE INDEX webhook_deliveries_event ON webhook_deliveries (event_id);

-- Every HTTP attempt of a delivery: status code (null when no answer), time taken, at most 1 KiB of
-- the response, and why it failed when there was no answer.
CREATE TABLE webhook_attempts (
  delivery_id TEXT NOT NULL REFERENCES webhook_deliveries (id) ON DELETE CASCADE,
  attempt INTEGER NOT NULL CHECK (attempt >= 1),
  at INTEGER NOT NULL,
  status_code INTEGER,
  duration_ms INTEGER NOT NULL CHECK (duration_ms >= 0),
  response TEXT CHECK (response IS NULL OR length(CAST(response AS BLOB)) <= 1024),
  error TEXT,
  PRIMARY KEY (delivery_id, attempt)
) STRICT, WITHOUT ROWID;
