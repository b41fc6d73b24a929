// Edges of the MCP session layer (src/mcp/http.ts, src/mcp/purge.ts) that no other test decided: the real
// wait in a refused initialize's 429, a swept session asked for while every place is busy, concurrent
// requests for one swept session, what a refused open does to the sessions in memory, event streams once
// shutdown has begun, and the purge's cap beside a session still in memory. Over real sockets where the
// outcome can be reached from outside; in-process (a manual clock, a tool held open) where it needs a moment
// no client can pick.
import { afterAll, describe, expect, test } from "bun:test";
import { createHash } from "node:crypto";
import { AUTH_TOOLS } from "../src/auth/tools.ts";
import { createMcpHttp } from "../src/mcp/http.ts";
import { purgeMcpSessions } from "../src/mcp/purge.ts";
import { createRegistry, defineTool } from "../src/mcp/registry.ts";
import { findSession, insertSession } from "../src/mcp/store.ts";
import { testDeps } from "./helpers/deps.ts";
import { startLiteSvmRpc, type LiteSvmRpc } from "./helpers/litesvm-rpc.ts";
import { logged, startTestServer, type TestServer } from "./helpers/server.ts";
import { until } from "./helpers/until.ts";
import { newWallet, signIn, type Json } from "./helpers/wallet.ts";

const PROTOCOL = "2025-06-18";
const HEADERS = { "content-type": "application/json", accept: "application/json, text/event-stream" };
const INITIALIZE = { jsonrpc: "2.0", id: 0, method: "initialize", params: { protocolVersion: PROTOCOL, capabilities: {}, clientInfo: { name: "raw", version: "1" } } };
const keyOf = (id: string) => createHash("sha256").update(id).digest("hex");

const servers: TestServer[] = [];
const cleanups: (() => Promise<void>)[] = [];
afterAll(async () => {
  for (const cleanup of cleanups) await cleanup();
  await Promise.all(servers.map((s) => s.dispose()));
});

async function start(env: Record<string, string>): Promise<TestServer> {
  const server = await startTestServer({ AUTH_RATE_LIMIT: "off", ...env });
  servers.push(server);
  return server;
}

// ---- real server over HTTP ----

type Answer = { status: number; headers: Headers; body: Json | null } | "unanswered";

const initialize = (server: TestServer) => fetch(`${server.url}/mcp`, { method: "POST", headers: HEADERS, body: JSON.stringify(INITIALIZE) });

/** A raw POST into a session; "unanswered" when `signal` ended it first. */
async function post(server: TestServer, sessionId: string, body: unknown, init: { bearer?: string; signal?: AbortSignal } = {}): Promise<Answer> {
  try {
    const res = await fetch(`${server.url}/mcp`, {
      method: "POST",
      signal: init.signal ?? AbortSignal.timeout(10_000),
      headers: { ...HEADERS, "mcp-session-id": sessionId, "mcp-protocol-version": PROTOCOL, ...(init.bearer ? { authorization: `Bearer ${init.bearer}` } : {}) },
      body: JSON.stringify(body),
    });
    const text = await res.text();
    return { status: res.status, headers: res.headers, body: text === "" ? null : JSON.parse(text) };
  } catch (err) {
    if ((err as Error).name === "AbortError" || (err as Error).name === "TimeoutError") return "unanswered";
    throw err;
  }
}

/** A session opened with raw HTTP (no event stream that a sweep or an eviction would make a client reopen). */
async function rawSession(server: TestServer): Promise<string> {
  const res = await initialize(server);
  expect(res.status).toBe(200);
  const id = res.headers.get("mcp-session-id")!;
  await res.body?.cancel();
  expect(await post(server, id, { jsonrpc: "2.0", method: "notifications/initialized" })).toMatchObject({ status: 202 });
  return id;
}

const listTools = (id: number) => ({ jsonrpc: "2.0", id, method: "tools/list" });
const balanceCall = (id: number) => ({ jsonrpc: "2.0", id, method: "tools/call", params: { name: "wallet_get_balance", arguments: {} } });

