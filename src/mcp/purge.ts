// The purge's MCP part: session records that cannot be rebuilt any more (ended, or idle past any token's
// life), and the least recently active past their caps: UNBOUND_RECORDS_KEPT of those without a wallet,
// BOUND_RECORDS_KEPT of those with one.
import type { Deps } from "../deps.ts";
import { purgeSessions } from "./store.ts";
import { DAY_MS } from "../lib/clock.ts";

/**
 * Records of sessions without a wallet kept at most (~200 bytes each): opening one needs no sign-in, so
 * their number is bounded, not their age; a client idle for hours is rebuilt, not answered 404.
 */
export const UNBOUND_RECORDS_KEPT = 100_000;

/**
 * Records of sessions bound to a wallet kept at most (~0.4 KB each with their indexes): after one sign-in,
 * fingerprint restore binds every new session its client opens, so they are as cheap to make as unbound
 * ones. A deployment with more bound clients idle for over two hours than this loses the longest idle.
 */
export const BOUND_RECORDS_KEPT = 200_000;

export async function purgeMcpSessions(
  deps: Deps,
  { unboundKept = UNBOUND_RECORDS_KEPT, boundKept = BOUND_RECORDS_KEPT, stopping }: { unboundKept?: number; boundKept?: number; stopping?: AbortSignal } = {},
): Promise<{ mcpSessions: number }> {
  const now = deps.clock.now();
  const longestTokenMs = Math.max(deps.config.sessionTtlS, deps.config.sessionMaxAgeS) * 1000;
  // Only records idle for two session timeouts and a sweep's period count toward the cap: the sweep drops a
  // session from memory within a timeout and a period of going idle, so no server holds such a one.
  const cappableBefore = now - 2 * deps.config.mcpSessionTimeoutMs - 60_000;
  return { mcpSessions: await purgeSessions(deps.db, now - DAY_MS, now - longestTokenMs - DAY_MS, { unboundKept, boundKept, cappableBefore }, stopping) };
}
