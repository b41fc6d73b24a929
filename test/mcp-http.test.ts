// /mcp against the real server over sockets: the SDK's own Client over Streamable HTTP, the session and
// wallet tools with their happy paths and error codes, Bearer vs binding, and the plain JSON envelope.
// Sessions (fingerprints, refresh, idle rebuild, DELETE) are in mcp-sessions.test.ts.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { Keypair, VersionedTransaction } from "@solana/web3.js";
import { connectMcp, type Envelope, type McpTestClient } from "./helpers/mcp.ts";
import { runCli, startTestServer, type TestServer } from "./helpers/server.ts";
import { decodeJwt, newWallet, signIn, type Json, type TestWallet } from "./helpers/wallet.ts";

type Mcp = McpTestClient;

const SESSION_TOOLS = [
  "wallet_create", "session_auth", "wallet_connect", "session_info", "session_restore",
  "wallet_disconnect", "wallet_get_balance", "wallet_transfer", "wallet_get_history", "wallet_submit_transaction",
  "payment_create",
];
const SOL_FEE = 0.000005;
const ATA_RENT = 0.00203928;

let server: TestServer;
const clients: Mcp[] = [];
let uaCount = 0;
/** Every client gets its own User-Agent: fingerprint restore is on (localnet), a shared one would restore. */
const ua = (what: string) => `walletgate-test/${what}-${++uaCount}`;

beforeAll(async () => {
  server = await startTestServer({ AUTH_RATE_LIMIT: "off" });
});
afterAll(async () => {
  await Promise.all(clients.map((c) => c.client.close()));
  await server?.dispose();
});

async function connect(userAgent: string, token?: string): Promise<Mcp> {
  const mcp = await connectMcp(server.url, userAgent, token, "mcp-http-test");
  clients.push(mcp);
  return mcp;
}

/** The plain JSON envelope: POST /mcp {tool, params}. */
async function plain(body: unknown, init: { token?: string; userAgent?: string } = {}) {
  const headers: Record<string, string> = { "content-type": "application/json", "user-agent": init.userAgent ?? ua("plain") };
  if (init.token !== undefined) headers.authorization = `Bearer ${init.token}`;
  const res = await fetch(`${server.url}/mcp`, { method: "POST", headers, body: typeof body === "string" ? body : JSON.stringify(body) });
  return { status: res.status, body: (await res.json()) as Envelope & Json };
}

/** A web3.js Keypair holding the same key as a test wallet (it signs transactions; the wallet signs messages). */
function keypairOf(wallet: TestWallet): Keypair {
  const seed = Buffer.from(wallet.privateKey.export({ format: "jwk" }).d!, "base64url");
  const keypair = Keypair.fromSeed(new Uint8Array(seed));
  expect(keypair.publicKey.toBase58()).toBe(wallet.address);
  return keypair;
}

function signTransaction(base64: string, keypair: Keypair): string {
  const tx = VersionedTransaction.deserialize(Buffer.from(base64, "base64"));
  tx.sign([keypair]);
  return Buffer.from(tx.serialize()).toString("base64");
}

/** session_auth → sign → wallet_connect, in `mcp`'s session. */
async function connectWallet(mcp: Mcp, wallet: TestWallet): Promise<Json> {
  const challenge = await mcp.ok("session_auth", { walletAddress: wallet.address });
  return mcp.ok("wallet_connect", { walletAddress: wallet.address, nonce: challenge.nonce, signature: wallet.sign(challenge.message) });
}

describe("tools/list", () => {
  test("lists every tool with a description, and every parameter with one, in an object input schema", async () => {
    const { tools } = await (await connect(ua("list"))).client.listTools();
    const byName = new Map(tools.map((t) => [t.name, t]));
    for (const name of SESSION_TOOLS) expect(byName.has(name)).toBe(true);
    // mcp.md: inputs have schemas "with descriptions a language model can act on" — every tool, every parameter.
    for (const tool of tools) {
      const name = tool.name;
      expect(tool.description?.length ?? 0).toBeGreaterThan(20);
      expect(tool.inputSchema.type).toBe("object");
      for (const [param, schema] of Object.entries(tool.inputSchema.properties ?? {})) {
        expect({ tool: name, param, description: typeof (schema as Json).description }).toEqual({ tool: name, param, description: "string" });
      }
    }
    const shape = (name: string) => {
      const schema = byName.get(name)!.inputSchema;
      return { params: Object.keys(schema.properties ?? {}).sort(), required: [...(schema.required ?? [])].sort() };
    };
    expect(shape("wallet_create")).toEqual({ params: ["airdropSol", "airdropUsdc", "label"], required: [] });
    expect(shape("session_auth")).toEqual({ params: ["walletAddress"], required: ["walletAddress"] });
    expect(shape("wallet_connect")).toEqual({ params: ["nonce", "signature", "walletAddress"], required: ["nonce", "signature", "walletAddress"] });
    expect(shape("session_info")).toEqual({ params: [], required: [] });
    expect(shape("session_restore")).toEqual({ params: ["token"], required: ["token"] });
    expect(shape("wallet_disconnect")).toEqual({ params: [], required: [] });
    expect(shape("wallet_get_balance")).toEqual({ params: [], required: [] });
    expect(shape("wallet_transfer")).toEqual({ params: ["amount", "idempotencyKey", "memo", "to", "token"], required: ["amount", "to", "token"] });
    expect(shape("wallet_get_history")).toEqual({ params: ["before", "limit"], required: [] });
    expect(shape("wallet_submit_transaction")).toEqual({ params: ["transaction"], required: ["transaction"] });
    expect(byName.get("wallet_get_history")!.inputSchema.properties!.limit).toMatchObject({ minimum: 1, maximum: 100 });
    // What a tool refuses, its schema says: an order's delivery time as an agent's service's.
    expect(byName.get("provider_create_order")!.inputSchema.properties!.deliveryTime).toMatchObject({ type: "integer", minimum: 1, maximum: 525_600 });
    expect(byName.get("provider_register")!.inputSchema.properties!.services).toMatchObject({ items: { properties: { deliveryTime: { minimum: 1, maximum: 525_600 } } } });
    // The service token is named by this server's symbol where a tool mentions it (SERVICE_TOKEN_SYMBOL, "wgt" by default).
    expect((byName.get("wallet_transfer")!.inputSchema.properties!.token as { description?: string }).description).toBe(`sol, usdc or the service token's symbol ("wgt")`);
    expect((byName.get("payment_create")!.inputSchema.properties!.token as { description?: string }).description).toContain(`the service token's symbol ("wgt")`);
    // An amount is a number or a decimal string (spec README "Amounts"); the number's bounds are in the schema.
    expect(byName.get("wallet_create")!.inputSchema.properties!.airdropSol).toMatchObject({ anyOf: [{ type: "number", minimum: 0, maximum: 2 }, { type: "string" }] });
    // An unknown tool is a protocol error over MCP (InvalidParams, as the MCP spec lists it), and the session
    // goes on; the plain envelope answers it 404 NOT_FOUND (below).
    const asker = await connect(ua("list-unknown"));
    const refused = await asker.client.callTool({ name: "no_such_tool", arguments: {} }).then(() => null, (err: unknown) => err as { code?: number; message?: string });
    expect(refused).toMatchObject({ code: -32602, message: expect.stringContaining("Unknown tool: no_such_tool") });
    expect(await asker.ok("session_info")).toMatchObject({ authenticated: false });
  });
});

