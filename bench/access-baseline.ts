// /public/access/check baseline: an Elysia route doing one SQLite primary-key lookup, and nothing else.
// Usage: bun bench/access-baseline.ts <dbDir>; prints its URL like walletgate.
import { Database } from "bun:sqlite";
import { Elysia, t } from "elysia";
import { join } from "node:path";

const db = new Database(join(process.argv[2] ?? ".", "baseline.db"), { create: true, strict: true });
db.run("PRAGMA journal_mode = WAL");
db.run("CREATE TABLE IF NOT EXISTS purchases (id TEXT PRIMARY KEY, wallet TEXT NOT NULL, tx_hash TEXT NOT NULL) STRICT");
const insert = db.prepare("INSERT OR IGNORE INTO purchases (id, wallet, tx_hash) VALUES (?, ?, ?)");
for (let i = 0; i < 10_000; i++) insert.run(`pur_${i}`, `wallet_${i}`, `tx_${i}`);
const lookup = db.prepare("SELECT tx_hash AS txHash FROM purchases WHERE id = ?");

const app = new Elysia().post(
  "/check",
  ({ body }) => {
    const row = lookup.get(body.id) as { txHash: string } | null;
    return row === null ? { hasAccess: false } : { hasAccess: true, txHash: row.txHash };
  },
  { body: t.Object({ id: t.String(), walletAddress: t.String() }) },
);
const server = Bun.serve({ hostname: "127.0.0.1", port: 0, reusePort: false, fetch: app.fetch });
console.log(JSON.stringify({ msg: "listening", url: `http://127.0.0.1:${server.port}` }));
