// Whether a database already holds data sealed under WALLET_ENCRYPTION_KEY: then a missing key file must
// not be replaced by a new key (a backup restored without its secrets), which could open none of it.
import { Database } from "bun:sqlite";
import { existsSync } from "node:fs";
import { ConfigError } from "../config.ts";
import { decryptAesGcm } from "../lib/aes-gcm.ts";
import { hmacSha256Hex } from "../lib/hash.ts";
import type { Db } from "./open.ts";

/**
 * Tables whose rows carry values sealed with the wallet encryption key: the value's columns, and the column
 * holding the associated data it was sealed with (a custodial wallet's address, a feature token's hash, a
 * webhook endpoint's or an agent's id).
 */
const SEALED = [
  { table: "custodial_wallets", aad: "address", iv: "secret_iv", ciphertext: "secret_ciphertext" },
  { table: "feature_tokens", aad: "token_hash", iv: "token_iv", ciphertext: "token_ciphertext" },
  { table: "webhook_endpoints", aad: "id", iv: "secret_iv", ciphertext: "secret_ciphertext" },
  { table: "market_agents", aad: "id", iv: "secret_iv", ciphertext: "secret_ciphertext" },
] as const;

/**
 * Whether the database at `path` is bound to a wallet encryption key already: it holds sealed data, or
 * recorded the check of the key it was first opened with. A key generated now could not be that key, so
 * one is not generated (nor any other secret file written) for such a database.
 */
export function holdsSealedData(path: string): boolean {
  if (path === ":memory:" || !existsSync(path)) return false;
  let db: Database | null = null;
  try {
    db = new Database(path, { readonly: true });
    const present = new Set((db.query("SELECT name FROM sqlite_master WHERE type = 'table'").all() as { name: string }[]).map((r) => r.name));
    if (present.has("sealing_key_check") && db.query("SELECT 1 FROM sealing_key_check LIMIT 1").get() !== null) return true;
    return SEALED.some(({ table }) => present.has(table) && db!.query(`SELECT 1 FROM ${table} LIMIT 1`).get() !== null);
  } catch {
    return false; // not readable here: opening it for real reports why
  } finally {
    db?.close();
  }
}

/** What identifies a wallet encryption key without revealing it. */
const keyCheckOf = (key: Uint8Array) => hmacSha256Hex(key, "walletgate wallet-encryption-key check");

/**
 * Opens the database only under the key its sealed data was sealed with: the key's check is recorded on
 * first use (a database from before the check was kept is taken as sealed under the key it is opened
 * with, as before), and a different key stops the server and the commands (exit 1), naming where the
 * key comes from. Without this a backup restored into a DATA_DIR holding a key of its own would start,
 * open none of its custodial wallets or tokens, and seal new ones beside them under another key.
 */
export function requireSealingKey(db: Db, key: Uint8Array, keySource: string): void {
  const check = keyCheckOf(key);
  const stored = db.read(() => db.sqlite.query("SELECT key_check AS keyCheck FROM sealing_key_check WHERE id = 1").get() as { keyCheck: string } | null);
  if (stored === null) {
    // A database from before the check was kept (an old backup, an upgrade): the key must open what is
    // sealed in it already, or it would be recorded as the database's key and the right one refused.
    if (opensSealedSample(db, key) === false) throw mismatch(keySource);
    // Recorded with the first batch of writes, not waited for: lost in a crash, the next start records it.
    db.write(() => db.sqlite.query("INSERT INTO sealing_key_check (id, key_check) VALUES (1, ?) ON CONFLICT (id) DO NOTHING").run(check)).catch(() => undefined);
    return;
  }
  if (stored.keyCheck !== check) throw mismatch(keySource);
}

const mismatch = (keySource: string) =>
  new ConfigError(
    `the database's sealed data (custodial wallets, feature tokens, webhook secrets) was encrypted under another wallet encryption key than ${keySource}: put the key of the database's DATA_DIR there (a restored backup needs its own key file)`,
  );

/**
 * Whether `key` opens the first value already sealed in the database (one of each SEALED table is looked
 * for in turn: a database from before the check may hold any one of them alone); null when there is none.
 */
function opensSealedSample(db: Db, key: Uint8Array): boolean | null {
  const utf8 = (text: string) => new TextEncoder().encode(text);
  return db.read(() => {
    for (const { table, aad, iv, ciphertext } of SEALED) {
      const row = db.sqlite.query(`SELECT ${aad} AS aad, ${iv} AS iv, ${ciphertext} AS ciphertext FROM ${table} LIMIT 1`).get() as { aad: string; iv: Uint8Array; ciphertext: Uint8Array } | null;
      if (row !== null) return decryptAesGcm(key, row.iv, row.ciphertext, utf8(row.aad)) !== null;
    }
    return null;
  });
}
