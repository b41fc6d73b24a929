// Applies the embedded migrations in order, in one transaction, and refuses a database newer than us.
import type { Database } from "bun:sqlite";
import { MIGRATIONS, type Migration } from "./migrations.ts";

export class SchemaTooNewError extends Error {
  override name = "SchemaTooNewError";
}

export type MigrateResult = { applied: number[]; version: number };

export function migrate(sqlite: Database, now: number, migrations: readonly Migration[] = MIGRATIONS): MigrateResult {
  sqlite.run(
    "CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL) STRICT",
  );
  const latest = migrations.reduce((max, m) => Math.max(max, m.version), 0);
  const apply = sqlite.transaction(() => {
    const row = sqlite.query("SELECT COALESCE(MAX(version), 0) AS version FROM schema_migrations").get() as { version: number };
    if (row.version > latest) {
      throw new SchemaTooNewError(
        `the database schema is version ${row.version} but this program knows only up to ${latest}; run a newer walletgate`,
      );
    }
    // Every version not yet recorded is applied, in order — also one numbered below the newest applied
    // (migrations written side by side can land in either order).
    const done = new Set((sqlite.query("SELECT version FROM schema_migrations").all() as { version: number }[]).map((r) => r.version));
    const applied: number[] = [];
    for (const m of [...migrations].sort((a, b) => a.version - b.version)) {
      if (done.has(m.version)) continue;
      sqlite.run(m.sql);
      sqlite.query("INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)").run(m.version, m.name, now);
      applied.push(m.version);
    }
    return { applied, version: Math.max(row.version, latest) };
  });
  return apply.immediate();
}
