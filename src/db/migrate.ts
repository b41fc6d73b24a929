// Applies the embedded migrations in order, in one transaction, and refuses a database newer than us.
import type { Database } from "bun:sqlite";
import { MIGRATIONS, type Migration } from "./migrations.ts";
import type { Db } from "./open.ts";

export class SchemaTooNewError extends Error {
  override name = "SchemaTooNewError";
}

/** The database lacks migrations this program has: only `walletgate migrate` or `serve` apply them. */
export class SchemaBehindError extends Error {
  override name = "SchemaBehindError";
}

export type MigrateResult = { applied: number[]; version: number };

/** The newest migration the database records (0 for a database never migrated). */
export function schemaVersion(sqlite: Database): number {
  const table = sqlite.query("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'schema_migrations'").get();
  if (table === null) return 0;
  return (sqlite.query("SELECT COALESCE(MAX(version), 0) AS version FROM schema_migrations").get() as { version: number }).version;
}

/** The newest schema version `migrations` lead to (this program's, by default). */
export const latestOf = (migrations: readonly Migration[] = MIGRATIONS) => migrations.reduce((max, m) => Math.max(max, m.version), 0);

/** Refuses a database newer than the program: its schema is not one this program can write to. */
function refuseNewer(version: number, latest: number): void {
  if (version > latest) {
    throw new SchemaTooNewError(`the database schema is version ${version} but this program knows only up to ${latest}; run a newer walletgate`);
  }
}

/** The migrations `migrations` has that the database has not had. */
function pendingOf(sqlite: Database, migrations: readonly Migration[]): Migration[] {
  const done = new Set((sqlite.query("SELECT version FROM schema_migrations").all() as { version: number }[]).map((r) => r.version));
  return migrations.filter((m) => !done.has(m.version));
}

/** The versions of this program's migrations the database lacks, in order (all of them for a new database); refuses a newer one. */
export function pendingVersions(sqlite: Database, migrations: readonly Migration[] = MIGRATIONS): number[] {
  const version = schemaVersion(sqlite);
  refuseNewer(version, latestOf(migrations));
  const pending = version === 0 ? [...migrations] : pendingOf(sqlite, migrations);
  return pending.map((m) => m.version).sort((a, b) => a - b);
}

/**
 * After migrations were applied (they commit outside `db.write`): flushed to disk, then the log they wrote (a
 * rebuilt table's copy, as large as the table) folded into the file and cut back to nothing, rather than
 * held on the disk at that size for as long as the process runs. (Readers of another process may keep the
 * cut from finishing; then the log stays.)
 */
export function settleMigrations(db: Db): void {
  db.flush();
  db.sqlite.run("PRAGMA wal_checkpoint(TRUNCATE)");
}

/**
 * For one-shot commands, which may run beside a server: a database never migrated is migrated (no server
 * can be using it); one that lacks some of this program's migrations is refused rather than migrated
 * under a server of an older version, which would go on writing to a schema it does not know.
 */
export function migrateFreshOnly(sqlite: Database, now: number, migrations: readonly Migration[] = MIGRATIONS): void {
  const version = schemaVersion(sqlite);
  if (version === 0) {
    migrate(sqlite, now, migrations);
    return;
  }
  refuseNewer(version, latestOf(migrations));
  const missing = pendingOf(sqlite, migrations).map((m) => m.version);
  if (missing.length > 0) {
    throw new SchemaBehindError(
      `the database lacks migration${missing.length > 1 ? "s" : ""} ${missing.join(", ")} of this walletgate: stop the server and run \`walletgate migrate\` (or start \`walletgate serve\` of this version), then run this command again`,
    );
  }
}

/**
 * Applies the migrations the database lacks, all in one transaction. `onPending` hears which ones before
 * they run (some take long on a big database: migration 14 rewrites the token table, ~1 s per 500,000 rows).
 */
export function migrate(sqlite: Database, now: number, migrations: readonly Migration[] = MIGRATIONS, onPending?: (versions: number[]) => void): MigrateResult {
  sqlite.run(
    "CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL) STRICT",
  );
  const latest = latestOf(migrations);
  const apply = sqlite.transaction(() => {
    const version = schemaVersion(sqlite);
    refuseNewer(version, latest);
    // Every version not yet recorded is applied, in order — also one numbered below the newest applied
    // (migrations written side by side can land in either order).
    const applied: number[] = [];
    const pending = pendingOf(sqlite, migrations).sort((a, b) => a.version - b.version);
    if (pending.length > 0) onPending?.(pending.map((m) => m.version));
    for (const m of pending) {
      sqlite.run(m.sql);
      sqlite.query("INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)").run(m.version, m.name, now);
      applied.push(m.version);
    }
    return { applied, version: Math.max(version, latest) };
  });
  return apply.immediate();
}
