// The per-owner limiter in isolation: what X-RateLimit-Reset and Retry-After promise is kept — a request
// at the reset time is allowed, one a second earlier is not — across the sliding minute's edges.
import { describe, expect, test } from "bun:test";
import { createOwnerRateLimiter, TIER_LIMITS } from "./rate-limit.ts";

const MINUTE = 60_000;
const T0 = Date.UTC(2026, 10, 25, 12, 0, 0); // the start of a fixed minute

/** Spends the owner's minute: `count` allowed hits at `at`. */
function spend(limiter: ReturnType<typeof createOwnerRateLimiter>, owner: string, count: number, at: number) {
  for (let i = 0; i < count; i++) expect(limiter.hit(owner, "free", at)!.allowed).toBe(true);
}

describe("X-RateLimit-Reset of a spent minute", () => {
  test("60 requests early in a minute: room comes back a second after the boundary, not at it", () => {
    const limiter = createOwnerRateLimiter();
    spend(limiter, "o", 60, T0 + 1_000);
    const refused = limiter.hit("o", "free", T0 + 2_000)!;
    expect(refused).toMatchObject({ allowed: false, limit: 60, remaining: 0 });
    // At the boundary the previous minute still weighs 60 of 60; a second later, 59.
    expect(refused.resetS).toBe((T0 + MINUTE + 1_000) / 1000);
    expect(refused.retryAfterS).toBe(59);
    expect(limiter.hit("o", "free", T0 + MINUTE)!.allowed).toBe(false);
    expect(limiter.hit("o", "free", refused.resetS * 1000)!.allowed).toBe(true);
  });

  test("requests late in the previous minute: room comes back as that minute's weight fades", () => {
    const limiter = createOwnerRateLimiter();
    spend(limiter, "o", 60, T0 + 59_000); // all in the last second of the previous minute
    const refused = limiter.hit("o", "free", T0 + MINUTE + 500)!;
    expect(refused.allowed).toBe(false);
    // 60 × (1 − elapsed/60 s) ≤ 59 once a second of the new minute has passed.
    expect(refused.resetS).toBe((T0 + MINUTE + 1_000) / 1000);
    expect(limiter.hit("o", "free", refused.resetS * 1000)!.allowed).toBe(true);
  });

  test("whatever the pattern, a request at the reset time is allowed and one a second before it is not", () => {
    let seed = 7;
    const random = () => ((seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31) / 2 ** 31);
    for (let round = 0; round < 300; round++) {
      const limiter = createOwnerRateLimiter();
      let now = T0 + Math.floor(random() * MINUTE);
      let refused = null;
      while (refused === null) {
        const decision = limiter.hit("o", "free", now)!;
        if (!decision.allowed) refused = decision;
        else now += random() < 0.7 ? Math.floor(random() * 200) : Math.floor(random() * 5_000); // bursts and pauses
      }
      const resetMs = refused.resetS * 1000;
      expect(refused.retryAfterS).toBe(Math.max(1, Math.ceil((resetMs - now) / 1000)));
      expect(now + refused.retryAfterS * 1000).toBeGreaterThanOrEqual(resetMs); // waiting Retry-After is enough
      // A second before the reset it is still refused (a refused request changes no count).
      if (resetMs - 1000 > now) expect(limiter.hit("o", "free", resetMs - 1000)!.allowed).toBe(false);
      expect(limiter.hit("o", "free", resetMs)!.allowed).toBe(true);
    }
  });

  test("a spent day resets at the next UTC midnight, whatever the minute says", () => {
    const limiter = createOwnerRateLimiter();
    const day = TIER_LIMITS.free!.day;
    let now = T0;
    for (let i = 0; i < day; i++) {
      if (!limiter.hit("o", "free", now)!.allowed) throw new Error(`refused at ${i}`);
      if (i % 50 === 49) now += 2 * MINUTE; // stay under the minute's 60, the previous minute empty
    }
    const refused = limiter.hit("o", "free", now)!;
    expect(refused).toMatchObject({ allowed: false, limit: day, remaining: 0, resetS: Date.UTC(2026, 10, 26) / 1000 });
  });
});


/** Spends the free tier's day at T0's pace (50 every two minutes), ending with a full minute: the day and the minute spent together. */
function spendDay(limiter: ReturnType<typeof createOwnerRateLimiter>, owner: string): number {
  const day = TIER_LIMITS.free!.day;
  let now = T0;
  for (let i = 0; i < day - 60; i++) {
    if (!limiter.hit(owner, "free", now)!.allowed) throw new Error(`refused at ${i}`);
    if (i % 50 === 49) now += 2 * MINUTE;
  }
  now += 2 * MINUTE;
  spend(limiter, owner, 60, now);
  return now;
}

describe("a spent day", () => {
  test("with the minute spent as well, the headers describe the day: its limit, and a reset at the next UTC midnight", () => {
    const limiter = createOwnerRateLimiter();
    const now = spendDay(limiter, "o");
    const refused = limiter.hit("o", "free", now)!;
    const midnight = Date.UTC(2026, 10, 26);
    expect(refused).toMatchObject({ allowed: false, limit: TIER_LIMITS.free!.day, remaining: 0, resetS: midnight / 1000 });
    expect(refused.retryAfterS).toBe((midnight - now) / 1000); // not a minute: retrying then would be refused again
  });

  test("survives the purge: an owner idle for minutes on the same UTC day is still refused afterwards", () => {
    const limiter = createOwnerRateLimiter();
    const now = spendDay(limiter, "o") + 5 * MINUTE;
    limiter.purge(now);
    expect(limiter.hit("o", "free", now)!.allowed).toBe(false);
    expect(limiter.usage("o", "free", now).day).toBe(TIER_LIMITS.free!.day);
  });
});

