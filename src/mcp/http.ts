// /mcp over HTTP: MCP Streamable HTTP (one transport and McpServer per Mcp-Session-Id, swept when
// idle, rebuilt under the same id from its record, ended by DELETE) and the plain JSON envelope.
import type { WebStandardStreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js";
import { InitializeRequestSchema, JSONRPCMessageSchema, LATEST_PROTOCOL_VERSION, SUPPORTED_PROTOCOL_VERSIONS } from "@modelcontextprotocol/sdk/types.js";
import type { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { fingerprintUsable, storedFingerprint, type ClientInfo } from "../auth/fingerprint.ts";
import type { Deps } from "../deps.ts";
import { AppError, ERROR_STATUS, errorText, fieldError } from "../errors.ts";
import { bearerToken } from "../lib/bearer.ts";
import { jsonNestsDeeperThan } from "../lib/json.ts";
import { newUuid } from "../lib/ids.ts";
import { sha256Hex } from "../lib/hash.ts";
import { mcpInitializeHits } from "../auth/rate-limit.ts";
import type { AuthInfo } from "@modelcontextprotocol/sdk/server/auth/types.js";
import { resolveCaller } from "./caller.ts";
import { failure, type Binding, type Registry, type ToolSession } from "./registry.ts";
import { createToolServer, fingerprintBinding, invalidParamsMessage, type HttpCallInfo, type SessionState } from "./server.ts";
import * as store from "./store.ts";
import { jsonResponseTransport } from "./transport.ts";
import { jsonRpcError } from "./json-rpc.ts";

type LiveSession = SessionState & {
  id: string;
  /** The record's key: SHA-256 of the id (an id works like a password; it is never stored or logged). */
  recordKey: string;
  transport: WebStandardStreamableHTTPServerTransport;
  server: McpServer;
  lastActivity: number;
  /** True while the session is being initialized (or rebuilt): its client does not have its answer yet. */
  initializing: boolean;
  /**
   * JSON-RPC ids of requests handed to the transport and not answered yet. The SDK's transport pairs an
   * answer with its request by id alone, so a second request under an id in use is refused before it
   * reaches the transport (it would take the first one's place, and the first would never be answered).
   */
  pendingIds: Set<string | number>;
  /**
   * The HTTP exchanges in progress, each until it ends, whether answered, failed or left by its client (and
   * then ended by settleAbandoned).
   */
  exchanges: Set<Exchange>;
};

/** A session initializing or with exchanges in progress is never swept or evicted. */
const busy = (live: LiveSession): boolean => live.initializing || live.exchanges.size > 0;

/**
 * An HTTP exchange in progress: ended by the transport's answer or, once its client has left, by `end`.
 * Whether the client left is looked at only when a session's work decides something (the sweep, making
 * room): `request.signal` made per request cost ~8 % of a tool call, and a signal made after the client
 * left reports it as aborted all the same.
 */
type Exchange = { request: Request; end(response: Response): void };

/** A refused open: every session in memory is busy (in flight or initializing) and MCP_MAX_SESSIONS are. */
const BUSY = "busy";

export type McpHttp = {
  /** `requestId`: the HTTP request's id, under which an unexpected tool failure is logged. */
  handle(request: Request, client: ClientInfo, requestId?: string): Promise<Response>;
  /** Drops sessions idle longer than MCP_SESSION_TIMEOUT_MS from memory (their records stay). */
  sweep(): Promise<void>;
  liveSessions(): number;
  /**
   * Shutdown has begun: every session's event stream (its GET /mcp, open until the client leaves) ends
   * now, and no new one is opened, so that they do not hold the shutdown for its whole grace period.
   * Requests in flight are still answered.
   */
  endStreams(): void;
  stop(): Promise<void>;
};

/**
 * How deep a /mcp body may nest arrays and objects: twice the REST routes' MAX_BODY_DEPTH, for the JSON-RPC
 * envelope around a tool's arguments (a batch, params, arguments, `_meta`) and clients' capability objects.
 */
export const MCP_MAX_BODY_DEPTH = 64;

/** A single JSON-RPC message's id where an answer may carry it (a string or a number); else null. */
function messageId(message: unknown): string | number | null {
  const id = typeof message === "object" && message !== null && !Array.isArray(message) ? (message as { id?: unknown }).id : undefined;
  return typeof id === "string" || typeof id === "number" ? id : null;
}

/** The answer when MCP_MAX_SESSIONS sessions are in memory and none of them may leave it now. */
function sessionsBusy(): Response {
  return jsonRpcError(503, -32000, "Service Unavailable: every MCP session is busy; retry shortly", { "retry-after": "1" });
}

/** The answer to a GET (a new event stream) once shutdown has begun. */
function shuttingDown(): Response {
  return jsonRpcError(503, -32000, "Service Unavailable: the server is shutting down");
}

/**
 * The messages one POST may batch (MCP 2025-03-26; the SDK takes 100). The answers to a batch are held
 * whole until the last is ready, so a batch multiplies what one request can make the server hold: 100
 * searches made a 1 GB answer. A larger batch is refused before anything of it runs (an answer replaced
 * after its tool ran could hide a payment made). Ten at most: about ten times one answer's size.
 */
export const MAX_BATCH_MESSAGES = 10;

/**
 * The ids of the JSON-RPC requests in a POST body, a message or a batch (notifications and responses
 * carry none), or the answer refusing it: an id used twice in the batch, or already in use in the session.
 * The refusal's `id` is null: a reply under the id would be taken by the client for the answer to the
 * request still in flight under it.
 */
function requestIds(body: unknown, inUse: Set<string | number>): (string | number)[] | Response {
  if (Array.isArray(body) && body.length > MAX_BATCH_MESSAGES) {
    return jsonRpcError(400, -32600, `Invalid Request: a batch holds at most ${MAX_BATCH_MESSAGES} messages; nothing of this one was run`);
  }
  const ids: (string | number)[] = [];
  for (const message of Array.isArray(body) ? body : [body]) {
    if (typeof message !== "object" || message === null || typeof (message as { method?: unknown }).method !== "string") continue;
    const id = (message as { id?: unknown }).id;
    if (typeof id !== "string" && typeof id !== "number") continue;
    if (inUse.has(id)) return jsonRpcError(400, -32600, `Invalid Request: JSON-RPC id ${JSON.stringify(id)} is in use in this session by a request not answered yet`);
    if (ids.includes(id)) return jsonRpcError(400, -32600, `Invalid Request: JSON-RPC id ${JSON.stringify(id)} is used twice in this batch`);
    ids.push(id);
  }
  return ids;
}

/**
 * A POST body that is valid JSON but no JSON-RPC 2.0 message, nor a batch of them: Invalid Request (-32600),
 * under the message's id where it is one message with one (the SDK's transport would call it a Parse error).
 * A batch with one such message is refused whole, nothing of it run, as one reusing an id is (requestIds).
 */
function notJsonRpc(body: unknown): Response | null {
  if (Array.isArray(body) && body.length > MAX_BATCH_MESSAGES) return null; // refused whole, unread (requestIds)
  for (const message of Array.isArray(body) ? body : [body]) {
    if (JSONRPCMessageSchema.safeParse(message).success) continue;
    const { params } = typeof message === "object" && message !== null ? (message as { params?: unknown }) : {};
    // MCP's params are an object: said as such, the likeliest mistake.
    const paramsWrong = params !== undefined && (typeof params !== "object" || params === null || Array.isArray(params));
    const why = paramsWrong ? "params must be an object" : 'not a JSON-RPC 2.0 message (jsonrpc "2.0", a string method or a result or error, an id that is a string or a number)';
    return jsonRpcError(400, -32600, `Invalid Request: ${why}`, {}, { id: Array.isArray(body) ? null : messageId(message) });
  }
  return null;
}

/**
 * Ends the exchanges of `live` whose client has left (an answer still to come, as for a call waiting on a
 * stalled node, would keep the session busy until then), and takes them out of the session at once.
 */
function settleAbandoned(live: LiveSession): void {
  for (const exchange of live.exchanges) {
    if (!exchange.request.signal.aborted) continue;
    live.exchanges.delete(exchange);
    exchange.end(jsonRpcError(499, -32000, "Client Closed Request: the client left before the answer"));
  }
}

/**
 * The body of a plain-envelope call: a JSON object without `jsonrpc` (every JSON-RPC message has it), meant
 * to be `{tool, params?}`; what else it holds is refused by envelopeCall, so a misspelt member is not ignored.
 */
function isEnvelopeCall(body: unknown): body is { tool?: unknown; params?: unknown } {
  return typeof body === "object" && body !== null && !Array.isArray(body) && !("jsonrpc" in body);
}

const ENVELOPE_MEMBERS = new Set(["tool", "params"]);

export function createMcpHttp(deps: Deps, registry: Registry): McpHttp {
  const sessions = new Map<string, LiveSession>();
  let draining = false;
  const rebuilding = new Map<string, Promise<LiveSession | typeof BUSY | null>>();
  /** Places under MCP_MAX_SESSIONS taken by sessions being opened, not yet in `sessions`. */
  let reserved = 0;
  const url = new URL("/mcp", deps.baseUrl).href;
  /** The only browser origin allowed to call tools (DNS rebinding). */
  const ownOrigin = new URL(deps.baseUrl).origin;
  /** The refusal of a browser page of another origin, saying which one is accepted and how to change it. */
  const originRefused = (origin: string) =>
    `Invalid Origin header: ${origin}; only pages of ${ownOrigin} may call /mcp from a browser (BASE_URL: set it to the address browsers use)`;

  function toolSession(live: { id: string; recordKey: string; binding: Binding | null }): ToolSession {
    return {
      id: live.id,
      bind: async (b) => {
        live.binding = { ...b, source: "binding" };
        await store.setBinding(deps.db, live.recordKey, { wallet: b.walletAddress, sessionId: b.sessionId, jti: b.jti, tokenExpiresAtS: b.tokenExpiresAtS, boundBy: "binding" }, deps.clock.now());
      },
      unbind: async () => {
        live.binding = null;
        await store.setBinding(deps.db, live.recordKey, null, deps.clock.now());
      },
      bound: () => live.binding,
      tokenWinsOverBinding: true,
    };
  }

  /**
   * Takes a place under MCP_MAX_SESSIONS for a session about to open: the least recently active idle
   * sessions leave memory to make it (returned, to be closed; their records stay). Null when there is none
   * to take: every session in memory has work in flight or is itself being initialized. Synchronous, so
   * that concurrent opens neither pick the same session nor pass the cap together.
   */
  function takeRoom(): LiveSession[] | null {
    const leaving: LiveSession[] = [];
    while (sessions.size + reserved >= deps.config.mcpMaxSessions) {
      let oldest: LiveSession | null = null;
      for (const live of sessions.values()) {
        settleAbandoned(live);
        if (!busy(live) && (oldest === null || live.lastActivity < oldest.lastActivity)) oldest = live;
      }
      if (oldest === null) break;
      sessions.delete(oldest.id);
      leaving.push(oldest);
    }
    if (sessions.size + reserved >= deps.config.mcpMaxSessions) {
      // None left to evict: the ones taken out above are put back (none of their state has changed).
      for (const live of leaving) sessions.set(live.id, live);
      return null;
    }
    reserved++;
    return leaving;
  }

  async function evict(leaving: LiveSession[]): Promise<void> {
    if (leaving.length === 0) return;
    await store.touchSessions(deps.db, new Map(leaving.map((live) => [live.recordKey, live.lastActivity])));
    await Promise.all(leaving.map((live) => live.server.close()));
  }

  /**
   * A transport and server for `id`, or BUSY when there is no room for it. The session is initializing
   * (never evicted or swept) until `opened` is called, when its initialize (or rebuild) is over.
   */
  async function open(id: string, request: ClientInfo, binding: Binding | null, onInitialized: (protocolVersion: string) => Promise<void>) {
    // Read now, while the request that opens the session is in flight: its address is read on demand.
    const client: ClientInfo = { ip: request.ip, userAgent: request.userAgent, behindUntrustedProxy: request.behindUntrustedProxy === true };
    const leaving = takeRoom();
    if (leaving === null) return BUSY;
    let holdsPlace = true;
    const releasePlace = () => {
      if (holdsPlace) reserved--;
      holdsPlace = false;
    };
    try {
      await evict(leaving);
      return await openTransport(id, client, binding, onInitialized, releasePlace);
    } catch (err) {
      releasePlace();
      throw err;
    }
  }

  async function openTransport(id: string, client: ClientInfo, binding: Binding | null, onInitialized: (protocolVersion: string) => Promise<void>, releasePlace: () => void) {
    const recordKey = sha256Hex(id);
    let protocolVersion = LATEST_PROTOCOL_VERSION;
    const transport = jsonResponseTransport({
      sessionIdGenerator: () => id,
      // DNS rebinding: a browser page on another origin that reaches this port is refused (clients
      // outside browsers send no Origin).
      enableDnsRebindingProtection: true,
      allowedOrigins: [ownOrigin],
      onsessioninitialized: async () => {
        sessions.set(id, live);
        releasePlace(); // the place is now the session's own
        await onInitialized(protocolVersion);
      },
      onsessionclosed: async () => {
        sessions.delete(id);
        await store.endSession(deps.db, recordKey, deps.clock.now());
      },
    });
    // Initializing: another open must not evict it before its client has its answer.
    const state: Omit<LiveSession, "server" | "handle"> = {
      id,
      recordKey,
      binding,
      client,
      lastActivity: deps.clock.now(),
      initializing: true,
      pendingIds: new Set(),
      exchanges: new Set(),
      transport,
    };
    const handle = toolSession(state);
    const live: LiveSession = Object.assign(state, { handle, server: null as unknown as McpServer });
    live.server = createToolServer(deps, registry, live);
    await live.server.connect(transport);
    const opened = () => {
      releasePlace(); // refused before it was initialized: the place is free again
      live.initializing = false;
      live.lastActivity = deps.clock.now();
    };
    return { live, opened, setProtocolVersion: (v: string) => (protocolVersion = v) };
  }

  async function initialize(request: Request, body: unknown, client: ClientInfo, authInfo: AuthInfo): Promise<Response> {
    // A browser page of another origin is refused (as the transport would refuse it) before it counts against
    // its network's initialize limit or takes a session place: any page open on that machine could otherwise
    // spend the limit of the MCP hosts beside it.
    const origin = request.headers.get("origin");
    if (origin && origin !== ownOrigin) return jsonRpcError(403, -32000, originRefused(origin));
    try {
      deps.auth.rateLimiter.consume(mcpInitializeHits(client.ip), deps.clock.now());
    } catch (err) {
      if (!(err instanceof AppError)) throw err;
      // The catalogue's code and retryAfter (spec README) ride in the JSON-RPC error's data.
      const retryAfter = err.extra.retryAfter ?? 1;
      return jsonRpcError(429, -32000, err.message, { "retry-after": String(retryAfter) }, { data: { code: err.code, retryAfter }, id: messageId(body) });
    }
    const id = newUuid(deps.random);
    const fingerprint = fingerprintUsable(deps, client) ? storedFingerprint(deps, client) : null;
    const binding = await fingerprintBinding(deps, client);
    const opening = await open(id, client, binding, async (protocolVersion) => {
      const now = deps.clock.now();
      await store.insertSession(deps.db, {
        id: sha256Hex(id),
        createdAt: now,
        lastActivityAt: now,
        protocolVersion,
        fingerprint,
        wallet: binding?.walletAddress ?? null,
        sessionId: binding?.sessionId ?? null,
        jti: binding?.jti ?? null,
        tokenExpiresAtS: binding?.tokenExpiresAtS ?? null,
        boundBy: binding === null ? null : "fingerprint",
      });
    });
    if (opening === BUSY) return sessionsBusy();
    const { live, opened, setProtocolVersion } = opening;
    const requested = (body as { params?: { protocolVersion?: string } }).params?.protocolVersion;
    setProtocolVersion(requested !== undefined && SUPPORTED_PROTOCOL_VERSIONS.includes(requested) ? requested : LATEST_PROTOCOL_VERSION);
    // Not raced with the client leaving: the SDK answers initialize itself, and the session must not be
    // evictable while its record is being written.
    try {
      const response = await live.transport.handleRequest(request, { parsedBody: body, authInfo });
      if (!sessions.has(id)) await live.server.close(); // the initialize was refused
      return response;
    } finally {
      opened();
    }
  }

  /** A session swept from memory, rebuilt under its id by replaying initialize / initialized. */
  async function rebuild(id: string, client: ClientInfo): Promise<LiveSession | typeof BUSY | null> {
    const row = await store.findSession(deps.db, sha256Hex(id));
    if (row === null || row.endedAt !== null) return null;
    const binding: Binding | null =
      row.wallet === null || row.jti === null || row.sessionId === null
        ? null
        : { walletAddress: row.wallet, sessionId: row.sessionId, jti: row.jti, tokenExpiresAtS: row.tokenExpiresAtS, source: row.boundBy ?? "binding" };
    const opening = await open(id, client, binding, async () => undefined);
    if (opening === BUSY) return BUSY;
    const { live, opened } = opening;
    try {
      await replay(id, row.protocolVersion, live);
    } finally {
      opened();
    }
    deps.log.debug("mcp session rebuilt", { mcpSessionKey: sha256Hex(id).slice(0, 12) });
    return sessions.get(id) ?? null;
  }

  /** initialize / initialized with the protocol version the session negotiated, into its new transport. */
  async function replay(id: string, protocolVersion: string, live: LiveSession): Promise<void> {
    const headers = { "content-type": "application/json", accept: "application/json, text/event-stream" };
    const initialize = {
      jsonrpc: "2.0",
      id: "walletgate-rebuild",
      method: "initialize",
      params: { protocolVersion, capabilities: {}, clientInfo: { name: "walletgate-rebuild", version: "1" } },
    };
    const initialized = { jsonrpc: "2.0", method: "notifications/initialized" };
    await live.transport.handleRequest(new Request(url, { method: "POST", headers, body: "" }), { parsedBody: initialize });
    await live.transport.handleRequest(
      new Request(url, { method: "POST", headers: { ...headers, "mcp-session-id": id, "mcp-protocol-version": protocolVersion }, body: "" }),
      { parsedBody: initialized },
    );
  }

  async function liveSession(id: string, client: ClientInfo): Promise<LiveSession | typeof BUSY | null> {
    const live = sessions.get(id);
    if (live !== undefined) return live;
    let pending = rebuilding.get(id);
    if (pending === undefined) {
      pending = rebuild(id, client).finally(() => rebuilding.delete(id));
      rebuilding.set(id, pending);
    }
    return pending;
  }

  /**
   * GET /mcp for a session swept or evicted from memory while MCP_MAX_SESSIONS are in it: no event stream,
   * which is not a reason to evict another session (405, which the MCP client takes as "no stream here" and
   * goes on without one; its next POST rebuilds the session, as mcp.md says). Rebuilding for the stream made
   * idle clients past the cap evict each other in turn without end: each eviction closes a client's stream,
   * which it reopens a second later. This server sends nothing on the stream of its own. With room, a GET
   * rebuilds the session as any request does. An unknown or ended session is 404, as for any request.
   */
  async function streamOfSessionOutOfMemory(id: string): Promise<Response> {
    const row = await store.findSession(deps.db, sha256Hex(id));
    if (row === null || row.endedAt !== null) return jsonRpcError(404, -32001, "Session not found");
    return jsonRpcError(405, -32000, "Method Not Allowed: no event stream for this session now; POST requests to it as before", { allow: "POST, DELETE" });
  }

  async function envelopeCall(body: { tool?: unknown; params?: unknown }, bearer: string | null, client: ClientInfo, requestId: string | undefined): Promise<Response> {
    const caller = () => resolveCaller(deps, bearer, null);
    const detached: ToolSession = { id: null, bind: async () => undefined, unbind: async () => undefined };
    const unknown = Object.keys(body).find((member) => !ENVELOPE_MEMBERS.has(member));
    const envelope =
      unknown !== undefined
        ? failure(fieldError(unknown, `${unknown}: not a member of the envelope, which is {tool, params?} (a tool's parameters go in params)`))
        : typeof body.tool !== "string"
          ? failure(fieldError("tool", "tool must be the name of a tool (a string)"))
          : await registry.call({ deps, caller, session: detached, client, requestId }, body.tool, body.params ?? {});
    const status = envelope.success ? 200 : ERROR_STATUS[envelope.code];
    const headers: Record<string, string> = {};
    if (!envelope.success && envelope.retryAfter !== undefined) headers["retry-after"] = String(envelope.retryAfter);
    return Response.json(envelope, { status, headers });
  }

  /**
   * A body refused before it is read as JSON-RPC or as a plain envelope: in the shape its sender reads.
   * A request in a session (Mcp-Session-Id) is JSON-RPC, and every JSON-RPC message names its `jsonrpc`
   * member; any other body is a plain call (mcp.md: the tool's envelope, with the error table's status),
   * as a curl or a script sends it.
   */
  function unreadable(request: Request, text: string, rpcCode: number, why: string): Response {
    if (request.headers.has("mcp-session-id") || text.includes('"jsonrpc"')) return jsonRpcError(400, rpcCode, `${rpcCode === -32700 ? "Parse error" : "Invalid Request"}: ${why}`);
    return Response.json(failure(fieldError("body", why)), { status: 400 });
  }

  return {
    async handle(request, client, requestId) {
      if (request.method !== "POST" && request.method !== "GET" && request.method !== "DELETE") {
        return jsonRpcError(405, -32000, `Method Not Allowed: /mcp takes POST, GET and DELETE`, { allow: "POST, GET, DELETE" });
      }
      const bearer = bearerToken(request.headers.get("authorization") ?? undefined);
      // How the tool handlers (server.ts) learn of the request: its bearer token and its id.
      const call: HttpCallInfo = { bearer, requestId };
      const authInfo: AuthInfo = { token: bearer ?? "", clientId: "bearer", scopes: [], extra: call };
      let body: unknown;
      if (request.method === "POST") {
        let text: string;
        try {
          text = await request.text();
        } catch {
          // The client closed the connection before its body was all there: its failure, not ours.
          return jsonRpcError(400, -32600, "Invalid Request: the body could not be read to its end");
        }
        // Before the parse: the SDK and the tools turn what arrives back into text (JSON.stringify), which at
        // tens of thousands of levels holds the JS thread for seconds, and a session needs no sign-in.
        if (jsonNestsDeeperThan(text, MCP_MAX_BODY_DEPTH)) {
          return unreadable(request, text, -32600, `the body nests arrays and objects deeper than ${MCP_MAX_BODY_DEPTH} levels`);
        }
        try {
          body = JSON.parse(text);
        } catch {
          return unreadable(request, text, -32700, "the body is not JSON");
        }
        if (Array.isArray(body) && body.length === 0) return jsonRpcError(400, -32600, "Invalid Request: an empty batch");
        if (isEnvelopeCall(body)) {
          // As the MCP transport does: a browser page of another origin may not call tools (DNS rebinding),
          // and a JSON body must say so (a cross-site form or text/plain POST needs no preflight).
          const origin = request.headers.get("origin");
          if (origin !== null && origin !== ownOrigin) return Response.json(failure(new AppError("FORBIDDEN", originRefused(origin))), { status: 403 });
          if (!(request.headers.get("content-type") ?? "").toLowerCase().startsWith("application/json")) {
            return Response.json(failure(fieldError("content-type", "send the body as content-type: application/json")), { status: 400 });
          }
          return envelopeCall(body, bearer, client, requestId);
        }
        const invalid = notJsonRpc(body);
        if (invalid !== null) return invalid;
      }
      if (draining && request.method === "GET") return shuttingDown();
      const id = request.headers.get("mcp-session-id");
      if (id === null) {
        if (request.method === "POST") {
          const opening = InitializeRequestSchema.safeParse(body);
          if (opening.success) return initialize(request, body, client, authInfo); // as sent: the schema would strip jsonrpc and id
          // An initialize whose params are not those of one: named, not taken for some other message.
          if ((body as { method?: unknown } | null)?.method === "initialize") {
            return jsonRpcError(400, -32602, invalidParamsMessage("initialize", opening.error), {}, { id: messageId(body) });
          }
        }
        return jsonRpcError(400, -32000, "Bad Request: send initialize first, then the Mcp-Session-Id header it returns");
      }
      // Held in the same turn as it is looked up: between a rebuild and the hold, another open may have
      // evicted it again (then it is rebuilt again).
      let live = sessions.get(id);
      // A stream alone brings a session back into memory only where there is room for it (below).
      if (live === undefined && request.method === "GET" && sessions.size + reserved >= deps.config.mcpMaxSessions) return streamOfSessionOutOfMemory(id);
      for (let attempt = 0; live === undefined && attempt < 3; attempt++) {
        const rebuilt = await liveSession(id, client);
        if (rebuilt === null) return jsonRpcError(404, -32001, "Session not found");
        if (rebuilt === BUSY) return sessionsBusy();
        live = sessions.get(id);
      }
      if (live === undefined) return sessionsBusy();
      // Again after the rebuild above: shutdown may have begun meanwhile, and endStreams() has then closed
      // every stream it could; one opened now would hold the shutdown for its whole grace.
      if (draining && request.method === "GET") return shuttingDown();
      const ids = request.method === "POST" ? requestIds(body, live.pendingIds) : [];
      if (ids instanceof Response) return ids;
      live.lastActivity = deps.clock.now();
      const pending = live.pendingIds;
      for (const rid of ids) pending.add(rid);
      const { promise: left, resolve: end } = Promise.withResolvers<Response>();
      const exchange: Exchange = { request, end };
      live.exchanges.add(exchange);
      try {
        const answered = live.transport.handleRequest(request, { parsedBody: body, authInfo });
        // An id is free again once the transport is done with it, not when the client leaves: an answer
        // still to come under it would go to a new request that reused it.
        const free = () => {
          for (const rid of ids) pending.delete(rid);
        };
        answered.then(free, free);
        // The exchange ends when the transport answers or the client leaves, whichever comes first (an
        // answer long in coming, as for a call waiting on a stalled node, ends with the client).
        const response = await Promise.race([answered, left]);
        // DELETE ends the session for good, whatever the transport made of a race with the sweep.
        if (request.method === "DELETE" && response.status < 300) {
          sessions.delete(id);
          await store.endSession(deps.db, live.recordKey, deps.clock.now());
        }
        return response;
      } catch (err) {
        deps.log.error("mcp request failed", { requestId, mcpSessionKey: live.recordKey.slice(0, 12), error: errorText(err) });
        return jsonRpcError(500, -32603, "Internal error");
      } finally {
        live.exchanges.delete(exchange); // unless settleAbandoned already took it out
        live.lastActivity = deps.clock.now();
      }
    },

    async sweep() {
      const now = deps.clock.now();
      const activity = new Map<string, number>();
      // A busy session is active now, whenever its call began: its record must not look idle to the purge's
      // cap (purge.ts counts only records idle for two timeouts and a minute, as no server holds such a one).
      for (const live of sessions.values()) activity.set(live.recordKey, busy(live) ? now : live.lastActivity);
      if (activity.size > 0) await store.touchSessions(deps.db, activity);
      // Decided after the write: a request that arrived meanwhile keeps its session.
      for (const live of sessions.values()) settleAbandoned(live);
      const idle = [...sessions.values()].filter((live) => !busy(live) && now - live.lastActivity > deps.config.mcpSessionTimeoutMs);
      for (const live of idle) {
        sessions.delete(live.id);
        await live.server.close();
      }
      if (idle.length > 0) deps.log.debug("mcp sessions swept", { count: idle.length, live: sessions.size });
    },

    liveSessions: () => sessions.size,

    endStreams() {
      draining = true;
      for (const live of sessions.values()) live.transport.closeStandaloneSSEStream();
    },

    async stop() {
      const activity = new Map([...sessions.values()].map((s) => [s.recordKey, s.lastActivity]));
      if (activity.size > 0) await store.touchSessions(deps.db, activity);
      const all = [...sessions.values()];
      sessions.clear();
      await Promise.all(all.map((s) => s.server.close()));
    },
  };
}
