// Deletes of unbounded size (the purges) as a series of small writes, so that no request waits behind
// one long write: each step is committed, and the event loop serves requests, before the next begins.
import type { Db } from "./open.ts";

/**
 * The rows one step looks at. Purging a day's expired rows among a million token rows held the JS thread
 * for 2.4 s as one write; in steps of 250 the longest stretches were 36–41 ms (the log's checkpoints), in
 * steps of 1,000 or 2,000 53–74 ms, for the same 6–6.5 s in all. A step's rows sit on random pages of the
 * random-key indexes, so a step dirties about a page per row: larger steps outgrow SQLite's page cache.
 */
export const STEP_ROWS = 250;

/** What a step removed, and the cursor the next step starts after (null: that was the last step). */
export type Step<C = number> = { removed: number; next: C | null };

/** A step that takes up to STEP_ROWS of what is due: the last one is the one that found fewer. */
export const stepOf = (removed: number): Step => ({ removed, next: removed < STEP_ROWS ? null : 0 });

/**
 * Runs `step` as one write after another, from cursor `from`, until a step returns `next: null` or
 * `stopping` aborts (shutdown: the rest is left to the next run). Returns the total removed.
 */
export async function inSteps<C>(db: Db, from: C, step: (after: C) => Step<C>, stopping?: AbortSignal): Promise<number> {
  let removed = 0;
  let after: C | null = from;
  while (after !== null && stopping?.aborted !== true) {
    const cursor: C = after;
    const done: Step<C> = await db.write(() => step(cursor));
    removed += done.removed;
    after = done.next;
  }
  return removed;
}

/** The last rowid of the next STEP_ROWS rows of `table` after `after`, or null when fewer are left. */
function windowEnd(db: Db, table: string, after: number): number | null {
  const row = db.sqlite.query(`SELECT rowid AS id FROM ${table} WHERE rowid > ? ORDER BY rowid LIMIT 1 OFFSET ${STEP_ROWS - 1}`).get(after) as {
    id: number;
  } | null;
  return row?.id ?? null;
}

/**
 * A step of a walk over `table` (not a WITHOUT ROWID table) in rowid order, for a condition no index
 * serves: deletes the rows of the next window of STEP_ROWS rows that `where` selects (`args` are its
 * parameters); the last window is open-ended. Inside a write's fn only (inSteps runs it so).
 */
export function deleteInWindow(db: Db, table: string, after: number, where: string, ...args: (string | number | null)[]): Step {
  const last = windowEnd(db, table, after);
  const removed =
    last === null
      ? db.sqlite.query(`DELETE FROM ${table} WHERE rowid > ? AND (${where})`).run(after, ...args).changes
      : db.sqlite.query(`DELETE FROM ${table} WHERE rowid > ? AND rowid <= ? AND (${where})`).run(after, last, ...args).changes;
  return { removed, next: last };
}

/**
 * A step that takes the first STEP_ROWS rows of `table` that `where` selects in `order` (a condition an
 * index serves) and deletes them; the last step is the one that found fewer.
 */
export function deleteFirst(db: Db, table: string, where: string, order: string, ...args: (string | number | null)[]): Step {
  const removed = db.sqlite
    .query(`DELETE FROM ${table} WHERE rowid IN (SELECT rowid FROM ${table} WHERE ${where} ORDER BY ${order} LIMIT ${STEP_ROWS})`)
    .run(...args).changes;
  return stepOf(removed);
}