describe("wallet_create, session_info, wallet_get_balance", () => {
  test("creates a funded custodial wallet, binds the session and returns a working token", async () => {
    const mcp = await connect(ua("create"));
    expect(await mcp.ok("session_info")).toEqual({ authenticated: false, network: "localnet" });
    expect(await mcp.call("wallet_get_balance")).toMatchObject({ success: false, code: "UNAUTHENTICATED" });

    const created = await mcp.ok("wallet_create", { label: "ops bot" });
    expect(created).toMatchObject({
      label: "ops bot",
      network: "localnet",
      balances: { sol: 1, usdc: 0, wgt: 0 },
      authenticated: true,
      isNewSession: true,
    });
    expect(Object.keys(created.balances).sort()).toEqual(["sol", "usdc", "wgt"]);
    expect(created.address).toMatch(/^[1-9A-HJ-NP-Za-km-z]{32,44}$/);
    expect(typeof created.airdropSignature).toBe("string");
    const { payload } = decodeJwt(created.sessionToken);
    expect(payload.walletAddress).toBe(created.address);
    expect(created.expiresAt).toBe(new Date(payload.exp * 1000).toISOString());

    const info = await mcp.ok("session_info");
    expect(info).toMatchObject({
      authenticated: true,
      walletAddress: created.address,
      sessionId: payload.sessionId,
      network: "localnet",
      custodial: true,
      expiresAt: created.expiresAt,
      refreshRecommended: false,
      restoredBy: "binding",
      mcpSessionId: mcp.transport.sessionId,
    });
    expect(typeof mcp.transport.sessionId).toBe("string");
    expect(info.expiresInSeconds).toBeGreaterThan(604800 - 60);
    expect(await mcp.ok("wallet_get_balance")).toEqual({ address: created.address, network: "localnet", balances: { sol: 1, usdc: 0, wgt: 0 } });
    expect((await plain({ tool: "wallet_get_balance" }, { token: created.sessionToken })).body).toMatchObject({ success: true, data: { address: created.address } });
  });

  test("airdrops as asked; nothing when asked for nothing; the label defaults to null", async () => {
    const mcp = await connect(ua("create-airdrop"));
    expect(await mcp.ok("wallet_create", { airdropSol: 2, airdropUsdc: 12.5 })).toMatchObject({ label: null, balances: { sol: 2, usdc: 12.5, wgt: 0 } });
    expect(await mcp.ok("wallet_create", { airdropSol: "0.5", airdropUsdc: "3.25" })).toMatchObject({ balances: { sol: 0.5, usdc: 3.25, wgt: 0 } });
    const empty = await mcp.ok("wallet_create", { airdropSol: 0 });
    expect(empty.balances).toEqual({ sol: 0, usdc: 0, wgt: 0 });
    expect(empty).not.toHaveProperty("airdropSignature");
  });

  test("out-of-range params are VALIDATION_ERROR and create nothing", async () => {
    const mcp = await connect(ua("create-bad"));
    // A decimal string is an amount like a number (spec README "Amounts", which names airdrop amounts), held to the same bounds.
    for (const params of [{ airdropSol: 2.5 }, { airdropSol: -1 }, { airdropUsdc: -1 }, { label: "x".repeat(65) }, { label: "a\u0000" }, { label: "\u001b[31mred" }, { label: "lone \udc00" }, { airdropSol: "2.5" }, { airdropSol: "-1" }, { airdropSol: "one" }, { airdropUsdc: "1000000.01" }, { extra: true }]) {
      const result = await mcp.call("wallet_create", params);
      expect({ params, code: result.code }).toEqual({ params, code: "VALIDATION_ERROR" });
      expect(Array.isArray(result.details?.fields)).toBe(true);
    }
    expect(await mcp.ok("session_info")).toEqual({ authenticated: false, network: "localnet" });
  });

  test("an airdrop the localnet faucet refuses is VALIDATION_ERROR, not a created wallet with airdropError", async () => {
    // mcp.md excuses only a failing devnet faucet; on localnet the request itself is wrong (over the cap).
    const mcp = await connect(ua("create-too-much"));
    const result = await mcp.call("wallet_create", { airdropSol: 0, airdropUsdc: 2_000_000 });
    expect({ success: result.success, code: result.code, airdropError: result.data?.airdropError }).toEqual({
      success: false,
      code: "VALIDATION_ERROR",
      airdropError: undefined,
    });
    expect(await mcp.ok("session_info")).toEqual({ authenticated: false, network: "localnet" });
  });
});