async function liveSessions(server: TestServer): Promise<number> {
  const text = await (await fetch(`${server.url}/metrics`)).text();
  return Number(/^walletgate_mcp_sessions_live (\d+)$/m.exec(text)![1]);
}

/** The session keys (12 hex digits) logged as rebuilt so far (LOG_LEVEL=debug). */
const rebuiltKeys = (server: TestServer) =>
  server
    .output()
    .split("\n")
    .filter((l) => l.includes('"mcp session rebuilt"'))
    .map((l) => (JSON.parse(l) as { mcpSessionKey: string }).mcpSessionKey);

/**
 * A devnet server whose ledger RPC answers only while its gate is open: a wallet_get_balance made with
 * `bearer` stays in flight (its session busy) while the gate is closed.
 */
async function gatedServer(env: Record<string, string>) {
  const rpc: LiteSvmRpc = await startLiteSvmRpc();
  let gate: ReturnType<typeof Promise.withResolvers<void>> | null = null;
  let waiting = 0;
  const proxy = Bun.serve({
    port: 0,
    hostname: "127.0.0.1",
    async fetch(request) {
      const body = await request.text();
      if (gate !== null) {
        waiting++;
        await gate.promise;
      }
      return fetch(rpc.url, { method: "POST", headers: { "content-type": "application/json" }, body });
    },
  });
  cleanups.push(async () => {
    gate?.resolve();
    await proxy.stop(true);
    await rpc.stop();
  });
  const server = await start({ NETWORK: "devnet", SOLANA_RPC_URL: `http://127.0.0.1:${proxy.port}/`, ...env });
  const { sessionToken } = await signIn(server.url, newWallet());
  return {
    server,
    bearer: sessionToken,
    waiting: () => waiting,
    close: () => {
      gate ??= Promise.withResolvers<void>();
    },
    open: () => {
      gate?.resolve();
      gate = null;
    },
  };
}

describe("1. a refused initialize (120 a minute per network) says how long until a place frees", () => {
  test("over HTTP: Retry-After and error.data.retryAfter agree, and are the window's remaining time (about 60 s), not 1", async () => {
    const server = await start({ AUTH_RATE_LIMIT: "on" });
    for (let i = 0; i < 120; i++) {
      const res = await initialize(server);
      expect(res.status).toBe(200);
      await res.body?.cancel();
    }
    const refused = await initialize(server);
    expect(refused.status).toBe(429);
    const body = (await refused.json()) as { id: unknown; error: { code: number; message: string; data: { code: string; retryAfter: number } } };
    const { retryAfter } = body.error.data;
    expect(body).toMatchObject({ id: 0, error: { code: -32000, data: { code: "RATE_LIMITED" } } });
    expect(refused.headers.get("retry-after")).toBe(String(retryAfter));
    expect(body.error.message).toContain(`try again in ${retryAfter} s`);
    // The 120 hits were made within the last few seconds: the first leaves the window about 60 s after it.
    expect(retryAfter).toBeGreaterThanOrEqual(50);
    expect(retryAfter).toBeLessThanOrEqual(60);
  }, 60_000);

  test("initializes a page of another origin sends are refused 403 without counting: the limit stays its network's MCP hosts'", async () => {
    const server = await start({ AUTH_RATE_LIMIT: "on", MCP_MAX_SESSIONS: "2" });
    // What any web page can send without a preflight: a text/plain POST, with the browser's Origin.
    const foreign = { ...HEADERS, "content-type": "text/plain", origin: "https://evil.example" };
    for (let i = 0; i < 125; i++) {
      const res = await fetch(`${server.url}/mcp`, { method: "POST", headers: foreign, body: JSON.stringify(INITIALIZE) });
      expect(res.status).toBe(403);
      expect(((await res.json()) as { error: { message: string } }).error.message).toBe(
        `Invalid Origin header: https://evil.example; only pages of ${new URL(server.url).origin} may call /mcp from a browser (BASE_URL: set it to the address browsers use)`,
      );
    }
    const own = await initialize(server);
    expect(own.status).toBe(200);
    await own.body?.cancel();
  }, 60_000);

  test("in-process, on a manual clock: the wait shrinks as the window slides, rounded up, and ends on time", async () => {
    const { deps, clock } = await testDeps({ AUTH_RATE_LIMIT: "on" });
    const mcp = createMcpHttp(deps, createRegistry(AUTH_TOOLS, () => undefined));
    const client = { ip: "198.51.100.9", userAgent: "edges" };
    const init = () => mcp.handle(new Request("http://walletgate.test/mcp", { method: "POST", headers: HEADERS, body: JSON.stringify(INITIALIZE) }), client);
    for (let i = 0; i < 120; i++) expect((await init()).status).toBe(200);
    const waitOf = async () => {
      const res = await init();
      if (res.status !== 429) return res.status;
      const { error } = (await res.json()) as { error: { data: { retryAfter: number } } };
      expect(res.headers.get("retry-after")).toBe(String(error.data.retryAfter));
      return `retry after ${error.data.retryAfter}`;
    };
    expect(await waitOf()).toBe("retry after 60");
    clock.advance(15_000);
    expect(await waitOf()).toBe("retry after 45");
    clock.advance(44_500);
    expect(await waitOf()).toBe("retry after 1"); // 0.5 s left: rounded up, never 0
    clock.advance(500);
    expect(await waitOf()).toBe(200); // the first 120 left the window
    await mcp.stop();
  });
});

