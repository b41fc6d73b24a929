// SQL of MCP session records: what a session bound, so it can be rebuilt after an idle sweep. Records are
// keyed by the SHA-256 of the session id: an id works like a password and is never stored.
import type { Db } from "../db/open.ts";
import { deleteFirst, deleteInWindow, inSteps, STEP_ROWS, stepOf } from "../db/steps.ts";

export type McpSessionRow = {
  id: string;
  createdAt: number;
  lastActivityAt: number;
  protocolVersion: string;
  fingerprint: string | null;
  wallet: string | null;
  sessionId: string | null;
  jti: string | null;
  /** The bound token's `exp`, Unix seconds (null: unbound, or bound before it was kept). */
  tokenExpiresAtS: number | null;
  boundBy: "binding" | "fingerprint" | null;
  endedAt: number | null;
};

export function insertSession(db: Db, row: Omit<McpSessionRow, "endedAt">): Promise<void> {
  return db.write(() => {
    db.sqlite
      .query(
        `INSERT INTO mcp_sessions (id, created_at, last_activity_at, protocol_version, fingerprint, wallet, session_id, jti, token_expires_at, bound_by)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
      )
      .run(row.id, row.createdAt, row.lastActivityAt, row.protocolVersion, row.fingerprint, row.wallet, row.sessionId, row.jti, row.tokenExpiresAtS, row.boundBy);
  });
}

export async function findSession(db: Db, id: string): Promise<McpSessionRow | null> {
  return db.read(() => {
    return (
      (db.sqlite
        .query(
          `SELECT id, created_at AS createdAt, last_activity_at AS lastActivityAt, protocol_version AS protocolVersion,
                  fingerprint, wallet, session_id AS sessionId, jti, token_expires_at AS tokenExpiresAtS, bound_by AS boundBy, ended_at AS endedAt
           FROM mcp_sessions WHERE id = ?`,
        )
        .get(id) as McpSessionRow | null) ?? null
    );
  });
}

/** Records what the session is bound to now (null: nothing). */
export function setBinding(
  db: Db,
  id: string,
  binding: { wallet: string; sessionId: string; jti: string; tokenExpiresAtS: number | null; boundBy: "binding" | "fingerprint" } | null,
  now: number,
): Promise<void> {
  return db.write(() => {
    db.sqlite
      .query("UPDATE mcp_sessions SET wallet = ?, session_id = ?, jti = ?, token_expires_at = ?, bound_by = ?, last_activity_at = ? WHERE id = ?")
      .run(binding?.wallet ?? null, binding?.sessionId ?? null, binding?.jti ?? null, binding?.tokenExpiresAtS ?? null, binding?.boundBy ?? null, now, id);
  });
}

export function touchSessions(db: Db, activity: ReadonlyMap<string, number>): Promise<void> {
  return db.write(() => {
    const touch = db.sqlite.query("UPDATE mcp_sessions SET last_activity_at = MAX(last_activity_at, ?) WHERE id = ?");
    for (const [id, at] of activity) touch.run(at, id);
  });
}

export function endSession(db: Db, id: string, now: number): Promise<void> {
  return db.write(() => {
    db.sqlite.query("UPDATE mcp_sessions SET ended_at = ? WHERE id = ? AND ended_at IS NULL").run(now, id);
  });
}

/**
 * One step's worth (STEP_ROWS) of the records of unbound sessions past the `kept` most recently active, among
 * those idle since before `idleBefore`.
 */
export const UNBOUND_SURPLUS = `SELECT id FROM mcp_sessions WHERE wallet IS NULL AND ended_at IS NULL AND last_activity_at < ?
  ORDER BY last_activity_at DESC LIMIT ${STEP_ROWS} OFFSET ?`;

/**
 * The bound record just past the `kept` most recently active among those idle since before `?` (through the
 * partial index of migration 28; ties in activity ordered by id): it and the ones before it in that order
 * are the surplus. No row: none.
 */
export const BOUND_SURPLUS_FROM = `SELECT last_activity_at AS at, id FROM mcp_sessions WHERE wallet IS NOT NULL AND ended_at IS NULL
  AND last_activity_at < ? ORDER BY last_activity_at DESC, id DESC LIMIT 1 OFFSET ?`;

/**
 * Deletes records ended before `endedBefore`, idle since before `idleBefore`, and, of those idle since before
 * `cappableBefore`, the unbound ones beyond the `unboundKept` most recent (through their partial index,
 * migration 27) and the bound ones beyond the `boundKept` most recent (migration 28). `cappableBefore`
 * leaves out every session that may still be in a server's memory (the sweep drops one idle for a timeout
 * and records its activity): deleting a live one's record would leave a wallet it binds later unsaved.
 */
export async function purgeSessions(
  db: Db,
  endedBefore: number,
  idleBefore: number,
  caps: { unboundKept: number; boundKept: number; cappableBefore: number },
  stopping?: AbortSignal,
): Promise<number> {
  // In steps of STEP_ROWS, each its own write (db/steps.ts): a walk for the old ones, then the surplus.
  const old = await inSteps(
    db,
    0,
    (after) => deleteInWindow(db, "mcp_sessions", after, "(ended_at IS NOT NULL AND ended_at < ?) OR last_activity_at < ?", endedBefore, idleBefore),
    stopping,
  );
  const surplus = await inSteps(
    db,
    0,
    () =>
      stepOf(
        db.sqlite
          .query(`DELETE FROM mcp_sessions WHERE id IN (${UNBOUND_SURPLUS})`)
          .run(caps.cappableBefore, caps.unboundKept).changes,
      ),
    stopping,
  );
  // Where the bound surplus starts is read once (one walk of `boundKept` index entries, not one per step),
  // then the records from there down go in steps, oldest first.
  const from = await db.read(() => db.sqlite.query(BOUND_SURPLUS_FROM).get(caps.cappableBefore, caps.boundKept) as { at: number; id: string } | null);
  const bound =
    from === null || stopping?.aborted === true
      ? 0
      : await inSteps(
          db,
          0,
          () =>
            deleteFirst(
              db,
              "mcp_sessions",
              "wallet IS NOT NULL AND ended_at IS NULL AND (last_activity_at, id) <= (?, ?)",
              "last_activity_at, id",
              from.at,
              from.id,
            ),
          stopping,
        );
  return old + surplus + bound;
}
