// MCP sessions of /mcp against the real server over sockets: fingerprint restore (on and off), refresh,
// token expiry, the maximum session age, the idle sweep and the rebuild under the same Mcp-Session-Id
// (also after a restart), DELETE, and requests in flight (one per JSON-RPC id, counted until their
// exchange ends, the session cap). The tools themselves are in mcp-http.test.ts.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { createHash } from "node:crypto";
import { connectMcp, type Envelope, type McpTestClient } from "./helpers/mcp.ts";
import { logged, openServerDatabase, startTestServer, type TestServer } from "./helpers/server.ts";
import { call as httpCall, decodeJwt, newWallet, signIn, type Json } from "./helpers/wallet.ts";
import { until } from "./helpers/until.ts";
import { startLiteSvmRpc, type LiteSvmRpc } from "./helpers/litesvm-rpc.ts";

type Mcp = McpTestClient;

const ANONYMOUS = { authenticated: false, network: "localnet" };
const ANONYMOUS_DEVNET = { authenticated: false, network: "devnet" };
const clients: Mcp[] = [];
const servers: TestServer[] = [];
let uaCount = 0;
const ua = (what: string) => `walletgate-test/${what}-${++uaCount}`;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, Math.max(0, ms)));

afterAll(async () => {
  await Promise.all(clients.map((c) => c.client.close()));
  await Promise.all(servers.map((s) => s.dispose()));
});

async function start(env: Record<string, string>): Promise<TestServer> {
  const server = await startTestServer({ AUTH_RATE_LIMIT: "off", ...env });
  servers.push(server);
  return server;
}

async function connect(server: TestServer, userAgent: string, token?: string): Promise<Mcp> {
  const mcp = await connectMcp(server.url, userAgent, token, "mcp-sessions-test");
  clients.push(mcp);
  return mcp;
}

/** session_restore of `token` refreshed it: the same session, a new token and jti, expiresAt its exp. The answer and the new claims. */
async function restoreRefreshed(mcp: Mcp, token: string, walletAddress: string, old: Json) {
  // A refresh is made only if it ends later than the token it replaces: not within that token's own second.
  await sleep((old.iat + 1) * 1000 + 20 - Date.now());
  const restored = await mcp.ok("session_restore", { token });
  expect(restored).toMatchObject({ walletAddress, sessionId: old.sessionId, refreshed: true, isNewSession: false });
  expect(restored.sessionToken).not.toBe(token);
  const claims = decodeJwt(restored.sessionToken).payload;
  expect(claims).toMatchObject({ walletAddress, sessionId: old.sessionId });
  expect(claims.jti).not.toBe(old.jti);
  expect(restored.expiresAt).toBe(new Date(claims.exp * 1000).toISOString());
  return { restored, claims };
}

/** The fingerprint persisted with an MCP session's record (mcp.md), read from the server's database. */
function recordedFingerprint(server: TestServer, mcpSessionId: string): unknown {
  const db = openServerDatabase(server.dataDir);
  try {
    const id = createHash("sha256").update(mcpSessionId).digest("hex"); // records are keyed by the id's hash
    const row = db.query("SELECT fingerprint FROM mcp_sessions WHERE id = ?").get(id) as { fingerprint: unknown } | null;
    expect(row).not.toBeNull();
    return row!.fingerprint;
  } finally {
    db.close();
  }
}

/** A raw JSON-RPC POST into an existing MCP session (no SDK client). */
function rpc(server: TestServer, sessionId: string, message: Json, userAgent: string): Promise<Response> {
  return fetch(`${server.url}/mcp`, {
    method: "POST",
    headers: {
      "content-type": "application/json",
      accept: "application/json, text/event-stream",
      "mcp-session-id": sessionId,
      "user-agent": userAgent,
    },
    body: JSON.stringify({ jsonrpc: "2.0", id: 1, ...message }),
  });
}

function plain(server: TestServer, tool: string, token: string) {
  return httpCall(server.url, "/mcp", { body: { tool }, token, headers: { "user-agent": ua("plain") } });
}

describe("fingerprint restore on (localnet default) and DELETE", () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await start({});
  });

  test("a new client from the same fingerprint is bound to the wallet without signing, until wallet_disconnect", async () => {
    const a = await connect(server, "ua-A");
    const created = await a.ok("wallet_create", { airdropSol: 1 });
    const b = await connect(server, "ua-A");
    expect(b.transport.sessionId).not.toBe(a.transport.sessionId);
    expect(await b.ok("session_info")).toMatchObject({
      authenticated: true,
      walletAddress: created.address,
      sessionId: decodeJwt(created.sessionToken).payload.sessionId,
      custodial: true,
      restoredBy: "fingerprint",
      mcpSessionId: b.transport.sessionId,
    });
    // The custodial key is usable again from the restored session.
    const sent = await b.ok("wallet_transfer", { to: newWallet().address, amount: "0.1", token: "sol" });
    expect(sent).toMatchObject({ from: created.address, status: "confirmed" });

    // Another User-Agent (same IP) is a stranger.
    expect(await (await connect(server, "ua-B")).ok("session_info")).toEqual(ANONYMOUS);
    // Both records keep the same fingerprint, as an HMAC: never the address or the User-Agent themselves.
    const kept = recordedFingerprint(server, a.transport.sessionId!);
    expect(kept).toMatch(/^[0-9a-f]{64}$/);
    expect(recordedFingerprint(server, b.transport.sessionId!)).toBe(kept);

    expect(await a.ok("wallet_disconnect")).toEqual({ disconnected: true });
    expect(await (await connect(server, "ua-A")).ok("session_info")).toEqual(ANONYMOUS);
    // The restored session ran on the same (now revoked) token: it has no wallet any more.
    expect(await b.call("wallet_get_balance")).toMatchObject({ success: false });
  });

  test("the link follows the last authentication from the fingerprint: wallet_create, wallet_connect, /auth/verify", async () => {
    const userAgent = ua("last");
    const first = await connect(server, userAgent);
    await first.ok("wallet_create", { airdropSol: 0 });

    const wallet = newWallet();
    const challenge = await first.ok("session_auth", { walletAddress: wallet.address });
    await first.ok("wallet_connect", { walletAddress: wallet.address, nonce: challenge.nonce, signature: wallet.sign(challenge.message) });
    expect(await (await connect(server, userAgent)).ok("session_info")).toMatchObject({
      walletAddress: wallet.address,
      custodial: false,
      restoredBy: "fingerprint",
    });

    const web = newWallet();
    const verified = await signIn(server.url, web, { "user-agent": userAgent });
    expect(await (await connect(server, userAgent)).ok("session_info")).toMatchObject({ walletAddress: web.address, restoredBy: "fingerprint" });

    // /auth/revoke of the linked token removes the link.
    expect(await httpCall(server.url, "/auth/revoke", { method: "POST", token: verified.sessionToken, headers: { "user-agent": userAgent } })).toMatchObject({
      status: 200,
      body: { revoked: true },
    });
    expect(await (await connect(server, userAgent)).ok("session_info")).toEqual(ANONYMOUS);
  });

  test("DELETE ends the session: its id then answers 404, as does an unknown id; the token stays valid", async () => {
    const userAgent = ua("delete");
    const mcp = await connect(server, userAgent);
    const created = await mcp.ok("wallet_create", { airdropSol: 0 });
    const sessionId = mcp.transport.sessionId!;
    expect(await (await rpc(server, sessionId, { method: "tools/list" }, userAgent)).json()).toMatchObject({ result: { tools: expect.any(Array) } });

    await mcp.transport.terminateSession();
    const gone = await rpc(server, sessionId, { method: "tools/list" }, userAgent);
    expect(gone.status).toBe(404);
    expect(await gone.json()).toMatchObject({ jsonrpc: "2.0", error: { code: -32001 } });
    expect((await rpc(server, sessionId, { method: "tools/call", params: { name: "session_info", arguments: {} } }, userAgent)).status).toBe(404);
    expect((await rpc(server, crypto.randomUUID(), { method: "tools/list" }, userAgent)).status).toBe(404);
    // Ending an MCP session is not signing out.
    expect(await plain(server, "wallet_get_balance", created.sessionToken)).toMatchObject({ status: 200, body: { data: { address: created.address } } });
  });
});