describe("2. a request for a session out of memory while every place is busy", () => {
  test("is 503 with Retry-After: 1 and JSON-RPC -32000 (never 404: its record stays); once a place frees it is rebuilt and served", async () => {
    const gated = await gatedServer({ MCP_MAX_SESSIONS: "1", LOG_LEVEL: "debug" });
    const { server, bearer } = gated;
    const swept = await rawSession(server);
    const holder = await rawSession(server); // the one place: `swept` leaves memory for it
    gated.close();
    const held = post(server, holder, balanceCall(1), { bearer });
    await until(() => (gated.waiting() > 0 ? true : undefined)); // the holder's call waits on the ledger

    const refused = await post(server, swept, listTools(2));
    expect(refused).not.toBe("unanswered");
    if (refused === "unanswered") return;
    expect([refused.status, refused.headers.get("retry-after")]).toEqual([503, "1"]);
    expect(refused.body).toMatchObject({ jsonrpc: "2.0", id: null, error: { code: -32000, message: expect.stringContaining("every MCP session is busy") } });
    // A stream alone does not take a place at the cap (decisions.md): 405, not 404.
    const stream = await fetch(`${server.url}/mcp`, { headers: { accept: "text/event-stream", "mcp-session-id": swept, "mcp-protocol-version": PROTOCOL } });
    expect(stream.status).toBe(405);
    await stream.body?.cancel();

    gated.open();
    expect(await held).toMatchObject({ status: 200, body: { id: 1, result: { structuredContent: { success: true } } } });
    expect(await post(server, swept, listTools(3))).toMatchObject({ status: 200, body: { id: 3, result: { tools: expect.any(Array) } } });
    await logged(server, () => rebuiltKeys(server).includes(keyOf(swept).slice(0, 12)));
    expect(rebuiltKeys(server)).toContain(keyOf(swept).slice(0, 12));
  }, 60_000);
});

