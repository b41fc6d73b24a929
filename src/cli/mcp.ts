// `walletgate mcp`: the tools over stdio for desktop MCP hosts, on the same database and config as the
// server. WALLETGATE_TOKEN, if set, is the session token every call runs with.
import type { Config } from "../config.ts";
import { serveStdio } from "../mcp/stdio.ts";
import { createToolRegistry } from "../mcp/tools.ts";
import { parseCommandArgs } from "./args.ts";
import { withCommandDeps } from "./context.ts";

export async function mcpCommand(config: Config, args: string[]): Promise<number> {
  parseCommandArgs(args, {}, { min: 0, max: 0 });
  return withCommandDeps(
    config,
    async (deps) => {
      // 1 when calls were still running when the drain time ran out (operations.md's exit codes).
      return (await serveStdio(deps, createToolRegistry(deps), config.walletgateToken)) ? 0 : 1;
    },
    { logToStderr: true, create: true, signsSessions: true },
  );
}