describe("fingerprint restore off", () => {
  test("FINGERPRINT_RESTORE=off: a client with the same User-Agent and IP is not restored", async () => {
    const server = await start({ FINGERPRINT_RESTORE: "off" });
    const a = await connect(server, "ua-A");
    const created = await a.ok("wallet_create", { airdropSol: 0 });
    expect(await (await connect(server, "ua-A")).ok("session_info")).toEqual(ANONYMOUS);
    expect(await (await connect(server, "ua-A")).call("wallet_get_balance")).toMatchObject({ success: false, code: "UNAUTHENTICATED" });
    expect((await a.ok("session_info")).walletAddress).toBe(created.address);
    // Nothing to restore by, so no fingerprint is kept with the record.
    expect(recordedFingerprint(server, a.transport.sessionId!)).toBeNull();
  });
});

describe("behind a proxy: fingerprints only from addresses that are the clients' own", () => {
  // Through a proxy that TRUST_PROXY does not name, every client has the proxy's address: another client
  // with the same User-Agent would be restored to this one's wallet (an operator review reproduced a
  // stranger's wallet_transfer from the victim's wallet that way).
  const via = (server: TestServer, userAgent: string, forwardedFor?: string) =>
    connectMcp(server.url, userAgent, undefined, "mcp-sessions-test", forwardedFor === undefined ? {} : { "x-forwarded-for": forwardedFor }).then((mcp) => (clients.push(mcp), mcp));
  const warnings = (server: TestServer, words: string) => server.output().split("\n").filter((line) => line.includes('"level":"warn"') && line.includes(words));

  test("without TRUST_PROXY, a request carrying X-Forwarded-For links no fingerprint and restores none; the server says so once", async () => {
    const server = await start({});
    const userAgent = ua("proxied");
    const victim = await via(server, userAgent, "203.0.113.5");
    const created = await victim.ok("wallet_create", { airdropSol: 1 });
    // The same User-Agent through the same proxy, from another client or the same: nothing is restored.
    expect(await (await via(server, userAgent, "203.0.113.6")).ok("session_info")).toEqual(ANONYMOUS);
    expect(await (await via(server, userAgent, "203.0.113.5")).ok("session_info")).toEqual(ANONYMOUS);
    // Nor from the proxy's own address without the header: the wallet was never linked to it.
    expect(await (await connect(server, userAgent)).ok("session_info")).toEqual(ANONYMOUS);
    expect(recordedFingerprint(server, victim.transport.sessionId!)).toBeNull();
    // A sign-in over HTTP through the proxy links nothing either.
    await signIn(server.url, newWallet(), { "user-agent": userAgent, "x-forwarded-for": "203.0.113.5" });
    expect(await (await connect(server, userAgent)).ok("session_info")).toEqual(ANONYMOUS);
    // The wallet's own session still works.
    expect((await victim.ok("session_info")).walletAddress).toBe(created.address);
    const said = await logged(server, () => warnings(server, "X-Forwarded-For").length > 0);
    expect(said.length).toBeGreaterThan(0);
    expect(warnings(server, "X-Forwarded-For")).toHaveLength(1);
    expect(warnings(server, "X-Forwarded-For")[0]).toContain("set TRUST_PROXY");
    // A client without the header, on its own address, is restored as before.
    const direct = ua("direct");
    const own = await (await connect(server, direct)).ok("wallet_create", { airdropSol: 0 });
    expect(await (await connect(server, direct)).ok("session_info")).toMatchObject({ walletAddress: own.address, restoredBy: "fingerprint" });
  });

  test("an https BASE_URL without TRUST_PROXY: a proxy is in front, so no fingerprint at all, and the start says so", async () => {
    const server = await start({ BASE_URL: "https://walletgate.test" });
    expect(warnings(server, "BASE_URL is https")).toHaveLength(1);
    expect(warnings(server, "BASE_URL is https")[0]).toContain("TRUST_PROXY=127.0.0.1/32");
    const userAgent = ua("https");
    const first = await connect(server, userAgent);
    await first.ok("wallet_create", { airdropSol: 0 });
    expect(await (await connect(server, userAgent)).ok("session_info")).toEqual(ANONYMOUS);
    expect(recordedFingerprint(server, first.transport.sessionId!)).toBeNull();
  });

  test("TRUST_PROXY naming another address than the proxy's is as if unset: no restore, and the server says so", async () => {
    const server = await start({ TRUST_PROXY: "10.0.0.0/8" });
    const userAgent = ua("misnamed");
    await (await via(server, userAgent, "203.0.113.5")).ok("wallet_create", { airdropSol: 0 });
    expect(await (await via(server, userAgent, "198.51.100.77")).ok("session_info")).toEqual(ANONYMOUS);
    await logged(server, () => warnings(server, "X-Forwarded-For").length > 0);
    expect(warnings(server, "X-Forwarded-For")).toEqual([expect.stringContaining("from an address TRUST_PROXY does not name")]);
    // An https BASE_URL (a proxy in front) with the same TRUST_PROXY: no restore without the header either.
    const https = await start({ TRUST_PROXY: "10.0.0.0/8", BASE_URL: "https://walletgate.test" });
    const other = ua("misnamed-https");
    await (await connect(https, other)).ok("wallet_create", { airdropSol: 0 });
    expect(await (await connect(https, other)).ok("session_info")).toEqual(ANONYMOUS);
  });

  test("with TRUST_PROXY naming the proxy, fingerprints use the client's forwarded address", async () => {
    const server = await start({ TRUST_PROXY: "127.0.0.1/32", BASE_URL: "https://walletgate.test" });
    const userAgent = ua("trusted");
    const created = await (await via(server, userAgent, "203.0.113.5")).ok("wallet_create", { airdropSol: 0 });
    expect(await (await via(server, userAgent, "203.0.113.5")).ok("session_info")).toMatchObject({ walletAddress: created.address, restoredBy: "fingerprint" });
    expect(await (await via(server, userAgent, "203.0.113.6")).ok("session_info")).toEqual(ANONYMOUS);
    expect([warnings(server, "TRUST_PROXY"), warnings(server, "X-Forwarded-For")]).toEqual([[], []]);
  });

  test("with TRUST_PROXY as a hop count, fingerprints use the client's forwarded address too (a hop count trusts its proxy)", async () => {
    const server = await start({ TRUST_PROXY: "1" });
    const userAgent = ua("hops");
    const created = await (await via(server, userAgent, "203.0.113.5")).ok("wallet_create", { airdropSol: 0 });
    expect(await (await via(server, userAgent, "203.0.113.5")).ok("session_info")).toMatchObject({ walletAddress: created.address, restoredBy: "fingerprint" });
    expect(await (await via(server, userAgent, "203.0.113.6")).ok("session_info")).toEqual(ANONYMOUS);
  });
});