describe("3. requests at once for one session out of memory", () => {
  test("share one rebuild: every one is answered 200, one rebuild is logged, one session is in memory", async () => {
    // At MCP_MAX_SESSIONS=1 with another session idle in the place, the rebuild evicts it and writes its last
    // activity (a database write) before the new transport exists, so the other requests arrive meanwhile. A
    // second rebuild of their own would find the one place taken by the first: 503 for them.
    const server = await start({ MCP_MAX_SESSIONS: "1", LOG_LEVEL: "debug" });
    const id = await rawSession(server);
    const other = await rawSession(server); // takes the place: `id` leaves memory
    expect(await liveSessions(server)).toBe(1);
    const answers = await Promise.all([1, 2, 3, 4, 5].map((rid) => post(server, id, listTools(rid))));
    expect(answers.map((a) => (a === "unanswered" ? a : a.status))).toEqual([200, 200, 200, 200, 200]);
    expect(answers.map((a) => (a === "unanswered" ? null : a.body?.id))).toEqual([1, 2, 3, 4, 5]);
    const key = keyOf(id).slice(0, 12);
    await logged(server, () => rebuiltKeys(server).includes(key));
    await Bun.sleep(200); // a second rebuild's line, if there were one, is written by now
    expect(rebuiltKeys(server).filter((k) => k === key)).toHaveLength(1);
    expect(await liveSessions(server)).toBe(1);
    expect(rebuiltKeys(server)).not.toContain(keyOf(other).slice(0, 12));
  }, 30_000);
});

describe("4. an open refused at the cap", () => {
  test("takes no session out of memory: the busy ones are still there, unrebuilt, when their calls end", async () => {
    // takeRoom() takes out only idle sessions, and one is always enough to make room (sessions + places being
    // opened never exceed the cap): a refusal takes none. This pins what a client sees of that.
    const gated = await gatedServer({ MCP_MAX_SESSIONS: "2", LOG_LEVEL: "debug" });
    const { server, bearer } = gated;
    const busy = [await rawSession(server), await rawSession(server)];
    gated.close();
    const held = busy.map((id) => post(server, id, balanceCall(1), { bearer }));
    await until(() => (gated.waiting() >= 2 ? true : undefined));

    const refused = await initialize(server);
    expect([refused.status, refused.headers.get("retry-after")]).toEqual([503, "1"]);
    await refused.body?.cancel();
    expect(await liveSessions(server)).toBe(2);

    gated.open();
    for (const answer of await Promise.all(held)) expect(answer).toMatchObject({ status: 200, body: { id: 1 } });
    for (const id of busy) expect(await post(server, id, listTools(2))).toMatchObject({ status: 200, body: { id: 2 } });
    await Bun.sleep(100);
    const rebuilt = rebuiltKeys(server);
    for (const id of busy) expect(rebuilt).not.toContain(keyOf(id).slice(0, 12));
  }, 60_000);
});

// ---- in-process: moments no client over a socket can choose ----

const client = { ip: "198.51.100.7", userAgent: "edges" };
const initRequest = () => new Request("http://walletgate.test/mcp", { method: "POST", headers: HEADERS, body: JSON.stringify(INITIALIZE) });
const postRequest = (id: string, body: unknown) =>
  new Request("http://walletgate.test/mcp", { method: "POST", headers: { ...HEADERS, "mcp-session-id": id, "mcp-protocol-version": PROTOCOL }, body: JSON.stringify(body) });
const streamRequest = (id: string) => new Request("http://walletgate.test/mcp", { headers: { accept: "text/event-stream", "mcp-session-id": id, "mcp-protocol-version": PROTOCOL } });

async function openInProcess(mcp: ReturnType<typeof createMcpHttp>): Promise<string> {
  const res = await mcp.handle(initRequest(), client);
  expect(res.status).toBe(200);
  const id = res.headers.get("mcp-session-id")!;
  expect((await mcp.handle(postRequest(id, { jsonrpc: "2.0", method: "notifications/initialized" }), client)).status).toBe(202);
  return id;
}

/** Whether the body of `res` ends within `ms` (an event stream left open does not). */
async function endsWithin(res: Response, ms: number): Promise<boolean> {
  if (res.body === null) return true;
  const reader = res.body.getReader();
  const drained = (async () => {
    for (;;) if ((await reader.read()).done) return true;
  })();
  const ended = await Promise.race([drained, Bun.sleep(ms).then(() => false)]);
  await reader.cancel().catch(() => undefined);
  return ended;
}

