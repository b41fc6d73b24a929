-- transfer_keys (migration 46) was made without STRICT, which every other table has (operations.md "Storage"):
-- its valid_height, which decides whether a keyed transfer may be sent anew, would have taken any text. The
-- table is rebuilt STRICT with its rows; the code only ever wrote integers there, so every row fits.
CREATE TABLE transfer_keys_strict (
  wallet TEXT NOT NULL,
  idempotency_key TEXT NOT NULL,
  request TEXT NOT NULL,
  reference TEXT NOT NULL,
  signature TEXT NOT NULL,
  blockhash TEXT NOT NULL,
  wire BLOB NOT NULL,
  valid_height INTEGER NOT NULL,
  created_at INTEGER NOT NULL,
  PRIMARY KEY (wallet, idempotency_key)
) STRICT, WITHOUT ROWID;
INSERT INTO transfer_keys_strict (wallet, idempotency_key, request, reference, signature, blockhash, wire, valid_height, created_at)
  SELECT wallet, idempotency_key, request, reference, signature, blockhash, wire, valid_height, created_at FROM transfer_keys;
DROP TABLE transfer_keys;
ALTER TABLE transfer_keys_strict RENAME TO transfer_keys;
CREATE INDEX transfer_keys_created_at ON transfer_keys (created_at);