describe("session_auth and wallet_connect", () => {
  test("a real signature signs in a non-custodial wallet and binds the session; the nonce is single-use", async () => {
    const mcp = await connect(ua("connect"));
    const wallet = newWallet();
    const before = Date.now();
    const challenge = await mcp.ok("session_auth", { walletAddress: wallet.address });
    expect(Object.keys(challenge).sort()).toEqual(["expiresAt", "message", "nonce"]);
    expect(challenge.message).toContain(`\n${wallet.address}\n`);
    expect(challenge.message).toContain(`\nNonce: ${challenge.nonce}\n`);
    expect(challenge.message).toContain("\nChain ID: solana:localnet\n");
    expect(Date.parse(challenge.expiresAt) - before).toBeGreaterThan(290_000);

    const signature = wallet.sign(challenge.message);
    const connected = await mcp.ok("wallet_connect", { walletAddress: wallet.address, nonce: challenge.nonce, signature });
    expect(connected).toMatchObject({ walletAddress: wallet.address, isNewSession: true });
    expect(decodeJwt(connected.sessionToken).payload.walletAddress).toBe(wallet.address);
    expect(connected.expiresAt).toBe(new Date(decodeJwt(connected.sessionToken).payload.exp * 1000).toISOString());
    expect(await mcp.ok("session_info")).toMatchObject({
      walletAddress: wallet.address,
      custodial: false,
      restoredBy: "binding",
      mcpSessionId: mcp.transport.sessionId,
    });

    const replay = await mcp.call("wallet_connect", { walletAddress: wallet.address, nonce: challenge.nonce, signature });
    expect(replay).toMatchObject({ success: false, code: "NONCE_USED" });
  });

  test("error codes: INVALID_ADDRESS, INVALID_SIGNATURE (bad or hex), NONCE_NOT_FOUND, another wallet's nonce", async () => {
    const mcp = await connect(ua("connect-bad"));
    const wallet = newWallet();
    expect(await mcp.call("session_auth", { walletAddress: "not-an-address" })).toMatchObject({ success: false, code: "INVALID_ADDRESS" });
    expect(await mcp.call("session_auth", { walletAddress: "1111" })).toMatchObject({ success: false, code: "INVALID_ADDRESS" });
    expect(await mcp.call("session_auth", {})).toMatchObject({ success: false, code: "VALIDATION_ERROR" });

    const challenge = await mcp.ok("session_auth", { walletAddress: wallet.address });
    // A valid-looking signature by another key: spends the nonce, INVALID_SIGNATURE.
    const forged = newWallet().sign(challenge.message);
    expect(await mcp.call("wallet_connect", { walletAddress: wallet.address, nonce: challenge.nonce, signature: forged })).toMatchObject({
      success: false,
      code: "INVALID_SIGNATURE",
    });
    const spent = await mcp.call("wallet_connect", { walletAddress: wallet.address, nonce: challenge.nonce, signature: wallet.sign(challenge.message) });
    expect(spent).toMatchObject({ success: false, code: "NONCE_USED" });

    const next = await mcp.ok("session_auth", { walletAddress: wallet.address });
    const hex = Buffer.from(wallet.sign(next.message), "base64").toString("hex");
    const hexResult = await mcp.call("wallet_connect", { walletAddress: wallet.address, nonce: next.nonce, signature: hex });
    expect(hexResult).toMatchObject({ success: false, code: "INVALID_SIGNATURE" });
    expect(hexResult.error).toContain("base64, not hex");

    const unknown = await mcp.call("wallet_connect", { walletAddress: wallet.address, nonce: "1".repeat(44), signature: wallet.sign(next.message) });
    expect(unknown).toMatchObject({ success: false, code: "NONCE_NOT_FOUND" });
    const other = newWallet();
    const othersNonce = await mcp.call("wallet_connect", { walletAddress: other.address, nonce: next.nonce, signature: other.sign(next.message) });
    expect(othersNonce).toMatchObject({ success: false, code: "NONCE_NOT_FOUND" });
    expect(await mcp.call("wallet_connect", { walletAddress: "nope", nonce: next.nonce, signature: wallet.sign(next.message) })).toMatchObject({ code: "INVALID_ADDRESS" });

    // The hex attempt was refused before the nonce lookup: the challenge is still good.
    expect(await mcp.ok("wallet_connect", { walletAddress: wallet.address, nonce: next.nonce, signature: wallet.sign(next.message) })).toMatchObject({
      walletAddress: wallet.address,
    });
  });
});

describe("session_restore and wallet_disconnect", () => {
  test("session_restore binds a new MCP session to the token's wallet; garbage is TOKEN_INVALID", async () => {
    const owner = await connect(ua("restore-owner"));
    const created = await owner.ok("wallet_create", { airdropSol: 0 });
    const { payload } = decodeJwt(created.sessionToken);

    const mcp = await connect(ua("restore"));
    expect(await mcp.call("session_restore", { token: "garbage" })).toMatchObject({ success: false, code: "TOKEN_INVALID" });
    expect(await mcp.call("session_restore", {})).toMatchObject({ success: false, code: "VALIDATION_ERROR" });
    expect(await mcp.ok("session_info")).toEqual({ authenticated: false, network: "localnet" });

    const restored = await mcp.ok("session_restore", { token: created.sessionToken });
    expect(restored).toEqual({
      walletAddress: created.address,
      sessionId: payload.sessionId,
      sessionToken: created.sessionToken,
      expiresAt: created.expiresAt,
      refreshed: false,
      isNewSession: false,
    });
    expect(await mcp.ok("session_info")).toMatchObject({
      walletAddress: created.address,
      sessionId: payload.sessionId,
      restoredBy: "binding",
      custodial: true,
      mcpSessionId: mcp.transport.sessionId,
    });
    expect((await mcp.ok("wallet_get_balance")).address).toBe(created.address);
  });

  test("wallet_disconnect revokes the token and unbinds the session", async () => {
    const mcp = await connect(ua("disconnect"));
    expect(await mcp.call("wallet_disconnect")).toMatchObject({ success: false, code: "UNAUTHENTICATED" });
    const created = await mcp.ok("wallet_create", { airdropSol: 0 });
    expect(await mcp.ok("wallet_disconnect")).toEqual({ disconnected: true });

    expect(await mcp.ok("session_info")).toEqual({ authenticated: false, network: "localnet" });
    expect(await mcp.call("wallet_get_balance")).toMatchObject({ success: false, code: "UNAUTHENTICATED" });
    expect(await mcp.call("wallet_disconnect")).toMatchObject({ success: false, code: "UNAUTHENTICATED" });

    const viaBearer = await connect(ua("disconnect-bearer"), created.sessionToken);
    // The wallet was made by wallet_create: nobody can sign in to it again, and the errors say so instead of "sign in again".
    const custodialDead = { success: false, code: "TOKEN_REVOKED", error: expect.stringContaining("walletgate wallets export") };
    expect(await viaBearer.call("wallet_get_balance")).toMatchObject(custodialDead);
    expect(await viaBearer.call("session_info")).toMatchObject(custodialDead);
    expect(await mcp.call("session_restore", { token: created.sessionToken })).toMatchObject(custodialDead);
    expect(((await mcp.call("session_restore", { token: created.sessionToken })) as { error: string }).error).not.toContain("sign in again");
    const overPlain = await plain({ tool: "wallet_get_balance" }, { token: created.sessionToken });
    expect(overPlain).toMatchObject({ status: 401, body: { success: false, code: "TOKEN_REVOKED" } });
  });

  test("wallet_disconnect with a Bearer token revokes that token", async () => {
    const owner = await connect(ua("disconnect-owner"));
    const created = await owner.ok("wallet_create", { airdropSol: 0 });
    const other = await connect(ua("disconnect-other"), created.sessionToken);
    expect(await other.ok("wallet_disconnect")).toEqual({ disconnected: true });
    // The same token bound the owner's session: that binding is dead too (a custodial wallet's, and said so).
    expect(await owner.call("wallet_get_balance")).toMatchObject({ success: false, code: "TOKEN_REVOKED", error: expect.stringContaining(`${created.address} was made by wallet_create`) });
    // A session whose binding died can still sign out: it forgets the wallet, and so does its fingerprint link.
    expect(await owner.call("session_info")).toMatchObject({ success: false, code: "TOKEN_REVOKED" });
    expect(await owner.ok("wallet_disconnect")).toEqual({ disconnected: true });
    expect(await owner.ok("session_info")).toEqual({ authenticated: false, network: "localnet" });
    expect(await owner.call("wallet_disconnect")).toMatchObject({ success: false, code: "UNAUTHENTICATED" });
    // A dead token in the header is reported, not signed out of.
    expect(await other.call("wallet_disconnect")).toMatchObject({ success: false, code: "TOKEN_REVOKED" });
  });

  test("wallet_disconnect of a binding whose token was revoked elsewhere drops the client's fingerprint link", async () => {
    const userAgent = ua("dead-binding");
    const wallet = newWallet();
    const signInOver = async (mcp: Mcp) => {
      const challenge = await mcp.ok("session_auth", { walletAddress: wallet.address });
      return mcp.ok("wallet_connect", { walletAddress: wallet.address, nonce: challenge.nonce, signature: wallet.sign(challenge.message) });
    };
    const first = await connect(userAgent);
    const t1 = await signInOver(first);
    await signInOver(await connect(userAgent)); // a later sign-in from this client: its fingerprint link now names that token
    expect(await (await connect(userAgent)).ok("session_info")).toMatchObject({ walletAddress: wallet.address, restoredBy: "fingerprint" });
    // The first session's token is revoked elsewhere; that session then signs out.
    expect((await fetch(`${server.url}/auth/revoke`, { method: "POST", headers: { authorization: `Bearer ${t1.sessionToken}` } })).status).toBe(200);
    // A connected wallet's owner can sign in again, and is told to.
    expect(await first.call("wallet_get_balance")).toMatchObject({ success: false, code: "TOKEN_REVOKED", error: expect.stringContaining("sign in again") });
    expect(await first.ok("wallet_disconnect")).toEqual({ disconnected: true });
    // This client's link to the wallet went with it: a new session from it is not restored.
    expect(await (await connect(userAgent)).ok("session_info")).toEqual({ authenticated: false, network: "localnet" });
  });

  test("wallet_disconnect with another wallet's Bearer token: this client's fingerprint forgets the bound wallet too", async () => {
    const userAgent = ua("bound-and-bearer");
    const mcp = await connect(userAgent);
    const bound = newWallet();
    await connectWallet(mcp, bound); // binds the session, and links this client to the wallet
    expect(await (await connect(userAgent)).ok("session_info")).toMatchObject({ walletAddress: bound.address, restoredBy: "fingerprint" });
    const other = (await signIn(server.url, newWallet(), { "user-agent": ua("elsewhere") })).sessionToken as string;
    mcp.headers.Authorization = `Bearer ${other}`;
    expect(await mcp.ok("wallet_disconnect")).toEqual({ disconnected: true }); // the header's token, and the binding
    delete mcp.headers.Authorization;
    expect(await mcp.ok("session_info")).toEqual({ authenticated: false, network: "localnet" });
    expect(await (await connect(userAgent)).ok("session_info")).toEqual({ authenticated: false, network: "localnet" });
    expect((await fetch(`${server.url}/auth/session`, { headers: { authorization: `Bearer ${other}` } })).status).toBe(401);
  });
});

