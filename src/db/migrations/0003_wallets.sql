-- Custodial wallets (wallet_create): the 64-byte Solana secret key (seed || public key) sealed with
-- AES-256-GCM under WALLET_ENCRYPTION_KEY, the address as additional authenticated data, so a row's
-- ciphertext only opens under its own address. Times are Unix milliseconds.

CREATE TABLE custodial_wallets (
  address TEXT PRIMARY KEY,
  -- 12 random bytes, new for every record
  secret_iv BLOB NOT NULL CHECK (length(secret_iv) = 12),
  -- ciphertext || 16-byte tag
  secret_ciphertext BLOB NOT NULL CHECK (length(secret_ciphertext) = 80),
  created_at INTEGER NOT NULL
) STRICT;
