// Migrations are append-only: a database migrated by one build must hold the schema every later build
// expects. An edited migration would not be applied again to a database that already recorded it, so the
// two would silently differ. Each migration's SHA-256 is pinned in migrations/SHA256SUMS (the format of
// `sha256sum`, so `sha256sum -c` checks it too); a change to a migration fails here.
import { describe, expect, test } from "bun:test";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
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
});
