// `walletgate mcp`: the tools over stdio for desktop MCP hosts, on the same database and config as the
// server. WALLETGATE_TOKEN, if set, is the session token every call runs with (a binding made by
// wallet_create, wallet_connect or session_restore lasts as long as the process).
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import type { Config } from "../config.ts";
import type { Binding } from "../mcp/registry.ts";
import { createToolServer, type SessionState } from "../mcp/server.ts";
import { createToolRegistry } from "../mcp/tools.ts";
import { parseCommandArgs } from "./args.ts";
import { withCommandDeps } from "./context.ts";

/** Stands for the MCP host on this machine in fingerprints and rate limits. */
const STDIO_CLIENT = { ip: "stdio", userAgent: "walletgate-stdio" };

export async function mcpCommand(config: Config, args: string[]): Promise<number> {
  parseCommandArgs(args, {}, { min: 0, max: 0 });
  return withCommandDeps(config, async (deps) => {
    const state: SessionState = {
      binding: null,
      client: STDIO_CLIENT,
      handle: {
        id: null,
        bind: async (b) => {
          state.binding = { ...b, source: "binding" } satisfies Binding;
        },
        unbind: async () => {
          state.binding = null;
        },
      },
    };
    const server = createToolServer(deps, createToolRegistry(deps), state, config.walletgateToken);
    const { promise: closed, resolve } = Promise.withResolvers<void>();
    const transport = new StdioServerTransport();
    transport.onclose = () => resolve();
    // The host ends the session by closing stdin (or by a signal); stdout carries protocol messages only.
    process.stdin.once("end", () => resolve());
    process.once("SIGINT", () => resolve());
    process.once("SIGTERM", () => resolve());
    await server.connect(transport);
    await closed;
    await server.close();
    return 0;
  });
}