describe("Bearer vs binding", () => {
  test("a header token wins over the binding; a bad one answers its code instead of falling back", async () => {
    const y = await (await connect(ua("bearer-y"))).ok("wallet_create", { airdropSol: 0 });
    const mcp = await connect(ua("bearer"));
    const z = await mcp.ok("wallet_create", { airdropSol: 0 });
    expect(await mcp.ok("session_info")).toMatchObject({ walletAddress: z.address, restoredBy: "binding" });

    mcp.headers.Authorization = `Bearer ${y.sessionToken}`;
    expect(await mcp.ok("session_info")).toMatchObject({ walletAddress: y.address, restoredBy: "token", mcpSessionId: mcp.transport.sessionId });
    expect((await mcp.ok("wallet_get_balance")).address).toBe(y.address);

    for (const bad of ["Bearer garbage", "Bearer", `Bearer ${y.sessionToken.slice(0, -2)}xx`]) {
      mcp.headers.Authorization = bad;
      // The HTTP request does not fail (no OAuth discovery): the tool answers the token's code.
      expect({ bad, result: await mcp.call("wallet_get_balance") }).toMatchObject({ bad, result: { success: false, code: "TOKEN_INVALID" } });
      expect(await mcp.call("session_info")).toMatchObject({ success: false, code: "TOKEN_INVALID" });
    }
    // Tools that need no wallet still work with a bad header.
    expect(await mcp.ok("session_auth", { walletAddress: y.address })).toHaveProperty("nonce");

    delete mcp.headers.Authorization;
    expect(await mcp.ok("session_info")).toMatchObject({ walletAddress: z.address, restoredBy: "binding" });
  });

  test("a tool that binds the session while the header names another wallet says the header still wins; with its own token or none it says nothing", async () => {
    const y = await (await connect(ua("note-y"))).ok("wallet_create", { airdropSol: 0 });
    const mcp = await connect(ua("note"), y.sessionToken);
    const z = await mcp.ok("wallet_create", { airdropSol: 0 });
    const says = (wallet: string) =>
      `this connection's Authorization header names ${y.address}; calls on this connection that carry it run as it, since a token in the header ` +
      `wins over a binding: send the new sessionToken in the header, or drop the header, to act as ${wallet}`;
    expect(z.note).toBe(says(z.address));
    expect(await mcp.ok("session_info")).toMatchObject({ walletAddress: y.address, restoredBy: "token" });
    expect((await mcp.ok("session_restore", { token: z.sessionToken })).note).toBe(says(z.address));
    // The header's own wallet: nothing to say.
    expect(await mcp.ok("session_restore", { token: y.sessionToken })).not.toHaveProperty("note");
    delete mcp.headers.Authorization;
    expect(await mcp.ok("session_restore", { token: z.sessionToken })).not.toHaveProperty("note");
    expect(await mcp.ok("session_info")).toMatchObject({ walletAddress: z.address, restoredBy: "binding" });
  });

  test("a client that starts with an invalid token initializes and lists tools; calls answer TOKEN_INVALID", async () => {
    const mcp = await connect(ua("bad-token"), "not.a.jwt");
    expect((await mcp.client.listTools()).tools.length).toBeGreaterThanOrEqual(SESSION_TOOLS.length);
    expect(await mcp.call("wallet_get_history")).toMatchObject({ success: false, code: "TOKEN_INVALID" });
    // wallet_create binds the session, but the header's token still decides who calls: the answer says so.
    const created = await mcp.ok("wallet_create", { airdropSol: 0 });
    expect(created.note).toBe(
      "this connection's Authorization header carries a token that is not valid (TOKEN_INVALID); calls that carry it fail, since a token in the " +
        `header wins over a binding: send the new sessionToken in the header, or drop the header, to act as ${created.address}`,
    );
    expect(await mcp.call("wallet_get_balance")).toMatchObject({ success: false, code: "TOKEN_INVALID" });
    delete mcp.headers.Authorization;
    expect((await mcp.ok("wallet_get_balance")).address).toBe(created.address);
  });

  test("a second client with another User-Agent and no token is refused while the first is bound", async () => {
    const first = await connect(ua("first"));
    const created = await first.ok("wallet_create", { airdropSol: 0 });
    const second = await connect(ua("second"));
    expect(await second.call("wallet_get_balance")).toMatchObject({ success: false, code: "UNAUTHENTICATED" });
    expect(await second.call("wallet_transfer", { to: created.address, amount: "0.1", token: "sol" })).toMatchObject({ success: false, code: "UNAUTHENTICATED" });
    expect(await second.ok("session_info")).toEqual({ authenticated: false, network: "localnet" });
    expect((await first.ok("wallet_get_balance")).address).toBe(created.address);
  });
});

