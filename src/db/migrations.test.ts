// Migrations are append-only: a database migrated by one build must hold the schema every later build
// expects. An edited migration would not be applied again to a database that already recorded it, so the
// two would silently differ. Each migration's SHA-256 is pinned in migrations/SHA256SUMS (the format of
// `sha256sum`, so `sha256sum -c` checks it too); a change to a migration fails here.
import { describe, expect, test } from "bun:test";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { Database } from "bun:sqlite";
import { migrate } from "./migrate.ts";
import { MIGRATIONS } from "./migrations.ts";

const dir = join(import.meta.dir, "migrations");
const files = readdirSync(dir).filter((f) => f.endsWith(".sql")).sort();
const pinned = new Map(
  readFileSync(join(dir, "SHA256SUMS"), "utf8")
    .trim()
    .split("\n")
    .map((line) => {
      const [sum, name] = line.split(/\s+\*?/);
      return [name!, sum!] as const;
    }),
);

describe("migrations", () => {
  test("every migration file is embedded, numbered in order, under its file's name", () => {
    expect(MIGRATIONS.map((m) => `${String(m.version).padStart(4, "0")}_${m.name}.sql`)).toEqual(files);
    expect(MIGRATIONS.map((m) => m.version)).toEqual(MIGRATIONS.map((_, i) => i + 1));
    for (const m of MIGRATIONS) expect(m.sql).toBe(readFileSync(join(dir, `${String(m.version).padStart(4, "0")}_${m.name}.sql`), "utf8"));
  });

  test("no migration changed once written: each matches its pinned SHA-256 (add a new migration instead)", () => {
    expect([...pinned.keys()].sort()).toEqual(files);
    const changed = files.filter((f) => new Bun.CryptoHasher("sha256").update(readFileSync(join(dir, f))).digest("hex") !== pinned.get(f));
    // A migration not yet in any release may still be edited: then its line in SHA256SUMS is updated with it.
    expect(changed).toEqual([]);
  });

  test("every table the migrations make is STRICT (operations.md), but SQLite's own and full-text search's", () => {
    const sqlite = new Database(":memory:");
    migrate(sqlite, Date.now());
    const tables = sqlite.query("SELECT name, sql FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'").all() as { name: string; sql: string }[];
    const loose = tables.filter((t) => !/^CREATE VIRTUAL TABLE/i.test(t.sql) && !/_fts(_|$)/.test(t.name) && !/\)\s*(WITHOUT ROWID\s*,\s*)?STRICT(\s*,\s*WITHOUT ROWID)?\s*$/i.test(t.sql));
    expect(tables.length).toBeGreaterThan(30);
    expect(loose.map((t) => t.name)).toEqual([]);
    // A text in an integer column is refused, as in transfer_keys since migration 49.
    expect(() =>
      sqlite.run("INSERT INTO transfer_keys (wallet, idempotency_key, request, reference, signature, blockhash, wire, valid_height, created_at) VALUES ('w', 'k', '{}', 'r', 's', 'b', x'00', 'soon', 1)"),
    ).toThrow(/cannot store TEXT value in INTEGER column/);
    sqlite.close();
  });

  test("migration 49 rebuilds transfer_keys STRICT with its rows and its index", () => {
    const sqlite = new Database(":memory:");
    migrate(sqlite, Date.now(), MIGRATIONS.filter((m) => m.version < 49));
    sqlite.run(
      "INSERT INTO transfer_keys (wallet, idempotency_key, request, reference, signature, blockhash, wire, valid_height, created_at) VALUES ('w', 'k', '{\"to\":\"x\"}', 'r', 's', 'b', x'0102', 123, 456)",
    );
    expect(migrate(sqlite, Date.now()).applied).toEqual(MIGRATIONS.filter((m) => m.version >= 49).map((m) => m.version));
    expect(sqlite.query("SELECT wallet, idempotency_key AS key, request, wire, typeof(valid_height) AS t, valid_height AS height, created_at AS at FROM transfer_keys").all()).toEqual([
      { wallet: "w", key: "k", request: '{"to":"x"}', wire: new Uint8Array([1, 2]), t: "integer", height: 123, at: 456 },
    ]);
    expect(sqlite.query("SELECT name FROM sqlite_master WHERE tbl_name = 'transfer_keys' AND type = 'index' AND name NOT LIKE 'sqlite_%'").all()).toEqual([{ name: "transfer_keys_created_at" }]);
    sqlite.close();
  });
});
