-- The embedded ledger (NETWORK=localnet): accounts, accepted transactions and an address index for
-- history. Lamports and token amounts are integers of base units; times are Unix milliseconds.

CREATE TABLE ledger_meta (
  key TEXT PRIMARY KEY,
  value TEXT NOT NULL
) STRICT;

-- One row per account. A system account holds lamports only; a token account also a mint, an owner
-- and an amount; a mint its decimals and supply. System accounts with 0 lamports do not exist.
CREATE TABLE ledger_accounts (
  address TEXT PRIMARY KEY,
  kind TEXT NOT NULL CHECK (kind IN ('system', 'token', 'mint')),
  lamports INTEGER NOT NULL CHECK (lamports >= 0),
  mint TEXT,
  owner TEXT,
  amount INTEGER CHECK (amount >= 0),
  decimals INTEGER,
  supply INTEGER,
  CHECK (kind <> 'token' OR (mint IS NOT NULL AND owner IS NOT NULL AND amount IS NOT NULL)),
  CHECK (kind <> 'mint' OR (decimals IS NOT NULL AND supply IS NOT NULL))
) STRICT;

-- Every recorded transaction, confirmed or failed (a failed one still charged its fee).
CREATE TABLE ledger_transactions (
  seq INTEGER PRIMARY KEY,
  signature TEXT NOT NULL UNIQUE,
  wire BLOB NOT NULL,
  slot INTEGER NOT NULL,
  block_time INTEGER NOT NULL,
  status TEXT NOT NULL CHECK (status IN ('confirmed', 'failed')),
  error TEXT,
  fee INTEGER NOT NULL,
  fee_payer TEXT NOT NULL,
  transfers TEXT NOT NULL,
  memo TEXT
) STRICT;

-- Which transactions concern an address (its own keys and the owners of token accounts it moved).
CREATE TABLE ledger_address_transactions (
  address TEXT NOT NULL,
  seq INTEGER NOT NULL,
  PRIMARY KEY (address, seq)
) STRICT, WITHOUT ROWID;
