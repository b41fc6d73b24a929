// The purge's MCP part: session records that cannot be rebuilt any more (ended, idle past any token's life, or
// never bound and idle for two session timeouts).
import type { Deps } from "../deps.ts";
import { purgeSessions } from "./store.ts";
import { DAY_MS } from "../lib/clock.ts";

export async function purgeMcpSessions(deps: Deps): Promise<{ mcpSessions: number }> {
  const now = deps.clock.now();
  const longestTokenMs = Math.max(deps.config.sessionTtlS, deps.config.sessionMaxAgeS) * 1000;
  // A session that never bound a wallet holds nothing worth rebuilding for long.
  const unboundIdleBefore = now - 2 * deps.config.mcpSessionTimeoutMs;
  return { mcpSessions: await purgeSessions(deps.db, now - DAY_MS, now - longestTokenMs - DAY_MS, unboundIdleBefore) };
}
