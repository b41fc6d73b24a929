// Whether a database already holds data sealed under WALLET_ENCRYPTION_KEY: then a missing key file must
// not be replaced by a new key (a backup restored without its secrets), which could open none of it.
import { Database } from "bun:sqlite";
import { existsSync } from "node:fs";
import { ConfigError } from "../config.ts";
import { hmacSha256Hex } from "../lib/hash.ts";
import type { Db } from "./open.ts";

/** Tables whose rows carry values sealed with the wallet encryption key. */
const SEALED_TABLES = ["custodial_wallets", "feature_tokens", "webhook_endpoints", "market_agents"] as const;

export function holdsSealedData(path: string): boolean {
  if (path === ":memory:" || !existsSync(path)) return false;
  let db: Database | null = null;
  try {
    db = new Database(path, { readonly: true });
    const present = new Set((db.query("SELECT name FROM sqlite_master WHERE type = 'table'").all() as { name: string }[]).map((r) => r.name));
    return SEALED_TABLES.some((table) => present.has(table) && db!.query(`SELECT 1 FROM ${table} LIMIT 1`).get() !== null);
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
    // Recorded with the first batch of writes, not waited for: lost in a crash, the next start records it.
    db.write(() => db.sqlite.query("INSERT INTO sealing_key_check (id, key_check) VALUES (1, ?) ON CONFLICT (id) DO NOTHING").run(check)).catch(() => undefined);
    return;
  }
  if (stored.keyCheck !== check) {
    throw new ConfigError(
      `the database's sealed data (custodial wallets, feature tokens, webhook secrets) was encrypted under another wallet encryption key than ${keySource}: put the key of the database's DATA_DIR there (a restored backup needs its own key file)`,
    );
  }
}
