// The /mcp adapter's own limits, in-process: sessions in memory are capped (and come back by rebuild),
// initialize is rate limited per network, other browser origins and non-JSON envelope posts are refused;
// and an unexpected tool failure is reported under the request's id.
import { describe, expect, test } from "bun:test";
import { testDeps } from "../../test/helpers/deps.ts";
import { createMcpHttp } from "./http.ts";
import { sweepPeriodMs } from "./endpoint.ts";
import { createRegistry, defineTool } from "./registry.ts";
import { createToolRegistry } from "./tools.ts";
import { AUTH_TOOLS } from "../auth/tools.ts";
import { issueSession } from "../auth/sessions.ts";
import { newWallet } from "../../test/helpers/wallet.ts";

const HEADERS = { "content-type": "application/json", accept: "application/json, text/event-stream" };
const client = { ip: "198.51.100.7", userAgent: "http-test" };

async function setup(env: Record<string, string>) {
  const { deps } = await testDeps(env);
  return { deps, mcp: createMcpHttp(deps, createToolRegistry(deps)) };
}

const initialize = (extra: Record<string, string> = {}) =>
  new Request("http://walletgate.test/mcp", {
    method: "POST",
    headers: { ...HEADERS, ...extra },
    body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "initialize", params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "t", version: "1" } } }),
  });

const listTools = (id: string) =>
  new Request("http://walletgate.test/mcp", {
    method: "POST",
    headers: { ...HEADERS, "mcp-session-id": id, "mcp-protocol-version": "2025-06-18" },
    body: JSON.stringify({ jsonrpc: "2.0", id: 2, method: "tools/list" }),
  });

