// SQL for one-time dashboard sign-in links: record a link by its code's hash, spend it once, purge old ones.
import type { Db } from "../db/open.ts";

export type LinkRow = {
  codeHash: string;
  wallet: string;
  createdAt: number;
  expiresAt: number;
  usedAt: number | null;
};

export function insertLink(db: Db, row: Omit<LinkRow, "usedAt">): Promise<void> {
  return db.write(() => {
    db.sqlite
      .query("INSERT INTO dashboard_links (code_hash, wallet, created_at, expires_at) VALUES (?, ?, ?, ?)")
      .run(row.codeHash, row.wallet, row.createdAt, row.expiresAt);
  });
}

/**
 * The single conditional UPDATE that makes a link single-use, inside the caller's write (auth's insertToken):
 * true for exactly one of racing spends of `wallet`'s link while it is unused and unexpired.
 */
export function consumeLinkInWrite(db: Db, codeHash: string, wallet: string, now: number): boolean {
  return db.sqlite.query("UPDATE dashboard_links SET used_at = ? WHERE code_hash = ? AND wallet = ? AND used_at IS NULL AND expires_at > ?").run(now, codeHash, wallet, now).changes === 1;
}

export async function findLink(db: Db, codeHash: string): Promise<LinkRow | null> {
  return (
    (db.sqlite
      .query(
        `SELECT code_hash AS codeHash, wallet, created_at AS createdAt, expires_at AS expiresAt, used_at AS usedAt
         FROM dashboard_links WHERE code_hash = ?`,
      )
      .get(codeHash) as LinkRow | null) ?? null
  );
}

/** Deletes links that expired, or were used, before `horizon`. Returns how many. */
export function purgeLinks(db: Db, horizon: number): Promise<number> {
  return db.write(() => db.sqlite.query("DELETE FROM dashboard_links WHERE expires_at < ? OR used_at < ?").run(horizon, horizon).changes);
}