describe("short lifetimes: refresh, idle sweep and rebuild, expiry", () => {
  // SESSION_TTL_S=5 is under the 3600 s refresh threshold (every restore a second or more after issue refreshes) and lets a token
  // expire within the test; idle MCP sessions are swept after 300 ms (checked every 300 ms).
  const TTL_S = 5;
  const env = { SESSION_TTL_S: String(TTL_S), MCP_SESSION_TIMEOUT_MS: "300", LOG_LEVEL: "debug", BASE_URL: "http://walletgate.test" };
  let server: TestServer;
  let expiring: { mcp: Mcp; userAgent: string; created: Json };
  beforeAll(async () => {
    server = await start(env);
    // Created first so that its expiry overlaps the other tests' waits.
    const userAgent = ua("expiring");
    const mcp = await connect(server, userAgent);
    expiring = { mcp, userAgent, created: await mcp.ok("wallet_create", { airdropSol: 0 }) };
  });

  test("session_restore under the threshold refreshes: a new token of the same session; the old one still works", async () => {
    const owner = await connect(server, ua("refresh-owner"));
    const created = await owner.ok("wallet_create", { airdropSol: 0 });
    const old = decodeJwt(created.sessionToken).payload;
    expect(old.exp - old.iat).toBe(TTL_S);
    expect(await owner.ok("session_info")).toMatchObject({ refreshRecommended: true });

    const mcp = await connect(server, ua("refresh"));
    const { restored } = await restoreRefreshed(mcp, created.sessionToken, created.address, old);
    expect(await mcp.ok("session_info")).toMatchObject({ walletAddress: created.address, sessionId: old.sessionId, restoredBy: "binding", expiresAt: restored.expiresAt });

    for (const token of [created.sessionToken, restored.sessionToken]) {
      expect(await plain(server, "wallet_get_balance", token)).toMatchObject({ status: 200, body: { data: { address: created.address } } });
    }
  });

  test("an idle session is swept and rebuilt under the same id, still bound (by binding or by fingerprint)", async () => {
    const userAgent = ua("idle");
    const bound = await connect(server, userAgent);
    const created = await bound.ok("wallet_create", { airdropSol: 0 });
    const restored = await connect(server, userAgent);
    expect(await restored.ok("session_info")).toMatchObject({ walletAddress: created.address, restoredBy: "fingerprint" });
    const ended = await connect(server, ua("idle-delete"));
    const ids = [bound.transport.sessionId!, restored.transport.sessionId!, ended.transport.sessionId!];

    // Idle past MCP_SESSION_TIMEOUT_MS (300 ms): the first sweep that runs later than that drops all three.
    const idleFrom = Date.now() + 300;
    const swept = (lines: Json[]) => lines.some((l) => l.msg === "mcp sessions swept" && Date.parse(l.time) > idleFrom);
    expect(swept(await logged(server, swept, 10_000))).toBe(true);

    expect(await bound.ok("session_info")).toMatchObject({ walletAddress: created.address, restoredBy: "binding", mcpSessionId: ids[0] });
    expect(bound.transport.sessionId).toBe(ids[0]);
    expect((await bound.ok("wallet_get_balance")).address).toBe(created.address);
    expect(await restored.ok("session_info")).toMatchObject({ walletAddress: created.address, restoredBy: "fingerprint", mcpSessionId: ids[1] });
    // Rebuilt, not kept alive: the debug log (LOG_LEVEL=debug on this server) names both sessions — by a
    // prefix of the SHA-256 of their ids, never the ids themselves (an id works like a password).
    const keyOf = (id: string) => createHash("sha256").update(id).digest("hex").slice(0, 12);
    const rebuiltKeys = (lines: Json[]) => lines.filter((l) => l.msg === "mcp session rebuilt").map((l) => l.mcpSessionKey);
    const lines = await logged(server, (l) => ids.slice(0, 2).every((id) => rebuiltKeys(l).includes(keyOf(id!))));
    expect(rebuiltKeys(lines)).toEqual(expect.arrayContaining([keyOf(ids[0]!), keyOf(ids[1]!)]));
    expect(server.output()).not.toContain(ids[0]!);
    expect(lines.some((l) => l.msg === "mcp sessions swept")).toBe(true);

    // A swept session can still be ended; after that its id is gone for good.
    await ended.transport.terminateSession();
    expect((await rpc(server, ids[2]!, { method: "tools/list" }, ua("idle-delete"))).status).toBe(404);
  });

  test("a session disconnected from its wallet stays so after the idle sweep rebuilds it from its record", async () => {
    const mcp = await connect(server, ua("disconnect-swept"));
    await mcp.ok("wallet_create", { airdropSol: 0 });
    expect(await mcp.ok("wallet_disconnect")).toEqual({ disconnected: true });
    const idleFrom = Date.now() + 300;
    const swept = (lines: Json[]) => lines.some((l) => l.msg === "mcp sessions swept" && Date.parse(l.time) > idleFrom);
    expect(swept(await logged(server, swept, 10_000))).toBe(true);
    expect(await mcp.ok("session_info")).toEqual(ANONYMOUS);
  });

  test("a session that never bound a wallet is rebuilt too after being idle many timeouts and purges, not answered 404", async () => {
    // The SDK's client never initializes again after a 404: the record of an unbound session has to last.
    const quick = await start({ MCP_SESSION_TIMEOUT_MS: "300", PURGE_INTERVAL_MS: "100" });
    try {
      const mcp = await connect(quick, ua("unbound-idle"));
      const id = mcp.transport.sessionId!;
      expect(await mcp.ok("session_info")).toMatchObject({ authenticated: false });
      await sleep(1500); // five timeouts, a dozen purges
      expect(await mcp.ok("session_info")).toEqual({ authenticated: false, network: "localnet" });
      expect(mcp.transport.sessionId).toBe(id); // the same session, rebuilt
      expect((await mcp.ok("wallet_create", { airdropSol: 0 })).address).toBeString(); // and goes on as usual
    } finally {
      await quick.dispose();
    }
  });

  test("an expired token: TOKEN_EXPIRED by Bearer, by binding and for session_restore; no fingerprint restore", async () => {
    const { mcp, userAgent, created } = expiring;
    const exp = decodeJwt(created.sessionToken).payload.exp as number;
    await sleep(Math.max(0, exp * 1000 - Date.now()) + 150);

    // A wallet_create wallet: nobody can sign in to it again, and each refusal says so (not "sign in again").
    const error = expect.stringContaining(`${created.address} was made by wallet_create`);
    expect(await plain(server, "wallet_get_balance", created.sessionToken)).toMatchObject({ status: 401, body: { code: "TOKEN_EXPIRED", error } });
    const viaBearer = await connect(server, ua("expired-bearer"), created.sessionToken);
    expect(await viaBearer.call("wallet_get_balance")).toMatchObject({ success: false, code: "TOKEN_EXPIRED", error });
    expect(await viaBearer.call("session_restore", { token: created.sessionToken })).toMatchObject({ success: false, code: "TOKEN_EXPIRED", error });
    expect(await mcp.call("wallet_get_balance")).toMatchObject({ success: false, code: "TOKEN_EXPIRED", error });
    expect(await (await connect(server, userAgent)).ok("session_info")).toEqual(ANONYMOUS);
  });

  test("a bound session whose token row is gone (an older database restored, say): TOKEN_INVALID, not an internal error; disconnect clears it", async () => {
    const server = await start({});
    const mcp = await connect(server, ua("row-gone"));
    const created = await mcp.ok("wallet_create", { airdropSol: 0 });
    const { jti } = decodeJwt(created.sessionToken).payload;
    const db = openServerDatabase(server.dataDir);
    try {
      expect(db.query("DELETE FROM auth_tokens WHERE jti = ?").run(jti).changes).toBe(1);
    } finally {
      db.close();
    }
    expect(await mcp.call("wallet_get_balance")).toMatchObject({ success: false, code: "TOKEN_INVALID", error: expect.stringContaining("unknown") });
    expect(await mcp.call("session_info")).toMatchObject({ success: false, code: "TOKEN_INVALID" });
    expect(await (await connect(server, ua("row-gone-bearer"), created.sessionToken)).call("wallet_get_balance")).toMatchObject({ success: false, code: "TOKEN_INVALID" });
    expect(await mcp.ok("wallet_disconnect")).toEqual({ disconnected: true });
    expect(await mcp.ok("session_info")).toEqual(ANONYMOUS);
  });

  test("a bound session whose expired token's row the purge took (a day past exp): TOKEN_EXPIRED, saying its wallet was made by wallet_create", async () => {
    const server = await start({ SESSION_TTL_S: "2", PURGE_INTERVAL_MS: "300" });
    const mcp = await connect(server, ua("row-purged"));
    const created = await mcp.ok("wallet_create", { airdropSol: 0 });
    const { jti, exp } = decodeJwt(created.sessionToken).payload as { jti: string; exp: number };
    await sleep(Math.max(0, exp * 1000 - Date.now()) + 150);
    expect(await mcp.call("wallet_get_balance")).toMatchObject({ success: false, code: "TOKEN_EXPIRED" });
    // A day and more past its exp (the row's times moved back two days): the purge deletes it.
    const db = openServerDatabase(server.dataDir);
    try {
      expect(db.query("UPDATE auth_tokens SET issued_at = issued_at - 172800000, expires_at = expires_at - 172800000 WHERE jti = ?").run(jti).changes).toBe(1);
      await until(() => ((db.query("SELECT COUNT(*) AS n FROM auth_tokens WHERE jti = ?").get(jti) as { n: number }).n === 0 ? true : undefined));
    } finally {
      db.close();
    }
    const error = expect.stringContaining(`${created.address} was made by wallet_create`);
    expect(await mcp.call("wallet_get_balance")).toMatchObject({ success: false, code: "TOKEN_EXPIRED", error });
    expect(await mcp.call("session_info")).toMatchObject({ success: false, code: "TOKEN_EXPIRED" });
  });

  test("after a restart the session's id is rebuilt from its record, with its binding", async () => {
    // A server of its own with the default lifetime: a restart on a slow machine could outlast a 5-s token.
    const own = await start({ ...env, SESSION_TTL_S: "3600" });
    const userAgent = ua("restart");
    const mcp = await connect(own, userAgent);
    const created = await mcp.ok("wallet_create", { airdropSol: 0 });
    const sessionId = mcp.transport.sessionId!;
    const next = await own.restart();
    servers.push(next);
    const res = await rpc(next, sessionId, { method: "tools/call", params: { name: "session_info", arguments: {} } }, userAgent);
    expect(res.status).toBe(200);
    const body = (await res.json()) as { result: { structuredContent: Envelope } };
    expect(body.result.structuredContent).toMatchObject({ success: true, data: { walletAddress: created.address, restoredBy: "binding", mcpSessionId: sessionId } });
  });

  test("a binding ends with its token's key: a secret dropped (or another BASE_URL) ends it as it ends the token", async () => {
    const own = await start({ JWT_SECRET: "first-secret-first-secret-first-secret-01", BASE_URL: "http://walletgate.test" });
    const userAgent = ua("rotated");
    const mcp = await connect(own, userAgent);
    const created = await mcp.ok("wallet_create", { airdropSol: 0 });
    const sessionId = mcp.transport.sessionId!;
    const info = async (server: TestServer) => {
      const res = await rpc(server, sessionId, { method: "tools/call", params: { name: "wallet_get_balance", arguments: {} } }, userAgent);
      return ((await res.json()) as { result: { structuredContent: Envelope } }).result.structuredContent;
    };
    // Rotated with the old secret kept as previous: the binding holds, as the token does.
    const rotated = await own.restart({ JWT_SECRET: "second-secret-second-secret-second-02", JWT_SECRET_PREVIOUS: "first-secret-first-secret-first-secret-01" });
    servers.push(rotated);
    expect(await info(rotated)).toMatchObject({ success: true, data: { address: created.address } });
    // The old secret dropped: the token is TOKEN_INVALID over HTTP, and so is the session bound to it.
    const dropped = await rotated.restart({ JWT_SECRET_PREVIOUS: "" });
    servers.push(dropped);
    expect((await httpCall(dropped.url, "/auth/session", { token: created.sessionToken })).body.code).toBe("TOKEN_INVALID");
    expect(await info(dropped)).toMatchObject({ success: false, code: "TOKEN_INVALID" });
    // Nor does a new client from the same fingerprint get that wallet back.
    expect(await (await connect(dropped, userAgent)).ok("session_info")).toEqual(ANONYMOUS);
    // Another BASE_URL (issuer) likewise.
    const moved = await dropped.restart({ JWT_SECRET: "first-secret-first-secret-first-secret-01", BASE_URL: "http://elsewhere.test" });
    servers.push(moved);
    expect(await info(moved)).toMatchObject({ success: false, code: "TOKEN_INVALID" });
  }, 60_000); // four starts
});