describe("/mcp adapter", () => {
  test("at most MCP_MAX_SESSIONS in memory; an evicted session is rebuilt under its id when it comes back", async () => {
    const { mcp } = await setup({ MCP_MAX_SESSIONS: "3" });
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) ids.push((await mcp.handle(initialize(), client)).headers.get("mcp-session-id")!);
    expect(mcp.liveSessions()).toBe(3);
    for (const id of ids) expect((await mcp.handle(listTools(id), client)).status).toBe(200);
    expect(mcp.liveSessions()).toBe(3);
    await mcp.stop();
  });

  test("initialize is limited per network while AUTH_RATE_LIMIT is on", async () => {
    const { mcp } = await setup({ AUTH_RATE_LIMIT: "on" });
    const statuses: number[] = [];
    for (let i = 0; i < 121; i++) statuses.push((await mcp.handle(initialize(), client)).status);
    expect(statuses.slice(0, 120).every((s) => s === 200)).toBe(true);
    const refused = await mcp.handle(initialize(), client);
    expect(refused.status).toBe(429);
    const retryAfter = Number(refused.headers.get("retry-after"));
    expect(retryAfter).toBeGreaterThanOrEqual(1);
    expect(await refused.json()).toEqual({
      jsonrpc: "2.0",
      error: { code: -32000, message: expect.stringContaining("try again"), data: { code: "RATE_LIMITED", retryAfter } },
      id: 1,
    });
    expect((await mcp.handle(initialize(), { ...client, ip: "192.0.2.50" })).status).toBe(200); // another network
    await mcp.stop();
  });

  test("a browser page of another origin is refused; the envelope wants application/json", async () => {
    const { mcp } = await setup({});
    expect((await mcp.handle(initialize({ origin: "http://evil.example" }), client)).status).toBe(403);
    expect((await mcp.handle(initialize({ origin: "http://walletgate.test" }), client)).status).toBe(200);
    const envelope = (headers: Record<string, string>) =>
      mcp.handle(new Request("http://walletgate.test/mcp", { method: "POST", headers, body: JSON.stringify({ tool: "session_info" }) }), client);
    const plain = await envelope({ "content-type": "text/plain" });
    expect([plain.status, ((await plain.json()) as { code: string }).code]).toEqual([400, "VALIDATION_ERROR"]);
    // The envelope's own shape, with the catalogue's code (not a JSON-RPC error).
    const foreign = await envelope({ "content-type": "application/json", origin: "http://evil.example" });
    expect([foreign.status, await foreign.json()]).toEqual([
      403,
      {
        success: false,
        error: "Invalid Origin header: http://evil.example; only pages of http://walletgate.test may call /mcp from a browser (BASE_URL: set it to the address browsers use)",
        code: "FORBIDDEN",
      },
    ]);
    expect((await envelope({ "content-type": "application/json" })).status).toBe(200);
    await mcp.stop();
  });

  test("an unexpected tool failure is INTERNAL_ERROR, reported under the HTTP request's id (envelope and session)", async () => {
    const { deps } = await testDeps({});
    const reported: { tool: string; message: string; requestId: string }[] = [];
    const boom = defineTool({
      name: "boom",
      description: "fails unexpectedly",
      input: {},
      needsWallet: false,
      run: async () => {
        throw new Error("disk on fire");
      },
    });
    const registry = createRegistry([...AUTH_TOOLS, boom], (tool, err, requestId) => reported.push({ tool, message: String(err), requestId }));
    const mcp = createMcpHttp(deps, registry);

    const viaEnvelope = await mcp.handle(
      new Request("http://walletgate.test/mcp", { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ tool: "boom" }) }),
      client,
      "req-envelope",
    );
    expect(viaEnvelope.status).toBe(500);
    expect(await viaEnvelope.json()).toEqual({ success: false, error: "internal error", code: "INTERNAL_ERROR" });

    const id = (await mcp.handle(initialize(), client, "req-init")).headers.get("mcp-session-id")!;
    const call = new Request("http://walletgate.test/mcp", {
      method: "POST",
      headers: { ...HEADERS, "mcp-session-id": id, "mcp-protocol-version": "2025-06-18" },
      body: JSON.stringify({ jsonrpc: "2.0", id: 3, method: "tools/call", params: { name: "boom", arguments: {} } }),
    });
    const viaSession = await mcp.handle(call, client, "req-session");
    expect(viaSession.status).toBe(200);
    expect(await viaSession.text()).toContain("INTERNAL_ERROR");

    // The cause is logged (by the server's handler) under the request id; the caller sees no detail.
    expect(reported).toEqual([
      { tool: "boom", message: "Error: disk on fire", requestId: "req-envelope" },
      { tool: "boom", message: "Error: disk on fire", requestId: "req-session" },
    ]);
    await mcp.stop();
  });

  test("a caller that cannot be looked up (storage failing) is INTERNAL_ERROR, reported under the request's id (envelope and session)", async () => {
    const { deps } = await testDeps({});
    const reported: { tool: string; requestId: string }[] = [];
    const registry = createRegistry(AUTH_TOOLS, (tool, _err, requestId) => reported.push({ tool, requestId }));
    const mcp = createMcpHttp(deps, registry);
    const { token } = await issueSession(deps, newWallet().address, null);
    const id = (await mcp.handle(initialize(), client, "req-init")).headers.get("mcp-session-id")!;
    deps.db.sqlite.run("ALTER TABLE auth_tokens RENAME TO auth_tokens_away"); // the token's row cannot be read

    const viaEnvelope = await mcp.handle(
      new Request("http://walletgate.test/mcp", { method: "POST", headers: { "content-type": "application/json", authorization: `Bearer ${token}` }, body: JSON.stringify({ tool: "session_info" }) }),
      client,
      "req-envelope",
    );
    expect(viaEnvelope.status).toBe(500);
    expect(await viaEnvelope.json()).toEqual({ success: false, error: "internal error", code: "INTERNAL_ERROR" });

    const viaSession = await mcp.handle(
      new Request("http://walletgate.test/mcp", {
        method: "POST",
        headers: { ...HEADERS, "mcp-session-id": id, "mcp-protocol-version": "2025-06-18", authorization: `Bearer ${token}` },
        body: JSON.stringify({ jsonrpc: "2.0", id: 3, method: "tools/call", params: { name: "session_info", arguments: {} } }),
      }),
      client,
      "req-session",
    );
    expect(viaSession.status).toBe(200);
    const answer = (await viaSession.json()) as { result?: { isError?: boolean; content: { text: string }[] } };
    expect(answer.result?.isError).toBe(true); // a tool result with the envelope, not a JSON-RPC error
    expect(JSON.parse(answer.result!.content[0]!.text)).toEqual({ success: false, error: "internal error", code: "INTERNAL_ERROR" });
    expect(reported).toEqual([
      { tool: "session_info", requestId: "req-envelope" },
      { tool: "session_info", requestId: "req-session" },
    ]);
    deps.db.sqlite.run("ALTER TABLE auth_tokens_away RENAME TO auth_tokens");
    await mcp.stop();
  });
});

describe("the idle sweep's period", () => {
  test("min(60 s, MCP_SESSION_TIMEOUT_MS) (mcp.md): the timeout below a minute, a minute above it", () => {
    expect(sweepPeriodMs(500)).toBe(500);
    expect(sweepPeriodMs(60_000)).toBe(60_000);
    expect(sweepPeriodMs(3_600_000)).toBe(60_000);
  });
});
