// The purge: expired challenges, long-expired token rows, dead links and cutoffs, stale rate windows,
// and old one-time dashboard sign-in links (also sign-in material, so they go in the same hourly pass).
import type { Deps } from "../deps.ts";
import { purgeDashboardLinks } from "../dashboard/links.ts";
import * as store from "./store.ts";
import { DAY_MS } from "../lib/clock.ts";

export async function purgeAuth(deps: Deps, stopping?: AbortSignal): Promise<store.PurgeCounts & { rateWindows: number; dashboardLinks: number }> {
  const now = deps.clock.now();
  const longestTokenMs = Math.max(deps.config.sessionTtlS, deps.config.sessionMaxAgeS) * 1000;
  const counts = await store.purgeExpired(deps.db, now, now - DAY_MS, now - longestTokenMs - DAY_MS, stopping);
  return { ...counts, ...(await purgeDashboardLinks(deps)), rateWindows: deps.auth.rateLimiter.purge(now) };
}
