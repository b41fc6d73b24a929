-- ledger.md: the embedded ledger follows Solana where a user could tell the difference. A cluster refuses
-- a transaction whose message it already processed, whatever its signatures: a fee payer could otherwise
-- sign another party's once-signed message again (Ed25519 gives it any number of valid signatures over the
-- same bytes) and replay that party's transfer under a new txHash. Each recorded transaction keeps the
-- SHA-256 of its signed message (hex), unique. Rows recorded before this have none: their blockhashes
-- expired long ago, so they cannot be sent again anyway.
ALTER TABLE ledger_transactions ADD COLUMN message_hash TEXT;
CREATE UNIQUE INDEX ledger_transactions_message_hash ON ledger_transactions (message_hash) WHERE message_hash IS NOT NULL;
