-- Outbox event bodies are stored sealed (AES-256-GCM, `sealed:v1:` + base64) from this version on: some
-- carry secrets (a feature.unlocked event's accessToken). Bodies written before are JSON text; this index
-- finds them for the purge to seal, and costs nothing once there are none.
CREATE INDEX outbox_events_clear ON outbox_events (id) WHERE substr(payload, 1, 1) = '{';
