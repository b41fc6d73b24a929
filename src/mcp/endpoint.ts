// /mcp as the server holds it: the MCP SDK and the tools are loaded on the first request, so they cost
// nothing at start-up; the idle sweep and shutdown reach the sessions once they exist.
import type { ClientInfo } from "../auth/fingerprint.ts";
import type { Deps } from "../deps.ts";
import { importQuietly } from "../lib/quiet-import.ts";
import type { McpHttp } from "./http.ts";

export type McpEndpoint = McpHttp;

/** mcp.md: the idle sweep runs every min(60 s, MCP_SESSION_TIMEOUT_MS). */
export function sweepPeriodMs(sessionTimeoutMs: number): number {
  return Math.min(60_000, sessionTimeoutMs);
}

export function createMcpEndpoint(deps: Deps): McpEndpoint {
  let loaded: McpHttp | null = null;
  let loading: Promise<McpHttp> | null = null;
  let draining = false;
  const load = () =>
    (loading ??= (async () => {
      const [{ createMcpHttp }, { createToolRegistry }] = await importQuietly(() => Promise.all([import("./http.ts"), import("./tools.ts")]));
      loaded = createMcpHttp(deps, createToolRegistry(deps));
      if (draining) loaded.endStreams();
      return loaded;
    })());
  return {
    handle: async (request: Request, client: ClientInfo, requestId: string) => (await load()).handle(request, client, requestId),
    sweep: async () => loaded?.sweep(),
    liveSessions: () => loaded?.liveSessions() ?? 0,
    endStreams: () => {
      draining = true;
      loaded?.endStreams();
    },
    stop: async () => loaded?.stop(),
  };
}