describe("maximum session age", () => {
  // A restore refreshes whenever the new token would end later (6 s left is under the 3600 s threshold),
  // and a session may be refreshed for 8 s after its sign-in. No token outlives its session (docs/decisions.md), so at the maximum age the
  // newest token has expired too.
  // Wide enough that each step has seconds to spare on a slow machine.
  const TTL_S = 6;
  const MAX_AGE_S = 8;

  test("session_restore refreshes until SESSION_MAX_AGE_S after the sign-in, exp capped at it; then TOKEN_EXPIRED", async () => {
    const server = await start({ SESSION_TTL_S: String(TTL_S), REFRESH_THRESHOLD_S: "3600", SESSION_MAX_AGE_S: String(MAX_AGE_S) });
    const wallet = newWallet();
    const signedIn = await signIn(server.url, wallet);
    const signedInBy = Date.now(); // the session started no later than this
    const first = decodeJwt(signedIn.sessionToken).payload;
    expect(first.exp - first.iat).toBe(TTL_S);
    const sessionEndS = first.iat + MAX_AGE_S;

    const mcp = await connect(server, ua("max-age"));
    // Three seconds in, a full TTL would outlive the session: the new token ends with it. The one
    // refreshed is still valid (its exp is the sign-in's second + TTL_S).
    await sleep((first.iat + MAX_AGE_S - TTL_S + 1) * 1000 + 50 - Date.now());
    const { restored: r1, claims: second } = await restoreRefreshed(mcp, signedIn.sessionToken, wallet.address, first);
    expect(second.iat + TTL_S).toBeGreaterThan(sessionEndS);
    expect(second.exp).toBe(sessionEndS);
    // No refresh could end later now: the capped token comes back as it is, and no other is made.
    for (const token of [r1.sessionToken, r1.sessionToken]) {
      expect(await mcp.ok("session_restore", { token })).toMatchObject({ refreshed: false, sessionToken: r1.sessionToken, expiresAt: r1.expiresAt });
    }
    // Its parent again: the same refresh, not a second one.
    expect(await mcp.ok("session_restore", { token: signedIn.sessionToken })).toMatchObject({ refreshed: true, sessionToken: r1.sessionToken });

    await sleep(signedInBy + MAX_AGE_S * 1000 + 150 - Date.now());
    // A fresh client without a binding or a fingerprint link: the refusal is session_restore's own.
    const late = await connect(server, ua("max-age-late"));
    for (const token of [r1.sessionToken, signedIn.sessionToken]) {
      expect(await late.call("session_restore", { token })).toMatchObject({ success: false, code: "TOKEN_EXPIRED" });
    }
    expect(await httpCall(server.url, "/auth/session", { token: r1.sessionToken })).toMatchObject({ status: 401, body: { code: "TOKEN_EXPIRED" } });
    // Signing in again starts a new session (refreshed from its second second on).
    const again = await signIn(server.url, wallet);
    const againClaims = decodeJwt(again.sessionToken).payload;
    expect(againClaims.sessionId).not.toBe(first.sessionId);
    await sleep((againClaims.iat + 1) * 1000 + 20 - Date.now());
    expect(await late.ok("session_restore", { token: again.sessionToken })).toMatchObject({ walletAddress: wallet.address, refreshed: true });
  }, 60_000); // it waits out an 8-second session, then a second of the next one
});

