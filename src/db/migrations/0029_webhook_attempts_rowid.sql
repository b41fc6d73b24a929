-- webhook_attempts as a table with rowids: WITHOUT ROWID rows longer than about 1,000 bytes (an attempt
-- keeps up to 1 KiB of the receiver's answer) each spill into a whole overflow page, ~4.7 KB an attempt;
-- a rowid table keeps such rows in its pages (~1.2 KB each). Same columns, same key.
CREATE TABLE webhook_attempts_new (
  delivery_id TEXT NOT NULL REFERENCES webhook_deliveries (id) ON DELETE CASCADE,
  attempt INTEGER NOT NULL CHECK (attempt >= 1),
  at INTEGER NOT NULL,
  status_code INTEGER,
  duration_ms INTEGER NOT NULL CHECK (duration_ms >= 0),
  response TEXT CHECK (response IS NULL OR length(CAST(response AS BLOB)) <= 1024),
  error TEXT,
  PRIMARY KEY (delivery_id, attempt)
) STRICT;
INSERT INTO webhook_attempts_new (delivery_id, attempt, at, status_code, duration_ms, response, error)
  SELECT delivery_id, attempt, at, status_code, duration_ms, response, error FROM webhook_attempts;
DROP TABLE webhook_attempts;
ALTER TABLE webhook_attempts_new RENAME TO webhook_attempts;
