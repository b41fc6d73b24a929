-- The network (NETWORK) the database was first served on, recorded at the first start of this version.
-- Purchases, feature tokens, orders and the embedded ledger's state are one network's: served under
-- another, a localnet purchase paid in play money would grant access on devnet or mainnet. A start or
-- command under another NETWORK is refused, naming this one.
CREATE TABLE network_in_use (
  id INTEGER PRIMARY KEY CHECK (id = 1),
  network TEXT NOT NULL
) STRICT;