describe("requests in flight: one id at a time, counted until the exchange ends, the cap held", () => {
  const PROTOCOL = "2025-06-18";
  const SOME_WALLET = "11111111111111111111111111111112";
  type Answer = { status: number; body: Json } | "unanswered";

  /** A session opened with raw HTTP: no event stream (GET) that a sweep would make the SDK client reopen. */
  async function rawSession(server: TestServer, userAgent: string): Promise<string> {
    const res = await fetch(`${server.url}/mcp`, {
      method: "POST",
      headers: { "content-type": "application/json", accept: "application/json, text/event-stream", "user-agent": userAgent },
      body: JSON.stringify({ jsonrpc: "2.0", id: 0, method: "initialize", params: { protocolVersion: PROTOCOL, capabilities: {}, clientInfo: { name: "raw", version: "1" } } }),
    });
    expect(res.status).toBe(200);
    const sessionId = res.headers.get("mcp-session-id")!;
    await post(server, sessionId, { jsonrpc: "2.0", method: "notifications/initialized" });
    return sessionId;
  }

  /** A raw POST of `body` (a message or a batch) into a session (as `bearer`'s wallet if given); "unanswered" when `signal` ended it first. */
  async function post(server: TestServer, sessionId: string, body: unknown, signal: AbortSignal = AbortSignal.timeout(5000), bearer?: string): Promise<Answer> {
    try {
      const res = await fetch(`${server.url}/mcp`, {
        method: "POST",
        signal,
        headers: {
          "content-type": "application/json",
          accept: "application/json, text/event-stream",
          "mcp-session-id": sessionId,
          "mcp-protocol-version": PROTOCOL,
          ...(bearer === undefined ? {} : { authorization: `Bearer ${bearer}` }),
        },
        body: JSON.stringify(body),
      });
      const text = await res.text();
      return { status: res.status, body: text === "" ? null : JSON.parse(text) };
    } catch (err) {
      if ((err as Error).name === "AbortError" || (err as Error).name === "TimeoutError") return "unanswered";
      throw err;
    }
  }

  const toolCall = (id: number, name: string, args: Json = {}) => ({ jsonrpc: "2.0", id, method: "tools/call", params: { name, arguments: args } });
  const cancel = (id: number) => ({ jsonrpc: "2.0", method: "notifications/cancelled", params: { requestId: id, reason: "test" } });
  /** A call cancelled in the same batch. */
  const cancelled = (id: number) => [toolCall(id, "session_info"), cancel(id)];

  /**
   * A devnet server whose ledger's RPC answers only while its gate is open: a wallet_get_balance made with
   * `bearer` (a signed-in wallet's token) stays in flight while the gate is closed, as a call waiting on a
   * slow node does. `waiting()`: how many such calls are held at the gate now (by their getBalance).
   */
  async function gatedServer(env: Record<string, string> = {}) {
    const rpc: LiteSvmRpc = await startLiteSvmRpc();
    let gate: ReturnType<typeof Promise.withResolvers<void>> | null = null;
    let waiting = 0;
    const proxy = Bun.serve({
      port: 0,
      hostname: "127.0.0.1",
      async fetch(request) {
        const body = await request.text();
        if (gate !== null) {
          const balance = body.includes('"getBalance"');
          if (balance) waiting++;
          await gate.promise;
          if (balance) waiting--;
        }
        return fetch(rpc.url, { method: "POST", headers: { "content-type": "application/json" }, body });
      },
    });
    const server = await start({ NETWORK: "devnet", SOLANA_RPC_URL: `http://127.0.0.1:${proxy.port}/`, ...env });
    const { sessionToken } = await signIn(server.url, newWallet());
    return {
      server,
      bearer: sessionToken as string,
      waiting: () => waiting,
      close: () => (gate ??= Promise.withResolvers<void>()),
      open: () => {
        gate?.resolve();
        gate = null;
      },
      dispose: async () => {
        gate?.resolve();
        await proxy.stop(true);
        await rpc.stop();
      },
    };
  }

  /** A raw POST with a Bearer token: calls run as that wallet. */
  const postAs = (server: TestServer, sessionId: string, bearer: string, body: unknown, signal?: AbortSignal) => post(server, sessionId, body, signal, bearer);
  const inUse = (id: number) => ({ status: 400, body: { jsonrpc: "2.0", id: null, error: { code: -32600, message: expect.stringContaining(`JSON-RPC id ${id} is in use`) } } });

  async function liveSessions(server: TestServer): Promise<number> {
    const text = await (await fetch(`${server.url}/metrics`)).text();
    return Number(/^walletgate_mcp_sessions_live (\d+)$/m.exec(text)![1]);
  }

  test("a malformed tools/call (no name, arguments not an object) is InvalidParams (-32602), not an internal error; the session goes on", async () => {
    const server = await start({});
    const mcp = await connect(server, ua("malformed"));
    const sessionId = mcp.transport.sessionId!;
    for (const [id, params] of [
      [1, { arguments: {} }],
      [2, { name: 5 }],
      [3, { name: "session_info", arguments: "x" }],
      [4, { name: "session_info", arguments: [1] }],
    ] as const) {
      const answer = await post(server, sessionId, { jsonrpc: "2.0", id, method: "tools/call", params });
      expect(answer).toMatchObject({ status: 200, body: { jsonrpc: "2.0", id, error: { code: -32602, message: expect.stringContaining("Invalid params for tools/call: params.") } } });
      expect(JSON.stringify(answer)).not.toContain('"expected"'); // the member named, not the schema library's dump
    }
    expect(await post(server, sessionId, toolCall(5, "session_info"))).toMatchObject({ status: 200, body: { id: 5, result: { structuredContent: { success: true } } } });
  });

  test("other methods' malformed params are InvalidParams naming the member, not an internal error with the schema's dump; params not an object is Invalid Request", async () => {
    const server = await start({});
    const mcp = await connect(server, ua("malformed-params"));
    const sessionId = mcp.transport.sessionId!;
    for (const [id, method, params, member] of [
      [1, "tools/list", { cursor: 5 }, "params.cursor"],
      [2, "initialize", {}, "params.protocolVersion"],
    ] as const) {
      const answer = await post(server, sessionId, { jsonrpc: "2.0", id, method, params });
      expect(answer).toMatchObject({ status: 200, body: { jsonrpc: "2.0", id, error: { code: -32602, message: expect.stringContaining(`Invalid params for ${method}: ${member}: `) } } });
      expect(JSON.stringify(answer)).not.toContain('"expected"'); // no schema dump
    }
    // Outside a session: an initialize that is not one is named as such, not told to initialize first.
    const fresh = await fetch(`${server.url}/mcp`, {
      method: "POST",
      headers: { "content-type": "application/json", accept: "application/json, text/event-stream" },
      body: JSON.stringify({ jsonrpc: "2.0", id: 7, method: "initialize", params: { protocolVersion: PROTOCOL } }),
    });
    expect([fresh.status, await fresh.json()]).toMatchObject([400, { jsonrpc: "2.0", id: 7, error: { code: -32602, message: expect.stringContaining("Invalid params for initialize: params.capabilities: ") } }]);
    for (const params of ["s", 5, null, [1]]) {
      expect(await post(server, sessionId, { jsonrpc: "2.0", id: 4, method: "ping", params })).toEqual({
        status: 400,
        body: { jsonrpc: "2.0", id: 4, error: { code: -32600, message: "Invalid Request: params must be an object" } },
      });
    }
    // Valid JSON that is no JSON-RPC 2.0 message is an Invalid Request too, not a parse error.
    for (const message of [
      { jsonrpc: "1.0", id: 8, method: "ping" },
      { jsonrpc: "2.0", id: { n: 1 }, method: "ping" },
      { jsonrpc: "2.0", id: 8, method: "ping", params: { _meta: "x" } },
      { jsonrpc: "2.0", id: 8 },
      { jsonrpc: "2.0", id: 8, method: 5 },
    ]) {
      expect(await post(server, sessionId, message)).toMatchObject({ status: 400, body: { jsonrpc: "2.0", error: { code: -32600, message: expect.stringContaining("Invalid Request: ") } } });
    }
    // A batch holding one such message is refused whole: nothing of it runs.
    expect(await post(server, sessionId, [{ jsonrpc: "2.0", id: 9, method: "ping" }, { jsonrpc: "2.0", id: 10, method: "ping", params: 5 }])).toEqual({
      status: 400,
      body: { jsonrpc: "2.0", id: null, error: { code: -32600, message: "Invalid Request: params must be an object" } },
    });
    // Outside a session too: an initialize that is no JSON-RPC 2.0 message.
    for (const message of [
      { jsonrpc: "1.0", id: 11, method: "initialize", params: { protocolVersion: PROTOCOL, capabilities: {}, clientInfo: { name: "t", version: "1" } } },
      { jsonrpc: "2.0", id: { a: 1 }, method: "initialize", params: {} },
    ]) {
      const outside = await fetch(`${server.url}/mcp`, {
        method: "POST",
        headers: { "content-type": "application/json", accept: "application/json, text/event-stream" },
        body: JSON.stringify(message),
      });
      const id = typeof message.id === "number" ? message.id : null; // its own id where it can be one
      expect([outside.status, await outside.json()]).toMatchObject([400, { jsonrpc: "2.0", id, error: { code: -32600 } }]);
    }
    expect(await post(server, sessionId, { jsonrpc: "2.0", id: 5, method: "ping" })).toMatchObject({ status: 200, body: { id: 5, result: {} } });
  });

  test("a request under an id still in flight in its session is refused at once; the first is answered", async () => {
    const server = await start({});
    const mcp = await connect(server, ua("duplicate"));
    const sessionId = mcp.transport.sessionId!;

    // Concurrent pairs under one id: whichever comes second while the first is in flight is refused; none is left unanswered.
    let refused = 0;
    for (let id = 100; id < 110; id++) {
      const pair = await Promise.all([0, 1].map(() => post(server, sessionId, toolCall(id, "session_auth", { walletAddress: SOME_WALLET }))));
      expect(pair).not.toContain("unanswered");
      const answers = pair as Exclude<Answer, "unanswered">[];
      const results = answers.filter((a) => a.status === 200);
      expect(results.length).toBeGreaterThanOrEqual(1);
      for (const result of results) expect(result.body).toMatchObject({ id, result: { structuredContent: { success: true, data: { nonce: expect.any(String) } } } });
      for (const refusal of answers.filter((a) => a.status !== 200)) expect(refusal).toEqual(inUse(id));
      refused += 2 - results.length;
    }
    expect(refused).toBeGreaterThan(0);
  });

  test("an id in flight stays in use until its request is answered, in a batch too; a cancellation is taken, not acted on: the request is answered", async () => {
    const gated = await gatedServer();
    try {
      const { server, bearer } = gated;
      const mcp = await connect(server, ua("in-flight"));
      const sessionId = mcp.transport.sessionId!;
      // A call waiting on the ledger keeps its id in use while it is open…
      gated.close();
      const held = new AbortController();
      const open = postAs(server, sessionId, bearer, toolCall(7, "wallet_get_balance"), held.signal);
      await until(() => gated.waiting() >= 1 || undefined);
      expect(await post(server, sessionId, toolCall(7, "session_info"))).toEqual(inUse(7));
      // …in a batch too, and a batch may not use one id twice; nothing of a refused batch is run.
      expect(await post(server, sessionId, [toolCall(8, "session_info"), toolCall(7, "session_info")])).toEqual(inUse(7));
      expect(await post(server, sessionId, [toolCall(9, "session_info"), toolCall(9, "session_info")])).toEqual({
        status: 400,
        body: { jsonrpc: "2.0", id: null, error: { code: -32600, message: expect.stringContaining("JSON-RPC id 9 is used twice in this batch") } },
      });
      // Other ids go on as before, and so does the SDK client in the same session.
      expect(await post(server, sessionId, [toolCall(8, "session_info"), toolCall(9, "session_info")])).toMatchObject({ status: 200, body: [{ id: 8 }, { id: 9 }] });
      expect(await mcp.ok("session_info")).toEqual(ANONYMOUS_DEVNET);
      held.abort();
      expect(await open).toBe("unanswered");
      gated.open();
      await until(async () => ((await post(server, sessionId, toolCall(7, "session_info"))) as { status: number }).status === 200 || undefined, 3000); // answered: free again

      // A cancellation is taken (202) and not acted on: the request goes on, is answered with what it did,
      // and its id is free again (handed to the SDK, the answer was dropped and the id held for good).
      gated.close();
      const waiting = postAs(server, sessionId, bearer, toolCall(11, "wallet_get_balance"));
      await until(() => gated.waiting() >= 1 || undefined);
      expect(await post(server, sessionId, cancel(11))).toEqual({ status: 202, body: null as unknown as Json });
      expect(await post(server, sessionId, [cancel(11), cancel(999)])).toEqual({ status: 202, body: null as unknown as Json });
      gated.open();
      expect(await waiting).toMatchObject({ status: 200, body: { jsonrpc: "2.0", id: 11, result: { structuredContent: { success: true } } } });
      expect(await post(server, sessionId, toolCall(11, "session_info"))).toMatchObject({ status: 200, body: { id: 11, result: {} } });
      // A "cancellation" with an id is a request: answered (unknown method), its id free again.
      const shaped = { jsonrpc: "2.0", id: 5, method: "notifications/cancelled", params: { requestId: 1 } };
      expect(await post(server, sessionId, shaped)).toMatchObject({ status: 200, body: { id: 5, error: { code: -32601 } } });
      expect(await post(server, sessionId, toolCall(5, "session_info"))).toMatchObject({ status: 200, body: { id: 5, result: {} } });
      // The transport's checks hold for cancellations as for any message: a page of another origin is refused.
      const foreign = await fetch(`${server.url}/mcp`, {
        method: "POST",
        headers: { "content-type": "application/json", accept: "application/json, text/event-stream", "mcp-session-id": sessionId, "mcp-protocol-version": PROTOCOL, origin: "https://evil.example" },
        body: JSON.stringify(cancel(5)),
      });
      expect(foreign.status).toBe(403);
      // Cancelled in the same batch (MCP 2025-03-26), again and again: each is answered, and the id reused.
      for (let round = 0; round < 50; round++) {
        expect(await post(server, sessionId, cancelled(12))).toMatchObject({ status: 200, body: { id: 12, result: { structuredContent: { success: true } } } });
      }
    } finally {
      await gated.dispose();
    }
  });

  test("a batch holds at most 10 messages: a larger one is refused before anything of it runs", async () => {
    const server = await start({});
    const sessionId = await rawSession(server, ua("batches"));
    expect(await post(server, sessionId, toolCall(1, "wallet_create", { airdropSol: 1 }))).toMatchObject({ status: 200, body: { result: { structuredContent: { success: true } } } });
    const to = "11111111111111111111111111111112";
    const balances = async (id: number) => {
      const answer = await post(server, sessionId, toolCall(id, "wallet_get_balance"));
      if (answer === "unanswered") throw new Error("unanswered");
      return JSON.stringify((answer.body as { result: { structuredContent: { data: { balances: unknown } } } }).result.structuredContent.data.balances);
    };
    const before = await balances(2);
    // Eleven transfers in one batch: refused whole, nothing sent (a money tool's answer is never replaced).
    const eleven = Array.from({ length: 11 }, (_, i) => toolCall(10 + i, "wallet_transfer", { to, amount: "0.001", token: "sol" }));
    expect(await post(server, sessionId, eleven)).toMatchObject({
      status: 400,
      body: { jsonrpc: "2.0", id: null, error: { code: -32600, message: expect.stringContaining("at most 10 messages; nothing of this one was run") } },
    });
    expect(await balances(3)).toBe(before);
    // Ten are run, each answered.
    const ten = Array.from({ length: 10 }, (_, i) => toolCall(30 + i, "session_info"));
    const answered = await post(server, sessionId, ten);
    expect(answered).toMatchObject({ status: 200 });
    expect(answered !== "unanswered" && Array.isArray(answered.body) ? answered.body.length : 0).toBe(10);
  }, 60_000);

  test("a session its client tried to pin (duplicate ids, a cancelled call) is still swept when idle", async () => {
    // Swept after 300 ms idle (checked every 300 ms).
    const server = await start({ MCP_SESSION_TIMEOUT_MS: "300", MCP_MAX_SESSIONS: "5" });
    const pinned: string[] = [];
    for (let i = 0; i < 6; i++) {
      // The SDK's client opens the session; it is closed (not ended) so that its event stream does not come
      // back after the sweep and rebuild the session.
      const mcp = await connect(server, ua("pinned"));
      pinned.push(mcp.transport.sessionId!);
      await mcp.client.close();
    }
    const attempts = pinned.map(async (sessionId) => {
      // Duplicate ids in flight, and a call cancelled in its batch, each left by its client after 300 ms at most.
      const twice = () => post(server, sessionId, toolCall(1, "session_auth", { walletAddress: SOME_WALLET }), AbortSignal.timeout(300));
      await Promise.all([twice(), twice(), post(server, sessionId, cancelled(2), AbortSignal.timeout(300))]);
    });
    await Promise.all(attempts);
    await until(async () => ((await liveSessions(server)) === 0 ? true : undefined), 3000).catch(async () => {
      throw new Error(`${await liveSessions(server)} pinned sessions still in memory past the idle timeout`);
    });
    // Swept, not ended: each comes back under its id.
    for (const sessionId of pinned) expect(await post(server, sessionId, toolCall(3, "session_info"))).toMatchObject({ status: 200, body: { id: 3 } });
  });

  test("idle SDK clients past MCP_MAX_SESSIONS do not evict each other in turn; each still works when it calls", async () => {
    const server = await start({ MCP_MAX_SESSIONS: "3", LOG_LEVEL: "debug" });
    const idle: Mcp[] = [];
    for (let i = 0; i < 5; i++) {
      const mcp = await connect(server, ua(`idle-${i}`));
      await mcp.ok("session_info");
      idle.push(mcp);
    }
    const rebuilds = () => server.output().split("\n").filter((line) => line.includes('"msg":"mcp session rebuilt"')).length;
    const before = rebuilds();
    await sleep(3000); // each client's event stream, closed by an eviction, is reopened by the SDK about a second later
    expect(rebuilds() - before).toBe(0); // a stream alone does not bring a session back into memory
    for (const mcp of idle) expect(await mcp.ok("session_info")).toMatchObject({ authenticated: false }); // a call does
    // A GET for an ended session is still 404.
    const ended = idle[0]!.transport.sessionId!;
    await idle[0]!.transport.terminateSession();
    const stream = await fetch(`${server.url}/mcp`, { headers: { accept: "text/event-stream", "mcp-session-id": ended, "mcp-protocol-version": "2025-06-18" } });
    expect(stream.status).toBe(404);
  }, 60_000);

  test("below MCP_MAX_SESSIONS a GET for a swept session rebuilds it and opens its event stream, as any request would", async () => {
    const server = await start({ MCP_SESSION_TIMEOUT_MS: "300" });
    const mcp = await connect(server, ua("swept-stream"));
    const sessionId = mcp.transport.sessionId!;
    await mcp.client.close(); // its own stream closed, so nothing brings it back but the GET below
    await until(async () => ((await liveSessions(server)) === 0 ? true : undefined), 3000);
    const aborted = new AbortController();
    const stream = await fetch(`${server.url}/mcp`, {
      headers: { accept: "text/event-stream", "mcp-session-id": sessionId, "mcp-protocol-version": "2025-06-18", "user-agent": ua("swept-stream") },
      signal: aborted.signal,
    });
    expect([stream.status, stream.headers.get("content-type")]).toEqual([200, "text/event-stream"]); // rebuilt (at the cap: 405)
    aborted.abort();
  });

  test("initializations at MCP_MAX_SESSIONS with every session busy: each is served or refused 503, never evicted while initializing", async () => {
    const gated = await gatedServer({ MCP_MAX_SESSIONS: "4" });
    const { server, bearer } = gated;
    // Three sessions busy with a call waiting on the ledger while its client holds it; one place is free.
    gated.close();
    const hold = new AbortController();
    const busy = await Promise.all([0, 1, 2].map(() => rawSession(server, ua("busy"))));
    const held = busy.map((sessionId) => postAs(server, sessionId, bearer, toolCall(1, "wallet_get_balance"), hold.signal));
    await until(() => gated.waiting() >= 3 || undefined);

    const outcomes = await Promise.all(
      Array.from({ length: 8 }, async () => {
        try {
          const mcp = await connect(server, ua("at-cap"));
          expect(await mcp.ok("session_info")).toEqual(ANONYMOUS_DEVNET);
          return "served";
        } catch (err) {
          return String(err);
        }
      }),
    );
    for (const outcome of outcomes) if (outcome !== "served") expect(outcome).toContain("every MCP session is busy");
    expect(outcomes).toContain("served");
    expect(await liveSessions(server)).toBeLessThanOrEqual(4);
    const refused = await fetch(`${server.url}/mcp`, {
      method: "POST",
      headers: { "content-type": "application/json", accept: "application/json, text/event-stream", "user-agent": ua("refused") },
      body: JSON.stringify({ jsonrpc: "2.0", id: 0, method: "initialize", params: { protocolVersion: PROTOCOL, capabilities: {}, clientInfo: { name: "raw", version: "1" } } }),
    });
    if (refused.status !== 200) {
      expect([refused.status, refused.headers.get("retry-after")]).toEqual([503, "1"]);
      expect(await refused.json()).toMatchObject({ jsonrpc: "2.0", error: { code: -32000 }, id: null });
    }

    // Their clients leave: the busy sessions may leave memory again, and newcomers are served.
    hold.abort();
    expect(await Promise.all(held)).toEqual(["unanswered", "unanswered", "unanswered"]);
    expect(await (await connect(server, ua("after"))).ok("session_info")).toEqual(ANONYMOUS_DEVNET);
    expect(await liveSessions(server)).toBeLessThanOrEqual(4);
    await gated.dispose();
  });
});
