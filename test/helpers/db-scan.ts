// Where a string is stored in a server's database: every column of every table, read without writing.
import { Database } from "bun:sqlite";

/** `table.column` of every column holding `needle` anywhere in its text, in any row, sorted. */
export function columnsHolding(dbPath: string, needle: string): string[] {
  const db = new Database(dbPath, { readonly: true });
  try {
    const found: string[] = [];
    const tables = db.query("SELECT name FROM sqlite_master WHERE type = 'table'").all() as { name: string }[];
    for (const { name: table } of tables) {
      const columns = db.query("SELECT name FROM pragma_table_info(?)").all(table) as { name: string }[];
      for (const { name: column } of columns) {
        const hit = db.query(`SELECT 1 FROM "${table}" WHERE instr(CAST("${column}" AS TEXT), ?) > 0 LIMIT 1`).get(needle);
        if (hit !== null) found.push(`${table}.${column}`);
      }
    }
    return found.sort();
  } finally {
    db.close();
  }
}