describe("the sliding minute's arithmetic", () => {
  test("is exact where the previous minute's weight lands on a whole request: room then is room, and a refusal's reset comes after it", () => {
    const limiter = createOwnerRateLimiter();
    spend(limiter, "o", 60, T0 - MINUTE + 500); // a full previous minute
    for (let k = 1; k <= 19; k++) expect(limiter.hit("o", "free", T0 + k * 1_000 + 500)!.allowed).toBe(true);
    // Just before T0 + 20 s the previous minute still weighs more than 40: refused, to be retried at T0 + 20 s.
    const early = limiter.hit("o", "free", T0 + 19_999)!;
    expect(early).toMatchObject({ allowed: false, remaining: 0, resetS: (T0 + 20_000) / 1000, retryAfterS: 1 });
    // At T0 + 20 s it weighs 40 (19 + 40 = 59 < 60), not 40.00000000000001: allowed, as the reset said.
    expect(limiter.hit("o", "free", T0 + 20_000)!).toMatchObject({ allowed: true, remaining: 0 });
    const refused = limiter.hit("o", "free", T0 + 20_000)!;
    expect(refused.allowed).toBe(false);
    expect(refused.resetS * 1000).toBeGreaterThan(T0 + 20_000);
    expect(limiter.hit("o", "free", refused.resetS * 1000)!.allowed).toBe(true);
  });
});

describe("a wall clock stepped back (an NTP correction)", () => {
  test("does not empty the minute or the day: the windows only move forward", () => {
    const limiter = createOwnerRateLimiter();
    spend(limiter, "o", 60, T0 + 500);
    expect(limiter.hit("o", "free", T0 - 1_000)!.allowed).toBe(false); // a second back, into the previous minute
    expect(limiter.hit("o", "free", T0 - 3_600_000)!.allowed).toBe(false); // an hour back
    expect(limiter.usage("o", "free", T0 - 3_600_000)).toMatchObject({ minute: 60, day: 60 });
    // A refusal lasts a minute at most, not the step: room comes back as the minute after it fades in.
    const refused = limiter.hit("o", "free", T0 - 3_600_000 + 500)!;
    expect(refused.allowed).toBe(false);
    expect(refused.retryAfterS).toBeLessThanOrEqual(61);
    expect(limiter.hit("o", "free", T0 - 3_600_000 + refused.retryAfterS * 1000 + 500)!.allowed).toBe(true);
  });

  test("a step back after two busy minutes refuses for a minute at most: what the sliding minute held is kept, not both minutes", () => {
    const limiter = createOwnerRateLimiter();
    const start = T0 - MINUTE;
    let allowed = 0;
    for (let t = start; t < T0 + MINUTE; t += 500) if (limiter.hit("o", "free", t)!.allowed) allowed++;
    expect(allowed).toBeGreaterThan(100); // a sliding minute lets about two fixed minutes' worth through
    const back = T0 + MINUTE - 119_000;
    const refused = limiter.hit("o", "free", back)!;
    if (!refused.allowed) expect(refused.retryAfterS).toBeLessThanOrEqual(61);
    expect(limiter.usage("o", "free", back).minute).toBeLessThanOrEqual(60);
  });

  test("steps back one after another never lift the limit", () => {
    const limiter = createOwnerRateLimiter();
    limiter.hit("o", "free", T0 + 3_600_000); // a step forward first
    for (let t = T0; t <= T0 + 121_000; t += 1_000) limiter.hit("o", "free", t); // back, one a second
    let allowed = 0;
    for (let t = T0 + 118_500; t < T0 + 178_500; t += 10) if (limiter.hit("o", "free", t)!.allowed) allowed++; // back again, flooding
    expect(allowed).toBeLessThanOrEqual(60);
    expect(limiter.usage("o", "free", T0 + 178_500).minute).toBeGreaterThanOrEqual(0);
  });

  test("a step back across a minute's edge keeps the last minute's requests, and one across midnight keeps the day's", () => {
    const limiter = createOwnerRateLimiter();
    spend(limiter, "o", 60, T0 - 500); // the end of the previous minute
    expect(limiter.hit("o", "free", T0 + 500)!.allowed).toBe(false);
    expect(limiter.hit("o", "free", T0 - 200)!.allowed).toBe(false); // stepped back into the previous minute
    expect(limiter.hit("o", "free", T0 + 300)!.allowed).toBe(false);
    const day = Date.UTC(2026, 10, 26);
    const spender = createOwnerRateLimiter();
    for (let i = 0; i < 10_000; i++) expect(spender.hit("d", "free", day + 3_600_000 + i * 7_000)!.allowed).toBe(true); // 60 a minute at most
    const evening = day + 3_600_000 + 10_000 * 7_000;
    expect(spender.hit("d", "free", evening + MINUTE)!.allowed).toBe(false); // the day is spent
    expect(spender.hit("d", "free", day - 1_000)!.allowed).toBe(false); // back across midnight: still spent
    expect(spender.hit("d", "free", evening + 2 * MINUTE)!.allowed).toBe(false); // and when the day comes back
  });
});
