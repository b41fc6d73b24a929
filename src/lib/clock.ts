// The one source of time: real in production, movable in tests.
export interface Clock {
  /** Unix time in milliseconds. */
  now(): number;
}

/** One day in milliseconds (UTC days: no leap seconds in Unix time). */
export const DAY_MS = 86_400_000;

export const systemClock: Clock = { now: () => Date.now() };

/** A clock that only moves when told to. */
export function manualClock(startMs = Date.UTC(2026, 10, 22)): Clock & { advance(ms: number): void; set(ms: number): void } {
  let t = startMs;
  return {
    now: () => t,
    advance: (ms) => {
      t += ms;
    },
    set: (ms) => {
      t = ms;
    },
  };
}

/** The last millisecond ISO 8601's four-digit years can write: 9999-12-31T23:59:59.999Z. */
export const LATEST_TIME_MS = 253_402_300_799_999;

/** ISO 8601 UTC with milliseconds. */
export function toIso(ms: number): string {
  return new Date(ms).toISOString();
}
