// A new database written whole instead of migrated step by step. The executable carries the database every
// migration leads to (built by scripts/build.ts from the same migrations), so a first start writes it at
// once: running the migrations' DDL costs ~5–9 ms here, against a start-up budget of ~25 ms in all
// (operations.md). Run from source, the image is not there and the migrations build the database.
import { Database } from "bun:sqlite";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { basename, dirname, join } from "node:path";
import { createFilesDurably, removeAsideLeftovers } from "../lib/durable.ts";
import { fileBehind } from "../lib/links.ts";
import { migrate } from "./migrate.ts";
import { MIGRATIONS, type Migration } from "./migrations.ts";

/** The bytes of a database migrated to the newest version and holding nothing else (build time, tests). */
export function freshDatabaseImage(migrations: readonly Migration[] = MIGRATIONS, now = Date.now()): Uint8Array<ArrayBuffer> {
  const dir = mkdtempSync(join(tmpdir(), "walletgate-image-"));
  try {
    const sqlite = new Database(join(dir, "migrated.db"), { create: true, strict: true });
    migrate(sqlite, now, migrations);
    sqlite.run(`VACUUM INTO '${join(dir, "image.db")}'`); // compact: no free pages, no log
    sqlite.close();
    const image = new Uint8Array(readFileSync(join(dir, "image.db")));
    // The file format's write and read versions (header bytes 18 and 19): 2 is WAL mode, which the
    // database is opened in. Set here, the first open need not switch modes (four more fsyncs).
    image[18] = 2;
    image[19] = 2;
    return image;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** The image as scripts/build.ts embeds it: gzip (the empty pages shrink ~37×), base64. */
export function encodeImage(image: Uint8Array<ArrayBuffer>): string {
  return Buffer.from(Bun.gzipSync(image, { level: 9 })).toString("base64");
}

function embeddedImage(): Uint8Array | null {
  return typeof WALLETGATE_FRESH_DATABASE === "string" ? Bun.gunzipSync(Buffer.from(WALLETGATE_FRESH_DATABASE, "base64")) : null;
}

/**
 * Writes `image` (default: the executable's) as the database at `path` when there is none there, whole
 * or not at all (lib/durable.ts): no process ever opens half of it, two starting at once agree on one,
 * and a power cut leaves either no database or all of it. True when this call created it.
 */
export function createFromImage(named: string, image?: Uint8Array | null): boolean {
  if (named === ":memory:") return false;
  const path = fileBehind(named); // a link to a volume: the image is written where it leads, the link stays
  removeAsideLeftovers(dirname(path), [basename(path)]); // of a first start killed while writing the image
  if (existsSync(path)) return false;
  // A log left by an earlier database (its file deleted, the log not) would be replayed onto the image:
  // then SQLite starts from an empty file as it always did, and the migrations build the database.
  if (existsSync(`${path}-wal`)) return false;
  const bytes = image === undefined ? embeddedImage() : image; // unpacked only for a first start
  if (bytes === null) return false;
  return createFilesDurably(dirname(path), [{ name: basename(path), data: bytes, mode: 0o600 }]).length === 1;
}
