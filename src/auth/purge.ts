// The purge: expired challenges, long-expired token rows, dead links and cutoffs, stale rate windows,
// and old one-time dashboard sign-in links (also sign-in material, so they go in the same hourly pass).
import type { Deps } from "../deps.ts";
import { purgeDashboardLinks } from "../dashboard/links.ts";
import * as store from "./store.ts";
import { DAY_MS } from "../lib/clock.ts";

/** How long past its expiry a challenge is kept at least (at most its own lifetime). */
export const CHALLENGE_PURGE_MARGIN_MS = 60_000;

export async function purgeAuth(deps: Deps, stopping?: AbortSignal): Promise<store.PurgeCounts & { rateWindows: number; dashboardLinks: number }> {
  const now = deps.clock.now();
  const longestTokenMs = Math.max(deps.config.sessionTtlS, deps.config.sessionMaxAgeS) * 1000;
  // Challenges a minute past their expiry: a sign-in that arrived before it is still judged by its arrival
  // time (its NONCE answer does not depend on whether the purge ran during its signature check).
  const margin = Math.min(CHALLENGE_PURGE_MARGIN_MS, deps.config.challengeTtlMs); // short test lifetimes: a shorter margin
  const counts = await store.purgeExpired(deps.db, now - margin, now - DAY_MS, now - longestTokenMs - DAY_MS, stopping);
  return { ...counts, ...(await purgeDashboardLinks(deps)), rateWindows: deps.auth.rateLimiter.purge(now) };
}