describe("wallet_transfer, wallet_get_history, wallet_submit_transaction", () => {
  let alice: Mcp;
  let bob: Mcp;
  let a: Json;
  let b: Json;
  beforeAll(async () => {
    alice = await connect(ua("alice"));
    bob = await connect(ua("bob"));
    a = await alice.ok("wallet_create", { label: "alice", airdropUsdc: 10 });
    b = await bob.ok("wallet_create", { label: "bob", airdropSol: 0 });
  });
  const balances = async (mcp: Mcp) => (await mcp.ok("wallet_get_balance")).balances as Record<string, number>;

  test("custodial sol and usdc transfers move exact amounts; the sender pays fees and the new token account's rent", async () => {
    expect(await balances(alice)).toEqual({ sol: 1, usdc: 10, wgt: 0 });
    const sol = await alice.ok("wallet_transfer", { to: b.address, amount: "0.25", token: "sol", memo: "lunch" });
    expect(sol).toMatchObject({ from: a.address, to: b.address, token: "sol", amount: "0.25", fee: "0.000005", status: "confirmed", network: "localnet" });
    expect(Object.keys(sol).sort()).toEqual(["amount", "confirmedAt", "fee", "from", "network", "signature", "slot", "status", "to", "token"]);
    expect(typeof sol.signature).toBe("string");
    expect(Number.isInteger(sol.slot)).toBe(true);
    expect(new Date(sol.confirmedAt).toISOString()).toBe(sol.confirmedAt);
    expect(await balances(alice)).toEqual({ sol: 0.749995, usdc: 10, wgt: 0 }); // 1 - 0.25 - the fee
    expect(await balances(bob)).toEqual({ sol: 0.25, usdc: 0, wgt: 0 });

    const usdc = await alice.ok("wallet_transfer", { to: b.address, amount: 2.5, token: "usdc" });
    expect(usdc).toMatchObject({ from: a.address, to: b.address, token: "usdc", amount: "2.5", fee: "0.000005", status: "confirmed" });
    const afterRent = 0.74795072; // 1 - 0.25 - 2 × 0.000005 - 0.00203928
    expect(afterRent).toBeCloseTo(1 - 0.25 - 2 * SOL_FEE - ATA_RENT, 12);
    expect(await balances(alice)).toEqual({ sol: afterRent, usdc: 7.5, wgt: 0 });
    expect(await balances(bob)).toEqual({ sol: 0.25, usdc: 2.5, wgt: 0 });

    // Bob's token account exists now: the next usdc transfer costs only the fee.
    await alice.ok("wallet_transfer", { to: b.address, amount: "0.000001", token: "usdc" });
    expect(await balances(alice)).toEqual({ sol: 0.74794572, usdc: 7.499999, wgt: 0 }); // one more fee, no rent
    expect(await balances(bob)).toEqual({ sol: 0.25, usdc: 2.500001, wgt: 0 });

    const aHistory = (await alice.ok("wallet_get_history", { limit: 3 })).transactions as Json[];
    expect(aHistory).toHaveLength(3);
    expect(aHistory[1]).toMatchObject({ signature: usdc.signature, direction: "out", token: "usdc", amount: "2.5", counterparty: b.address, fee: "0.000005", status: "confirmed" });
    expect(aHistory[2]).toMatchObject({ signature: sol.signature, direction: "out", token: "sol", amount: "0.25", counterparty: b.address, memo: "lunch" });
    expect(new Date(aHistory[2]!.timestamp).toISOString()).toBe(aHistory[2]!.timestamp);
    const bHistory = (await bob.ok("wallet_get_history")).transactions as Json[];
    expect(bHistory.map((t) => [t.signature, t.direction, t.token, t.amount, t.counterparty])).toEqual([
      [aHistory[0]!.signature, "in", "usdc", "0.000001", a.address],
      [usdc.signature, "in", "usdc", "2.5", a.address],
      [sol.signature, "in", "sol", "0.25", a.address],
    ]);
    // Paging: before = the last signature seen.
    const older = (await alice.ok("wallet_get_history", { limit: 100, before: usdc.signature })).transactions as Json[];
    expect(older[0]!.signature).toBe(sol.signature);
    expect(older.slice(1).every((t) => t.direction === "in")).toBe(true); // the airdrops
  });

  test("bad amounts, tokens and addresses are refused; too much is INSUFFICIENT_FUNDS and moves nothing", async () => {
    const before = [await balances(alice), await balances(bob)];
    const refused: [Record<string, unknown>, string][] = [
      [{ to: b.address, amount: "1.0000001", token: "usdc" }, "VALIDATION_ERROR"],
      [{ to: b.address, amount: 0, token: "sol" }, "VALIDATION_ERROR"],
      [{ to: b.address, amount: "0", token: "usdc" }, "VALIDATION_ERROR"],
      [{ to: b.address, amount: 1e-7, token: "usdc" }, "VALIDATION_ERROR"],
      [{ to: b.address, amount: "9223372036.854775808", token: "sol" }, "VALIDATION_ERROR"], // 2^63 lamports
      [{ to: b.address, amount: "-1", token: "sol" }, "VALIDATION_ERROR"],
      [{ to: b.address, amount: "abc", token: "sol" }, "VALIDATION_ERROR"],
      [{ to: b.address, amount: "1", token: "doge" }, "VALIDATION_ERROR"],
      [{ to: b.address, amount: "1", token: "sol", memo: "m".repeat(201) }, "VALIDATION_ERROR"],
      [{ to: b.address, amount: "1", token: "sol", memo: "ma\ud800b" }, "VALIDATION_ERROR"], // on chain it would read "ma\ufffdb"
      [{ to: b.address, token: "sol" }, "VALIDATION_ERROR"],
      [{ to: "not-an-address", amount: "0.1", token: "sol" }, "INVALID_ADDRESS"],
      [{ to: "1111", amount: "0.1", token: "usdc" }, "INVALID_ADDRESS"],
      [{ to: b.address, amount: "100", token: "usdc" }, "INSUFFICIENT_FUNDS"],
      [{ to: b.address, amount: "5", token: "sol" }, "INSUFFICIENT_FUNDS"],
    ];
    for (const [params, code] of refused) {
      const result = await alice.call("wallet_transfer", params);
      expect({ params, success: result.success, code: result.code }).toEqual({ params, success: false, code });
    }
    expect([await balances(alice), await balances(bob)]).toEqual(before);
  });

  test("a token the sender never held (no token account) is INSUFFICIENT_FUNDS too, and costs nothing", async () => {
    const before = await balances(alice);
    expect(before.wgt).toBe(0);
    const result = await alice.call("wallet_transfer", { to: b.address, amount: "1", token: "wgt" });
    expect(result).toMatchObject({ success: false, code: "INSUFFICIENT_FUNDS" });
    expect(await balances(alice)).toEqual(before);
  });

  test("wallet_get_history: limit outside 1-100 is VALIDATION_ERROR; without a wallet UNAUTHENTICATED", async () => {
    for (const limit of [0, 101, 1.5]) {
      expect(await alice.call("wallet_get_history", { limit })).toMatchObject({ success: false, code: "VALIDATION_ERROR" });
    }
    expect((await alice.ok("wallet_get_history", { limit: 1 })).transactions).toHaveLength(1);
    const unknown = await alice.call("wallet_get_history", { before: "1".repeat(88) });
    expect(unknown).toMatchObject({ success: false, code: "VALIDATION_ERROR", details: { fields: [{ field: "before" }] } });
    expect(await (await connect(ua("history-anon"))).call("wallet_get_history")).toMatchObject({ success: false, code: "UNAUTHENTICATED" });
  });

  test("a connected wallet gets an unsigned transfer, signs it, and wallet_submit_transaction confirms it", async () => {
    const wallet = newWallet();
    const keypair = keypairOf(wallet);
    const carol = await connect(ua("carol"));
    await connectWallet(carol, wallet);
    // Funded from outside the server: the CLI's faucet writes the same database.
    const airdrop = await runCli(["ledger", "airdrop", "--to", wallet.address, "--sol", "0.5", "--json"], { DATA_DIR: server.dataDir });
    expect({ code: airdrop.code, stderr: airdrop.stderr }).toEqual({ code: 0, stderr: "" });
    const bobBefore = await balances(bob);

    const askedAt = Date.now();
    const unsigned = await carol.ok("wallet_transfer", { to: b.address, amount: "0.1", token: "sol", memo: "from carol" });
    expect(unsigned).toMatchObject({ from: wallet.address, to: b.address, token: "sol", amount: "0.1", network: "localnet" });
    // Until when it may be signed and submitted: its blockhash's life, about a minute.
    const expiresIn = Date.parse(unsigned.expiresAt) - askedAt;
    expect(expiresIn).toBeGreaterThanOrEqual(60_000);
    expect(expiresIn).toBeLessThan(60_000 + 5_000);
    expect(typeof unsigned.unsignedTransaction).toBe("string");
    expect(await balances(carol)).toEqual({ sol: 0.5, usdc: 0, wgt: 0 }); // nothing moved yet

    const signed = signTransaction(unsigned.unsignedTransaction, keypair);
    // Someone else's session may not submit it: not a wallet outside it, nor its recipient (named in it, no signer).
    expect(await alice.call("wallet_submit_transaction", { transaction: signed })).toMatchObject({ success: false, code: "FORBIDDEN" });
    expect(await bob.call("wallet_submit_transaction", { transaction: signed })).toMatchObject({ success: false, code: "FORBIDDEN" });
    expect(await plain({ tool: "wallet_submit_transaction", params: { transaction: signed } }, { token: a.sessionToken })).toMatchObject({
      status: 403,
      body: { success: false, code: "FORBIDDEN" },
    });
    expect(await carol.call("wallet_submit_transaction", { transaction: "not base64!" })).toMatchObject({ success: false, code: "VALIDATION_ERROR" });
    const notSigned = await carol.call("wallet_submit_transaction", { transaction: unsigned.unsignedTransaction });
    expect(notSigned).toMatchObject({ success: false, code: "TRANSACTION_REJECTED" });

    const result = await carol.ok("wallet_submit_transaction", { transaction: signed });
    expect(result).toMatchObject({ from: wallet.address, to: b.address, token: "sol", amount: "0.1", fee: "0.000005", status: "confirmed", network: "localnet" });
    expect(Object.keys(result).sort()).toEqual(["amount", "confirmedAt", "fee", "from", "network", "signature", "slot", "status", "to", "token"]);
    expect(await balances(carol)).toEqual({ sol: 0.399995, usdc: 0, wgt: 0 });
    const bobAfter = await balances(bob);
    expect(bobAfter).toEqual({ ...bobBefore, sol: bobAfter.sol! });
    expect(Math.round((bobAfter.sol! - bobBefore.sol!) * 1e9)).toBe(100_000_000);
    const [latest] = (await carol.ok("wallet_get_history", { limit: 1 })).transactions as Json[];
    expect(latest).toMatchObject({ signature: result.signature, direction: "out", amount: "0.1", counterparty: b.address, memo: "from carol" });

    // A replay of the same signed bytes is not a second transfer.
    expect(await carol.call("wallet_submit_transaction", { transaction: signed })).toMatchObject({ success: false, code: "CONFLICT" });
    expect(await balances(carol)).toEqual({ sol: 0.399995, usdc: 0, wgt: 0 });
  });

  test("wallet_get_history without a limit lists the newest 20 (mcp.md's default); limit 100 the rest too", async () => {
    const dan = await connect(ua("dan"));
    const d = await dan.ok("wallet_create", { label: "dan", airdropUsdc: 1 });
    const sent: string[] = [];
    for (let i = 0; i < 21; i++) sent.push((await dan.ok("wallet_transfer", { to: b.address, amount: "0.000001", token: "usdc" })).signature as string);
    const newest = ((await dan.ok("wallet_get_history")).transactions as Json[]).map((t) => t.signature);
    expect(newest).toEqual(sent.slice(1).reverse());
    const all = (await dan.ok("wallet_get_history", { limit: 100 })).transactions as Json[];
    expect(all.slice(0, 21).map((t) => t.signature)).toEqual(sent.slice().reverse());
    expect(all.slice(21).every((t) => t.direction === "in" && t.counterparty !== d.address)).toBe(true); // the airdrops
  });
});

