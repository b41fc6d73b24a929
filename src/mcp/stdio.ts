// The tools over stdio (desktop MCP hosts): one McpServer on the process's stdin/stdout until the host
// closes stdin or a signal arrives. The session's binding lives as long as the process.
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import type { Deps } from "../deps.ts";
import type { Binding, Registry } from "./registry.ts";
import { createToolServer, type SessionState } from "./server.ts";

/** Stands for the MCP host on this machine in fingerprints and rate limits. */
const STDIO_CLIENT = { ip: "stdio", userAgent: "walletgate-stdio" };

export async function serveStdio(deps: Deps, registry: Registry, token: string | null): Promise<void> {
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
  const server = createToolServer(deps, registry, state, token);
  const { promise: closed, resolve } = Promise.withResolvers<void>();
  const transport = new StdioServerTransport();
  transport.onclose = () => resolve();
  // stdout carries protocol messages only; the host ends the session by closing stdin.
  process.stdin.once("end", () => resolve());
  process.once("SIGINT", () => resolve());
  process.once("SIGTERM", () => resolve());
  await server.connect(transport);
  await closed;
  await server.close();
}