describe("5. an event stream (GET /mcp) once shutdown has begun", () => {
  test("a GET for a session in memory is refused 503", async () => {
    const { deps } = await testDeps({});
    const mcp = createMcpHttp(deps, createRegistry(AUTH_TOOLS, () => undefined));
    const id = await openInProcess(mcp);
    mcp.endStreams();
    const res = await mcp.handle(streamRequest(id), client);
    expect(res.status).toBe(503);
    expect(await res.json()).toMatchObject({ error: { code: -32000, message: expect.stringContaining("shutting down") } });
    await mcp.stop();
  });

  test("a GET that was rebuilding its swept session when shutdown began is refused 503 too, not opened after endStreams", async () => {
    // decisions.md: "When shutdown begins … every session's stream is closed and a GET /mcp is answered 503".
    // A stream opened after endStreams() is never closed by it, and holds the shutdown for its whole grace.
    const { deps, clock } = await testDeps({});
    const mcp = createMcpHttp(deps, createRegistry(AUTH_TOOLS, () => undefined));
    const id = await openInProcess(mcp);
    clock.advance(deps.config.mcpSessionTimeoutMs + 1);
    await mcp.sweep();
    expect(mcp.liveSessions()).toBe(0);
    const stream = mcp.handle(streamRequest(id), client); // checks `draining`, then awaits the rebuild
    mcp.endStreams(); // shutdown begins while it does
    const res = await stream;
    const ended = await endsWithin(res, 300);
    expect([res.status, ended]).toEqual([503, true]);
    await mcp.stop();
  });
});

describe("6. the purge's cap on session records, beside a session still in memory", () => {
  test("a session busy longer than two timeouts and a minute keeps its record; it is rebuilt after its sweep, not 404", async () => {
    // purge.ts counts toward the cap only records idle since before now - 2 × MCP_SESSION_TIMEOUT_MS - 60 s,
    // "so the cap never takes the record of a session a server still holds" (decisions.md). A session with a
    // call in flight is never swept, and the sweep writes its last activity as that call's start.
    const { deps, clock } = await testDeps({ MCP_SESSION_TIMEOUT_MS: "100" });
    const started = Promise.withResolvers<void>();
    const gate = Promise.withResolvers<void>();
    const slow = defineTool({
      name: "slow",
      description: "answers when the test lets it (a transfer waiting for its confirmation, say)",
      input: {},
      needsWallet: false,
      run: async () => {
        started.resolve();
        await gate.promise;
        return { done: true };
      },
    });
    const mcp = createMcpHttp(deps, createRegistry([...AUTH_TOOLS, slow], () => undefined));
    const id = await openInProcess(mcp);
    const call = mcp.handle(postRequest(id, { jsonrpc: "2.0", id: 1, method: "tools/call", params: { name: "slow", arguments: {} } }), client);
    await started.promise;

    const timeout = deps.config.mcpSessionTimeoutMs;
    clock.advance(2 * timeout + 60_000 + 1_000); // the call is still in flight
    await mcp.sweep(); // busy: not swept (its activity is written)
    expect(mcp.liveSessions()).toBe(1);
    // The cap is reached: one more recent record past the window is kept, the older ones go.
    const now = clock.now();
    await insertSession(deps.db, {
      id: keyOf("another client's session"),
      createdAt: now,
      lastActivityAt: now - 2 * timeout - 60_000 - 1,
      protocolVersion: PROTOCOL,
      fingerprint: null,
      wallet: null,
      sessionId: null,
      jti: null,
      tokenExpiresAtS: null,
      boundBy: null,
    });
    await purgeMcpSessions(deps, { unboundKept: 1 });
    expect(await findSession(deps.db, keyOf(id))).not.toBeNull(); // still in memory: not the cap's to take

    gate.resolve();
    expect((await call).status).toBe(200);
    clock.advance(timeout + 1);
    await mcp.sweep();
    expect(mcp.liveSessions()).toBe(0);
    // What its client sees next: its session, rebuilt (a 404 is a session the SDK's client never gets back).
    const next = await mcp.handle(postRequest(id, listTools(2)), client);
    expect(next.status).toBe(200);
    expect(await next.json()).toMatchObject({ id: 2, result: { tools: expect.any(Array) } });
    await mcp.stop();
  });
});