describe("payment_create (x402; the compatibility with @x402/core and @x402/svm is in src/ledger/x402.test.ts)", () => {
  test("a custodial payer gets the X-PAYMENT header (v1) or PAYMENT-SIGNATURE (v2); its errors", async () => {
    const payer = await connect(ua("payer"));
    await payer.ok("wallet_create", { airdropUsdc: 10 });
    const payee = await connect(ua("payee"));
    const to = (await payee.ok("wallet_create", { airdropUsdc: 1 })).address as string; // its USDC account exists
    const feePayer = Keypair.generate().publicKey.toBase58();

    const v1 = await payer.ok("payment_create", { to, amount: "0.5", token: "usdc", feePayer });
    expect(v1).toMatchObject({ header: "X-PAYMENT", network: "solana-localnet", to, token: "usdc", amount: "0.5", feePayer });
    const decoded = JSON.parse(Buffer.from(v1.value as string, "base64").toString("utf8"));
    expect(decoded).toEqual(v1.payload);
    expect(decoded).toMatchObject({ x402Version: 1, scheme: "exact", network: "solana-localnet" });
    const tx = VersionedTransaction.deserialize(Buffer.from(decoded.payload.transaction, "base64"));
    expect(tx.message.version).toBe(0);
    expect(tx.signatures[0]!.every((b) => b === 0)).toBe(true); // the fee payer's slot is left to the facilitator

    const v2 = await payer.ok("payment_create", { to, amount: 1, token: "usdc", feePayer, x402Version: 2 });
    expect(v2).toMatchObject({ header: "PAYMENT-SIGNATURE", network: "solana:localnet" });

    expect(await payer.call("payment_create", { to, amount: "1", token: "sol", feePayer })).toMatchObject({ code: "NOT_SUPPORTED" });
    expect(await payer.call("payment_create", { to, amount: "1", token: "usdc" })).toMatchObject({ code: "VALIDATION_ERROR" }); // no fee payer
    expect(await payer.call("payment_create", { to, amount: "1" })).toMatchObject({ code: "VALIDATION_ERROR" }); // amount without token
    for (const bad of [{ to: "nope" }, { feePayer: "nope" }]) {
      expect(await payer.call("payment_create", { to, amount: "1", token: "usdc", feePayer, ...bad })).toMatchObject({ success: false, code: "INVALID_ADDRESS" });
    }
    // More than the payer holds (nothing above was submitted: it still has its 10 USDC).
    expect(await payer.call("payment_create", { to, amount: "10.000001", token: "usdc", feePayer })).toMatchObject({ success: false, code: "INSUFFICIENT_FUNDS" });
    expect(await payer.call("payment_create", { to, amount: "1.0000001", token: "usdc", feePayer })).toMatchObject({ code: "VALIDATION_ERROR" });
    const nobody = await connect(ua("nobody"));
    expect(await nobody.call("payment_create", { to, amount: "1", token: "usdc", feePayer })).toMatchObject({ code: "UNAUTHENTICATED" });
  });
});

