// One McpServer over the tool registry: tools/list from the registry's schemas, tools/call answering
// the envelope as structuredContent and as JSON text, isError = !success (mcp.md "Results").
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { CallToolRequestSchema, CancelledNotificationSchema, ErrorCode, ListToolsRequestSchema, McpError, type CallToolRequest } from "@modelcontextprotocol/sdk/types.js";
import { z } from "zod";
import { fingerprintUsable, type ClientInfo } from "../auth/fingerprint.ts";
import { findLinkedSession } from "../auth/sessions.ts";
import type { Deps } from "../deps.ts";
import pkg from "../../package.json" with { type: "json" };
import { resolveCaller } from "./caller.ts";
import { firstCharacters } from "../lib/text.ts";
import type { Binding, Envelope, Registry, ToolSession } from "./registry.ts";

/** What a tool server needs to know about its MCP session, read at each call. */
export type SessionState = {
  binding: Binding | null;
  client: ClientInfo;
  readonly handle: ToolSession;
};

const INSTRUCTIONS =
  "walletgate: Solana wallet identity, sessions and payments. Start with wallet_create (a new custodial wallet, " +
  "signed in at once) or session_auth + wallet_connect (your own wallet signs a challenge), or session_restore with " +
  "a token from earlier. Every tool answers {success, data} or {success: false, error, code}.";

/**
 * What our tools/call handler is registered under. The SDK's Server checks every tools/call request against
 * its own CallToolRequestSchema before the handler runs, and answers a malformed one (no `name`, `arguments`
 * not an object) with InvalidParams (-32602); the schema given here is checked first, and its failure would
 * be answered as an internal error (-32603) with the schema library's dump. So it checks only the method.
 */
const ToolsCall = z.looseObject({ method: z.literal("tools/call") });

/** A schema library's failure: its issues, each with the path of the member it names. */
type SchemaFailure = { issues: readonly { path: readonly PropertyKey[]; message: string }[] };

function isSchemaFailure(err: unknown): err is SchemaFailure {
  return err instanceof Error && Array.isArray((err as { issues?: unknown }).issues);
}

/** What InvalidParams (-32602) says of a request: its first wrong member, in place of the schema library's dump. */
export function invalidParamsMessage(method: string, failure: SchemaFailure): string {
  const first = failure.issues[0];
  const where = first === undefined || first.path.length === 0 ? "the request" : first.path.map(String).join(".");
  return `Invalid params for ${firstCharacters(method, 100)}: ${where}: ${first?.message ?? "not as the method takes them"}`;
}

/**
 * The SDK checks each request of a method it knows (initialize, ping, tools/list, ...) against that method's
 * schema, and answers one that fails as an internal error (-32603) carrying the schema library's whole dump
 * (modelcontextprotocol/typescript-sdk#2284): the caller is told the server broke. Every handler registered
 * by the time this runs answers that failure as InvalidParams instead.
 */
function answerSchemaFailuresAsInvalidParams(server: McpServer): void {
  type Handler = (request: { method: string }, extra: unknown) => Promise<unknown>;
  const handlers = (server.server as unknown as { _requestHandlers: Map<string, Handler> })._requestHandlers;
  for (const [method, handler] of handlers) {
    handlers.set(method, async (request, extra) => {
      try {
        return await handler(request, extra);
      } catch (err) {
        if (isSchemaFailure(err)) throw new McpError(ErrorCode.InvalidParams, invalidParamsMessage(method, err));
        // The SDK's own tools/call check answers InvalidParams with the same dump in its message: named too.
        const toolsCall = method === "tools/call" && err instanceof McpError && err.code === ErrorCode.InvalidParams ? CallToolRequestSchema.safeParse(request) : null;
        throw toolsCall !== null && !toolsCall.success ? new McpError(ErrorCode.InvalidParams, invalidParamsMessage(method, toolsCall.error)) : err;
      }
    });
  }
}

export function toolResult(envelope: Envelope) {
  return { content: [{ type: "text" as const, text: JSON.stringify(envelope) }], structuredContent: envelope, isError: !envelope.success };
}

/**
 * Fingerprint restore (mcp.md), for a new session over either transport: bound to the wallet last
 * authenticated from `client` while that token is good; null when restore is off or there is none.
 */
export async function fingerprintBinding(deps: Deps, client: ClientInfo): Promise<Binding | null> {
  if (!fingerprintUsable(deps, client)) return null;
  const linked = await findLinkedSession(deps, client);
  return linked === null ? null : { ...linked, source: "fingerprint" };
}

/** What /mcp over HTTP tells the tool handlers of each request, as the transport's `authInfo.extra`. */
export type HttpCallInfo = { bearer: string | null; requestId: string | undefined };

/**
 * The tools on one MCP session. A call runs as the Bearer token passed with its request (HTTP: the
 * Authorization header), else as `defaultBearer()` (stdio: WALLETGATE_TOKEN, until the session is bound or
 * unbound), else as the session's binding.
 */
export function createToolServer(deps: Deps, registry: Registry, state: SessionState, defaultBearer: () => string | null = () => null): McpServer {
  const server = new McpServer({ name: "walletgate", version: pkg.version }, { capabilities: { tools: {} }, instructions: INSTRUCTIONS });
  server.server.setRequestHandler(ListToolsRequestSchema, async () => ({ tools: [...registry.listing] }));
  // Cancellation is taken and not acted on (MCP lets a receiver go on): a tool may have sent a payment by
  // then, so every request is answered with what it did. The SDK's own handler would drop the answer, and
  // its HTTP transport then kept the request's entries, and the POST open, for the rest of the session.
  server.server.setNotificationHandler(CancelledNotificationSchema, () => undefined);
  server.server.setRequestHandler(ToolsCall, async (raw, extra) => {
    const request = raw as unknown as CallToolRequest; // as the SDK's check (above) found it
    // An unknown tool is a protocol error over MCP (the MCP spec's "Unknown tools"), not a tool's failure;
    // the plain envelope answers it 404 NOT_FOUND (registry.call).
    if (!registry.has(request.params.name)) {
      throw new McpError(ErrorCode.InvalidParams, `Unknown tool: ${firstCharacters(request.params.name, 100)}; tools/list names them`);
    }
    // Over HTTP, authInfo.extra carries the request's bearer token (null when none) and its id (http.ts).
    const http = extra.authInfo?.extra as HttpCallInfo | undefined;
    const bearer = http?.bearer ?? defaultBearer();
    const caller = () => resolveCaller(deps, bearer, state.binding);
    const ctx = { deps, caller, session: state.handle, client: state.client, requestId: http?.requestId };
    const envelope = await registry.call(ctx, request.params.name, request.params.arguments ?? {});
    return toolResult(envelope);
  });
  answerSchemaFailuresAsInvalidParams(server);
  return server;
}
