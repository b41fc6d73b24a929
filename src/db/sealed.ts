// Whether a database already holds data sealed under WALLET_ENCRYPTION_KEY: then a missing key file must
// not be replaced by a new key (a backup restored without its secrets), which could open none of it.
import { Database } from "bun:sqlite";
import { existsSync } from "node:fs";

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
