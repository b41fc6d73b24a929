// The query plans of the statements a call prepares: what SQLite will do for them on a database of any size.
import type { Database } from "bun:sqlite";

export type StatementPlan = { sql: string; plan: string };

/** Runs `call`, noting every statement it prepares through `sqlite.query`, then explains each. */
export async function plansOf(sqlite: Database, call: () => Promise<unknown>): Promise<StatementPlan[]> {
  const query = sqlite.query;
  const seen = new Set<string>();
  const noting = ((sql: string) => {
    seen.add(sql);
    return query.call(sqlite, sql);
  }) as typeof sqlite.query;
  Object.defineProperty(sqlite, "query", { value: noting, configurable: true, writable: true });
  try {
    await call();
  } finally {
    delete (sqlite as { query?: unknown }).query; // the prototype's again
  }
  return [...seen].map((sql) => {
    // Prepared and finalized, not cached: Bun leaves the EXPLAIN of a plain INSERT (no rows) in progress,
    // and the connection then refuses to open the next write's savepoint.
    const explain = sqlite.prepare(`EXPLAIN QUERY PLAN ${sql}`);
    try {
      return { sql, plan: (explain.all() as { detail: string }[]).map((row) => row.detail).join("; ") };
    } finally {
      explain.finalize();
    }
  });
}
