-- Mainnet rule (ledger.md): every transfer the service submits is logged, whatever its outcome.

CREATE TABLE ledger_audit (
  id INTEGER PRIMARY KEY,
  at INTEGER NOT NULL,
  network TEXT NOT NULL,
  signature TEXT NOT NULL,
  fee_payer TEXT NOT NULL,
  -- JSON: [{token, mint, from, to, amount}] as read from the transaction (amounts as strings)
  transfers TEXT NOT NULL,
  outcome TEXT NOT NULL CHECK (outcome IN ('confirmed', 'failed', 'rejected', 'unknown')),
  error_code TEXT
) STRICT;
CREATE INDEX ledger_audit_signature ON ledger_audit (signature);