describe("the plain JSON envelope", () => {
  test("answers the tool's envelope with the error table's status", async () => {
    const userAgent = ua("curl");
    expect(await plain({ tool: "session_info" }, { userAgent })).toEqual({ status: 200, body: { success: true, data: { authenticated: false, network: "localnet" } } });
    const unauthenticated = await plain({ tool: "wallet_get_balance" }, { userAgent });
    expect(unauthenticated).toMatchObject({ status: 401, body: { success: false, code: "UNAUTHENTICATED" } });
    expect(typeof unauthenticated.body.error).toBe("string");

    const created = await plain({ tool: "wallet_create", params: { airdropUsdc: 1 } }, { userAgent });
    expect(created).toMatchObject({ status: 200, body: { success: true, data: { balances: { sol: 1, usdc: 1 } } } });
    const token = created.body.data!.sessionToken as string;
    // No MCP session: nothing was bound, the next call without a token is still anonymous.
    expect((await plain({ tool: "wallet_get_balance" }, { userAgent })).status).toBe(401);
    expect(await plain({ tool: "wallet_get_balance" }, { userAgent, token })).toEqual({
      status: 200,
      body: { success: true, data: { address: created.body.data!.address, network: "localnet", balances: { sol: 1, usdc: 1, wgt: 0 } } },
    });
    expect(await plain({ tool: "session_info" }, { token })).toMatchObject({ status: 200, body: { data: { restoredBy: "token", mcpSessionId: null } } });

    expect(await plain({ tool: "no_such_tool" })).toMatchObject({ status: 404, body: { success: false, code: "NOT_FOUND" } });
    // The name is echoed cut to 100 characters, never inside one (a cut by UTF-16 units would split an emoji's pair).
    const echoed = await plain({ tool: "\u{1F600}".repeat(150) });
    expect(echoed).toMatchObject({ status: 404, body: { code: "NOT_FOUND" } });
    expect(String(echoed.body.error)).toContain(`unknown tool "${"\u{1F600}".repeat(100)}"`);
    expect(String(echoed.body.error).isWellFormed()).toBe(true);
    // Who is asking comes first: without a wallet, or with a dead token, a wrong parameter is not what is answered.
    expect(await plain({ tool: "wallet_get_balance", params: { x: 1 } }, { token: "not-a-token" })).toMatchObject({ status: 401, body: { code: "TOKEN_INVALID" } });
    expect(await plain({ tool: "wallet_transfer", params: {} })).toMatchObject({ status: 401, body: { code: "UNAUTHENTICATED" } });
    const bad = await plain({ tool: "wallet_get_history", params: { limit: 0 } }, { token });
    expect(bad).toMatchObject({ status: 400, body: { success: false, code: "VALIDATION_ERROR" } });
    expect(bad.body.details!.fields).toEqual([expect.objectContaining({ field: "limit" })]);
    const missing = await plain({ tool: "wallet_transfer", params: { to: created.body.data!.address } }, { token });
    expect(missing).toMatchObject({ status: 400, body: { code: "VALIDATION_ERROR" } });
    expect((missing.body.details!.fields as Json[]).map((f) => f.field).sort()).toEqual(["amount", "token"]);
    expect(await plain({ tool: "session_info", params: [1] })).toMatchObject({ status: 400, body: { code: "VALIDATION_ERROR" } });
    expect(await plain({ tool: 5 })).toMatchObject({ status: 400, body: { success: false, code: "VALIDATION_ERROR" } });
    // The envelope is {tool, params?}: a misspelt or extra member is refused, not ignored (nothing is made).
    const typo = await plain({ tool: "wallet_create", parmas: { airdropSol: 0 } });
    expect(typo).toMatchObject({ status: 400, body: { success: false, code: "VALIDATION_ERROR", details: { fields: [{ field: "parmas" }] } } });
    // A JSON object that is no JSON-RPC message is an envelope without its tool.
    for (const body of [{}, { params: {} }]) {
      expect(await plain(body)).toMatchObject({ status: 400, body: { success: false, code: "VALIDATION_ERROR", details: { fields: [{ field: "tool" }] } } });
    }
    expect(await plain({ tool: "session_auth", params: { walletAddress: "zzz" } })).toMatchObject({ status: 400, body: { code: "INVALID_ADDRESS" } });
    expect(await plain({ tool: "wallet_get_balance" }, { token: "garbage" })).toMatchObject({ status: 401, body: { success: false, code: "TOKEN_INVALID" } });
    expect(await plain({ tool: "session_info" }, { token: "garbage" })).toMatchObject({ status: 401, body: { code: "TOKEN_INVALID" } });
    const transfer = await plain({ tool: "wallet_transfer", params: { to: newWallet().address, amount: "9", token: "sol" } }, { token });
    expect(transfer).toMatchObject({ status: 422, body: { code: "INSUFFICIENT_FUNDS" } });
  });

  test("a body nesting deeper than 64 levels is refused before it is parsed, in a session or out of one; 64 are taken", async () => {
    const headers = { "content-type": "application/json", accept: "application/json, text/event-stream", "user-agent": ua("deep") };
    const opened = await fetch(`${server.url}/mcp`, {
      method: "POST",
      headers,
      body: JSON.stringify({ jsonrpc: "2.0", id: 0, method: "initialize", params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "raw", version: "1" } } }),
    });
    expect(opened.status).toBe(200);
    const session = { ...headers, "mcp-session-id": opened.headers.get("mcp-session-id")!, "mcp-protocol-version": "2025-06-18" };
    expect((await fetch(`${server.url}/mcp`, { method: "POST", headers: session, body: JSON.stringify({ jsonrpc: "2.0", method: "notifications/initialized" }) })).status).toBe(202);
    // A response message for an id nobody asked: the SDK writes it out as text to say so. `depth` levels in all.
    const response = (depth: number) => `{"jsonrpc":"2.0","id":7,"result":{"x":${"[".repeat(depth - 2)}${"]".repeat(depth - 2)}}}`;
    const answer = async (body: string, to: Record<string, string>) => {
      const res = await fetch(`${server.url}/mcp`, { method: "POST", headers: to, body });
      const text = await res.text();
      return { status: res.status, error: text === "" ? null : ((JSON.parse(text) as Json).error ?? null) };
    };
    // 30,000 levels in 60 KB (under the body limit) held the server for ~2 s a request.
    for (const [body, to] of [[response(30_000), session], [response(65), session], [response(65), headers]] as const) {
      expect(await answer(body, to)).toEqual({ status: 400, error: { code: -32600, message: "Invalid Request: the body nests arrays and objects deeper than 64 levels" } });
    }
    // A plain call (no `jsonrpc` member) hears it in the tool envelope's shape, as its other failures.
    const deepPlain = await fetch(`${server.url}/mcp`, { method: "POST", headers, body: `{"tool":"session_info","params":{"a":${"[".repeat(64)}${"]".repeat(64)}}}` });
    expect([deepPlain.status, await deepPlain.json()]).toEqual([
      400,
      {
        success: false,
        error: "the body nests arrays and objects deeper than 64 levels",
        code: "VALIDATION_ERROR",
        details: { fields: [{ field: "body", message: "the body nests arrays and objects deeper than 64 levels" }] },
      },
    ]);
    expect(await answer(response(64), session)).toEqual({ status: 202, error: null });
    const health = await fetch(`${server.url}/healthz`);
    expect(health.status).toBe(200);
  });

  test("a body that is not JSON is a JSON-RPC parse error when it names jsonrpc, else a plain call's VALIDATION_ERROR; a JSON-RPC request without a session is refused", async () => {
    const notJson = await fetch(`${server.url}/mcp`, { method: "POST", headers: { "content-type": "application/json", "user-agent": ua("raw") }, body: '{"jsonrpc":"2.0","id":1,' });
    expect(notJson.status).toBe(400);
    expect(await notJson.json()).toEqual({ jsonrpc: "2.0", error: { code: -32700, message: "Parse error: the body is not JSON" }, id: null });
    // In a session it is JSON-RPC whatever the text (the SDK writes jsonrpc after method and params).
    const cut = await fetch(`${server.url}/mcp`, { method: "POST", headers: { "content-type": "application/json", "mcp-session-id": "any", "user-agent": ua("raw") }, body: '{"method":"tools/call","params":{' });
    expect([cut.status, ((await cut.json()) as { error: { code: number } }).error.code]).toEqual([400, -32700]);
    const plainNotJson = await fetch(`${server.url}/mcp`, { method: "POST", headers: { "content-type": "application/json", "user-agent": ua("raw") }, body: '{"tool":"session_info","params":{' });
    expect([plainNotJson.status, await plainNotJson.json()]).toEqual([
      400,
      { success: false, error: "the body is not JSON", code: "VALIDATION_ERROR", details: { fields: [{ field: "body", message: "the body is not JSON" }] } },
    ]);
    const noSession = await fetch(`${server.url}/mcp`, {
      method: "POST",
      headers: { "content-type": "application/json", accept: "application/json, text/event-stream", "user-agent": ua("raw") },
      body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list" }),
    });
    expect(noSession.status).toBe(400);
    // An empty batch is an Invalid Request (JSON-RPC 2.0); a method /mcp does not take is 405 with Allow.
    const empty = await fetch(`${server.url}/mcp`, { method: "POST", headers: { "content-type": "application/json", accept: "application/json, text/event-stream", "user-agent": ua("raw") }, body: "[]" });
    expect([empty.status, ((await empty.json()) as { error: { code: number } }).error.code]).toEqual([400, -32600]);
    for (const method of ["PUT", "PATCH"]) {
      const other = await fetch(`${server.url}/mcp`, { method, headers: { "content-type": "application/json", "user-agent": ua("raw") }, body: "{}" });
      expect([method, other.status, other.headers.get("allow")]).toEqual([method, 405, "POST, GET, DELETE"]);
    }
  });
});

describe("wallet_create and the sign-in limits", () => {
  test("wallets made count on their own (50 per 15 minutes per network), not against the network's real sign-ins", async () => {
    const limited = await startTestServer({ AUTH_RATE_LIMIT: "on" });
    try {
      const create = () =>
        fetch(`${limited.url}/mcp`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ tool: "wallet_create", params: { airdropSol: 0 } }) });
      const codes: Record<string, number> = {};
      for (let i = 0; i < 51; i++) {
        const body = (await (await create()).json()) as Envelope;
        const key = body.success ? "ok" : String(body.code);
        codes[key] = (codes[key] ?? 0) + 1;
      }
      expect(codes).toEqual({ ok: 50, RATE_LIMITED: 1 });
      // A person signing in from that network is not locked out by them.
      expect((await signIn(limited.url, newWallet())).sessionToken).toEqual(expect.any(String));
    } finally {
      await limited.dispose();
    }
  }, 60_000);
});
