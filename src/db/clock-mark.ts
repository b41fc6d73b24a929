// The clock watch's mark (lib/clock-steps.ts ClockMark), kept for the next start: one row.
import type { ClockMark } from "../lib/clock-steps.ts";
import type { Db } from "./open.ts";

export function readClockMark(db: Db): ClockMark | null {
  return db.read(
    () =>
      (db.sqlite
        .query(
          `SELECT boot_id AS bootId, wall_ms AS wallMs, boot_ms AS bootMs, ahead_ms AS aheadMs, since_forward_ms AS sinceForwardMs
           FROM clock_mark WHERE id = 1`,
        )
        .get() as ClockMark | null) ?? null,
  );
}

export function saveClockMark(db: Db, mark: ClockMark): Promise<void> {
  return db.write(() => {
    db.sqlite
      .query(
        `INSERT INTO clock_mark (id, boot_id, wall_ms, boot_ms, ahead_ms, since_forward_ms) VALUES (1, ?, ?, ?, ?, ?)
         ON CONFLICT (id) DO UPDATE SET boot_id = excluded.boot_id, wall_ms = excluded.wall_ms, boot_ms = excluded.boot_ms,
           ahead_ms = excluded.ahead_ms, since_forward_ms = excluded.since_forward_ms`,
      )
      .run(mark.bootId, Math.round(mark.wallMs), mark.bootMs, Math.round(mark.aheadMs), mark.sinceForwardMs === null ? null : Math.round(mark.sinceForwardMs));
  });
}
