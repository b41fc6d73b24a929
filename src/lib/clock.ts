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

/** ISO 8601 UTC with milliseconds. */
export function toIso(ms: number): string {
  return new Date(ms).toISOString();
}
