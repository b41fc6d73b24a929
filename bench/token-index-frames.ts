// Not a spec row: how many WAL frames one token insert writes, by the shape of the token table's index
// (migration 32). 150,000 token rows first, then 24,000 more in commits of 12, as a sign-in load commits
// them; the frames in the log afterwards, per insert, and the index's pages. Run: bun bench/token-index-frames.ts
import { Database } from "bun:sqlite";
import { randomBytes, randomUUID } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const indexes: Record<string, string> = {
  "(wallet, jti), unique (migrations 14-31)": "CREATE UNIQUE INDEX i ON t (wallet, jti)",
  "(substr(wallet, 1, 8), jti), unique": "CREATE UNIQUE INDEX i ON t (substr(wallet, 1, 8), jti)",
  "(substr(wallet, 1, 8), substr(jti, 1, 8)) (migration 32)": "CREATE INDEX i ON t (substr(wallet, 1, 8), substr(jti, 1, 8))",
  "none (the table alone)": "",
};
const BASE58 = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz";
const address = () => Array.from(randomBytes(44), (b) => BASE58[b % 58]).join("");
const dir = mkdtempSync(join(tmpdir(), "walletgate-index-frames-"));
try {
  for (const [name, index] of Object.entries(indexes)) {
    const db = new Database(join(dir, `${Object.keys(indexes).indexOf(name)}.db`));
    db.run("PRAGMA journal_mode = WAL");
    db.run("PRAGMA synchronous = NORMAL");
    db.run("PRAGMA wal_autocheckpoint = 0");
    db.run(`CREATE TABLE t (jti TEXT NOT NULL, session_id TEXT NOT NULL, wallet TEXT NOT NULL, issued_at INTEGER NOT NULL,
      expires_at INTEGER NOT NULL, session_started_at INTEGER NOT NULL, fingerprint TEXT, revoked_at INTEGER, kid TEXT, issuer TEXT) STRICT`);
    if (index !== "") db.run(index);
    const insert = db.query("INSERT INTO t VALUES (?, ?, ?, ?, ?, ?, ?, NULL, ?, ?)");
    const one = () => insert.run(randomUUID(), randomUUID(), address(), 1, 2, 3, "f".repeat(64), "0123456789abcdef", "http://localhost:3000");
    db.transaction(() => {
      for (let i = 0; i < 150_000; i++) one();
    })();
    db.run("PRAGMA wal_checkpoint(TRUNCATE)");
    const inserts = 24_000;
    for (let i = 0; i < inserts / 12; i++) {
      db.transaction(() => {
        for (let j = 0; j < 12; j++) one();
      })();
    }
    const { log } = db.query("PRAGMA wal_checkpoint(PASSIVE)").get() as { log: number };
    const { pages } = db.query("SELECT count(*) AS pages FROM dbstat WHERE name = 'i'").get() as { pages: number };
    console.log(`${name}: ${(log / inserts).toFixed(2)} log frames per insert, index ${pages} pages`);
    db.close();
  }
} finally {
  rmSync(dir, { recursive: true, force: true });
}
