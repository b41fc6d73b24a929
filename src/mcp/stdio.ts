// The tools over stdio (desktop MCP hosts): one McpServer on the process's stdin/stdout until the host
// closes stdin or a signal arrives. The session's binding lives as long as the process; a new process starts
// from WALLETGATE_TOKEN, else from the host's fingerprint link.
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import type { Deps } from "../deps.ts";
import type { Binding, Registry } from "./registry.ts";
import { createToolServer, fingerprintBinding, type SessionState } from "./server.ts";

/** Stands for the MCP host on this machine in fingerprints and rate limits. */
const STDIO_CLIENT = { ip: "stdio", userAgent: "walletgate-stdio" };

/** How long requests already received may take to be answered once the host closed stdin or a signal came (operations.md). */
const DRAIN_MS = 10_000;

/**
 * Serves until the host closes stdin or a signal arrives, then lets every request already received be
 * answered on stdout (up to DRAIN_MS): a call that wrote (a transfer) is answered, not dropped. False
 * when some were still unanswered at the end, or when the transport gave up on what it read.
 */
export async function serveStdio(deps: Deps, registry: Registry, token: string | null): Promise<boolean> {
  // WALLETGATE_TOKEN is where the session starts, not a header that outlives it: once a tool binds the
  // session (wallet_create, wallet_connect, session_restore) or unbinds it (wallet_disconnect), calls run as
  // that, so a token that expired or was revoked can be replaced without restarting the host.
  let startToken = token;
  // Fingerprint restore (mcp.md), as for a new session over HTTP: without a token, the wallet last
  // authenticated from this host (stdio's fixed client) is bound while its token is good, so a host that
  // restarts `walletgate mcp` keeps its custodial wallet.
  const state: SessionState = {
    binding: token === null ? await fingerprintBinding(deps, STDIO_CLIENT) : null,
    client: STDIO_CLIENT,
    handle: {
      id: null,
      bind: async (b) => {
        startToken = null;
        state.binding = { ...b, source: "binding" } satisfies Binding;
      },
      unbind: async () => {
        startToken = null;
        state.binding = null;
      },
      bound: () => state.binding,
    },
  };
  const server = createToolServer(deps, registry, state, () => startToken);
  const { promise: closed, resolve } = Promise.withResolvers<"transport" | "host">();
  const transport = new StdioServerTransport();
  transport.onclose = () => resolve("transport");
  // stdout carries protocol messages only; the host ends the session by closing stdin.
  process.stdin.once("end", () => resolve("host"));
  process.once("SIGINT", () => resolve("host"));
  process.once("SIGTERM", () => resolve("host"));
  await server.connect(transport);
  // What the transport could not read (a line that is not a message; one over its 10 MB buffer, after which
  // it closes) is said on stderr: a host would otherwise see only the server gone, with exit 0.
  let broken: unknown = null;
  const onTransportError = transport.onerror;
  transport.onerror = (err) => {
    broken = err;
    // Not the parser's own words: they quote the line (a token pasted into it, say).
    deps.log.error("stdio: a message could not be read", { error: err instanceof SyntaxError ? "the line is not JSON" : err instanceof Error ? err.message : String(err) });
    onTransportError?.(err);
  };
  // Requests read but not yet answered: counted as the transport hands them over and as answers go out.
  let unanswered = 0;
  const isRequest = (m: object) => "id" in m && "method" in m;
  const isAnswer = (m: object) => "id" in m && ("result" in m || "error" in m);
  const receive = transport.onmessage!;
  transport.onmessage = (message) => {
    if (isRequest(message)) unanswered++;
    receive(message);
  };
  const send = transport.send.bind(transport);
  transport.send = async (message) => {
    await send(message); // written to stdout (or waited for it to drain)
    if (isAnswer(message)) unanswered--;
  };
  const endedBy = await closed;
  const deadline = Date.now() + DRAIN_MS;
  while (unanswered > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 5));
  if (unanswered > 0) deps.log.warn("stdio: requests still unanswered were cut off after the drain time", { unanswered, drainMs: DRAIN_MS });
  const drained = unanswered === 0;
  // Closed by the transport itself after an error (its buffer overflowed), not by the host: a failure.
  const failed = endedBy === "transport" && broken !== null;
  await server.close();
  return drained && !failed;
}
