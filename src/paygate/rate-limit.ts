// Per-owner limits of /public/* (paygate.md): a sliding minute (two fixed windows, the previous weighted)
// and a fixed UTC day, counted in memory on one instance behind an interface a shared store can replace.
import type { Tier } from "./store.ts";
import { DAY_MS } from "../lib/clock.ts";

export const TIER_LIMITS: Readonly<Record<Tier, { minute: number; day: number } | null>> = {
  free: { minute: 60, day: 10_000 },
  pro: { minute: 300, day: 100_000 },
  unlimited: null,
};

const MINUTE_MS = 60_000;

/** What the X-RateLimit-* headers say: the most restrictive window. */
export type RateDecision = { allowed: boolean; limit: number; remaining: number; resetS: number; retryAfterS: number };

export type OwnerRateLimiter = {
  /** Counts one request of `owner` at `now` if allowed; null for unlimited owners (no headers). */
  hit(owner: string, tier: Tier, now: number): RateDecision | null;
  /** Current use without counting (GET /dashboard/api/me). */
  usage(owner: string, tier: Tier, now: number): { minute: number; day: number; limits: { minute: number; day: number } | null };
  /** Forgets windows that no longer matter. */
  purge(now: number): number;
};

/** `latest`: the latest time a request was counted at (a clock stepped back is judged from it). */
type Counts = { minuteStart: number; minute: number; previousMinute: number; dayStart: number; day: number; latest: number };

export function createOwnerRateLimiter(maxOwners = 100_000): OwnerRateLimiter {
  const counts = new Map<string, Counts>();

  function current(owner: string, now: number): Counts {
    const minuteStart = now - (now % MINUTE_MS);
    const dayStart = now - (now % DAY_MS);
    let c = counts.get(owner);
    if (c === undefined) {
      c = { minuteStart, minute: 0, previousMinute: 0, dayStart, day: 0, latest: now };
      if (counts.size >= maxOwners) counts.delete(counts.keys().next().value!);
      counts.set(owner, c);
    }
    if (minuteStart > c.minuteStart) {
      c.previousMinute = c.minuteStart === minuteStart - MINUTE_MS ? c.minute : 0;
      c.minute = 0;
      c.minuteStart = minuteStart;
    } else if (minuteStart < c.minuteStart) {
      // The wall clock was stepped back (an NTP correction): what the sliding minute held at the latest request
      // counts in the window of now, so a step neither empties the minute nor makes a refusal last longer than one.
      c.minute = Math.ceil(slidingMinute(c, Math.max(c.latest, c.minuteStart)));
      c.previousMinute = 0;
      c.minuteStart = minuteStart;
      c.latest = now; // the limiter's time is the clock's again: a second step is judged from here
    }
    // The day only moves forward: a step back across midnight is still the day reached (its count kept).
    if (dayStart > c.dayStart) {
      c.day = 0;
      c.dayStart = dayStart;
    }
    return c;
  }

  /**
   * Requests in the sliding minute ending now: this window plus the overlapping part of the previous. The
   * product is taken before the division (whole numbers, exact), so that a weight landing on a whole request
   * is that whole number: 60 × (1 − 20/60) is 40.00000000000001, and 60 × 40,000 / 60,000 is 40.
   */
  const slidingMinute = (c: Counts, now: number) => c.minute + (c.previousMinute * Math.min(MINUTE_MS, Math.max(0, c.minuteStart + MINUTE_MS - now))) / MINUTE_MS;

  /**
   * When the sliding minute next has room for one more request (now, if it has): while the previous fixed
   * minute's weight fades within this one, or else within the next, when this one's count becomes the
   * fading part. Not the end of the fixed minute: right after it the previous minute still weighs fully.
   */
  function minuteFreesAt(c: Counts, limit: number, now: number): number {
    if (slidingMinute(c, now) + 1 <= limit) return now;
    const room = limit - 1 - c.minute; // what the fading previous minute may still weigh
    // The first whole millisecond at which the fading part has room (slidingMinute is exact there).
    if (room >= 0 && c.previousMinute > 0) return Math.max(now, c.minuteStart + Math.ceil((MINUTE_MS * (c.previousMinute - room)) / c.previousMinute));
    const next = c.minuteStart + MINUTE_MS;
    return c.minute <= limit - 1 ? next : next + Math.ceil((MINUTE_MS * (c.minute - (limit - 1))) / c.minute);
  }

  return {
    hit(owner, tier, now) {
      const limits = TIER_LIMITS[tier];
      if (limits === null) return null;
      const c = current(owner, now);
      const minuteUsed = slidingMinute(c, now);
      const minuteReset = c.minuteStart + MINUTE_MS;
      const dayReset = c.dayStart + DAY_MS;
      const allowed = minuteUsed + 1 <= limits.minute && c.day + 1 <= limits.day;
      if (allowed) {
        c.minute++;
        c.latest = Math.max(c.latest, now);
        c.day++;
      }
      const minuteRemaining = Math.max(0, Math.floor(limits.minute - slidingMinute(c, now)));
      const dayRemaining = Math.max(0, limits.day - c.day);
      // The window that limits: the one with less left (the day when both are spent, as it frees later).
      const dayLimits = dayRemaining < minuteRemaining || (dayRemaining === 0 && c.day >= limits.day);
      // A spent minute resets when it has room again; one with room left, at the end of its fixed part.
      const minuteResetMs = minuteRemaining === 0 ? minuteFreesAt(c, limits.minute, now) : minuteReset;
      const resetMs = dayLimits ? dayReset : minuteResetMs;
      const resetS = Math.ceil(resetMs / 1000);
      return {
        allowed,
        limit: dayLimits ? limits.day : limits.minute,
        remaining: dayLimits ? dayRemaining : minuteRemaining,
        resetS,
        // Counted to the whole second of the reset, so that waiting this long never arrives before it.
        retryAfterS: Math.max(1, Math.ceil((resetS * 1000 - now) / 1000)),
      };
    },
    usage(owner, tier, now) {
      const c = current(owner, now);
      return { minute: Math.ceil(slidingMinute(c, now)), day: c.day, limits: TIER_LIMITS[tier] };
    },
    purge(now) {
      let removed = 0;
      for (const [owner, c] of counts) {
        if (c.minuteStart < now - 2 * MINUTE_MS && c.dayStart < now - (now % DAY_MS)) {
          counts.delete(owner);
          removed++;
        }
      }
      return removed;
    },
  };
}
