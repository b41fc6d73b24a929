// The database the executable carries (scripts/build.ts) is the one the migrations build, written whole.
import { afterAll, expect, test } from "bun:test";
import { Database } from "bun:sqlite";
import { lstatSync, mkdirSync, readdirSync, rmSync, statSync, symlinkSync, utimesSync, writeFileSync } from "node:fs";
import { LEFTOVER_AFTER_MS } from "../lib/leftovers.ts";
import { join } from "node:path";
import { tempDir } from "../../test/helpers/server.ts";
import { createFromImage, encodeImage, freshDatabaseImage } from "./fresh.ts";
import { migrate } from "./migrate.ts";
import { MIGRATIONS } from "./migrations.ts";
import { openDatabase } from "./open.ts";

const dirs: string[] = [];
afterAll(() => dirs.forEach((d) => rmSync(d, { recursive: true, force: true })));

const schemaOf = (sqlite: Database) =>
  sqlite.query("SELECT type, name, tbl_name AS tbl, sql FROM sqlite_master WHERE name NOT LIKE 'sqlite_%' ORDER BY type, name").all();

test("the image is the migrated schema, in WAL mode, written whole once; from source there is none", () => {
  const dir = tempDir();
  dirs.push(dir);
  const image = freshDatabaseImage();
  const path = join(dir, "data", "walletgate.db");
  expect(createFromImage(path, image)).toBe(true);
  expect(createFromImage(path, image)).toBe(false); // there is one now: left as it is
  expect(readdirSync(join(dir, "data"))).toEqual(["walletgate.db"]); // no temp file left behind
  expect(statSync(path).mode & 0o777).toBe(0o600); // the owner's only, as a database SQLite makes here (open.ts)

  const plain = new Database(path, { readonly: true });
  expect(plain.query("PRAGMA journal_mode").get()).toEqual({ journal_mode: "wal" }); // no switch on first open
  plain.close();

  const db = openDatabase(path);
  expect(migrate(db.sqlite, Date.now())).toEqual({ applied: [], version: Math.max(...MIGRATIONS.map((m) => m.version)) });
  const migrated = new Database(":memory:");
  migrate(migrated, Date.now());
  expect(schemaOf(db.sqlite)).toEqual(schemaOf(migrated));
  expect(db.sqlite.query("SELECT version, name FROM schema_migrations ORDER BY version").all()).toEqual(
    migrated.query("SELECT version, name FROM schema_migrations ORDER BY version").all(),
  );
  expect(db.sqlite.query("PRAGMA integrity_check").get()).toEqual({ integrity_check: "ok" });
  db.close();
  migrated.close();

  // A log left by a deleted database is not replayed onto the image: SQLite and the migrations take over.
  const stale = join(dir, "stale");
  mkdirSync(stale);
  writeFileSync(join(stale, "walletgate.db-wal"), "left over");
  expect(createFromImage(join(stale, "walletgate.db"), image)).toBe(false);
  expect(readdirSync(stale)).toEqual(["walletgate.db-wal"]);

  // Run from source nothing is embedded: the migrations build the database.
  expect(createFromImage(join(dir, "other.db"))).toBe(false);
  expect(encodeImage(image).length).toBeLessThan(64 * 1024); // what the executable carries
});

test("through a link to a file still to be made (DATA_DIR's database on a volume), the image is written where the link leads", () => {
  const dir = tempDir();
  dirs.push(dir);
  mkdirSync(join(dir, "volume"));
  mkdirSync(join(dir, "data"));
  symlinkSync(join(dir, "volume", "wg.db"), join(dir, "data", "walletgate.db"));
  expect(createFromImage(join(dir, "data", "walletgate.db"), freshDatabaseImage())).toBe(true);
  expect(lstatSync(join(dir, "data", "walletgate.db")).isSymbolicLink()).toBe(true);
  expect(readdirSync(join(dir, "volume"))).toEqual(["wg.db"]);
  expect(statSync(join(dir, "volume", "wg.db")).mode & 0o777).toBe(0o600);
  const db = openDatabase(join(dir, "data", "walletgate.db"));
  expect(migrate(db.sqlite, Date.now()).applied).toEqual([]); // the image, not an empty file migrated
  db.close();
});

test("a copy of the image a first start killed mid-way left under a hidden name is removed once stale", () => {
  const dir = tempDir();
  dirs.push(dir);
  const path = join(dir, "walletgate.db");
  const stale = join(dir, ".walletgate.db.6b1f0c52-0d5e-4a43-9a43-0f1d0b1e2a11.tmp");
  writeFileSync(stale, "half an image");
  const old = new Date(Date.now() - LEFTOVER_AFTER_MS - 1000);
  utimesSync(stale, old, old);
  createFromImage(path, freshDatabaseImage(undefined, 0));
  expect(readdirSync(dir).sort()).toEqual(["walletgate.db"]);
});
