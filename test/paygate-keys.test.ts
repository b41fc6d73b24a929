// Owners, API keys, products and per-owner rate limits against the real server over sockets: the
// Dashboard API (Bearer), /public/* with X-API-Key, the CLI beside the running server.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { createHash } from "node:crypto";
import { columnsHolding } from "./helpers/db-scan.ts";
import { statusAndCode } from "./helpers/errors.ts";
import { runCli, startTestServer, type TestServer } from "./helpers/server.ts";
import { call, newWallet, signIn, type Json } from "./helpers/wallet.ts";

let server: TestServer;
let ownerA: { address: string; token: string };
let ownerB: { address: string; token: string };

async function owner(): Promise<{ address: string; token: string }> {
  const wallet = newWallet();
  return { address: wallet.address, token: (await signIn(server.url, wallet)).sessionToken };
}

const dash = (path: string, token: string, init: { method?: string; body?: unknown } = {}) => call(server.url, `/dashboard/api${path}`, { ...init, token });
const pub = (path: string, key: string | null, init: { method?: string; body?: unknown } = {}) =>
  call(server.url, `/public${path}`, { ...init, headers: key === null ? {} : { "x-api-key": key } });
const cli = (...args: string[]) => runCli(args, { DATA_DIR: server.dataDir });

async function newKey(token: string, label = "server"): Promise<string> {
  const res = await dash("/keys", token, { body: { label } });
  expect(res.status).toBe(201);
  return res.body.key as string;
}

const product = { title: "Pro plan", description: "All the features", type: "feature_unlock", price: "9.99", featureIds: ["export", "api"] };

beforeAll(async () => {
  server = await startTestServer({ AUTH_RATE_LIMIT: "off" });
  ownerA = await owner();
  ownerB = await owner();
});
afterAll(async () => {
  await server?.dispose();
});

describe("Dashboard API: owners and products", () => {
  test("needs the owner's session token; the owner is created on first use with the free tier", async () => {
    expect(await dash("/me", "not-a-token")).toMatchObject({ status: 401, body: { code: "TOKEN_INVALID" } });
    expect(await call(server.url, "/dashboard/api/me")).toMatchObject({ status: 401, body: { code: "UNAUTHENTICATED" } });
    const me = await dash("/me", ownerA.token);
    expect(me).toMatchObject({ status: 200, body: { walletAddress: ownerA.address, tier: "free", usage: { minute: 0, day: 0, limits: { minute: 60, day: 10000 } } } });
  });

  test("create, read, edit and archive a product; another owner's is 404", async () => {
    const created = await dash("/products", ownerA.token, { body: { ...product, accessDays: 30, redirectOrigins: ["https://app.example.com"] } });
    expect(created.status).toBe(201);
    expect(created.body).toMatchObject({
      title: "Pro plan",
      type: "feature_unlock",
      price: "9.99",
      currency: "USDC",
      network: "localnet",
      featureIds: ["export", "api"],
      payTo: ownerA.address,
      accessDays: 30,
      redirectOrigins: ["https://app.example.com"],
      status: "active",
    });
    const id = created.body.productId as string;
    expect(id).toMatch(/^prod_[1-9A-HJ-NP-Za-km-z]+$/);
    expect(created.body.paymentUrl).toBe(`${server.url}/pay/${id}`);
    expect((await dash(`/products/${id}`, ownerA.token)).body).toEqual(created.body);
    const edited = await dash(`/products/${id}`, ownerA.token, { method: "PATCH", body: { price: 12, title: "Pro" } });
    expect(edited.body).toMatchObject({ price: "12", title: "Pro", featureIds: ["export", "api"] });
    expect(await dash(`/products/${id}`, ownerA.token, { method: "PATCH", body: { type: "access" } })).toMatchObject({ status: 400, body: { code: "VALIDATION_ERROR" } });
    expect(await dash(`/products/${id}`, ownerB.token)).toMatchObject({ status: 404, body: { code: "NOT_FOUND" } });
    expect(await dash(`/products/${id}/archive`, ownerB.token, { method: "POST" })).toMatchObject({ status: 404 });
    expect((await dash(`/products/${id}/archive`, ownerA.token, { method: "POST" })).body.status).toBe("archived");
    const list = await dash("/products", ownerA.token);
    expect(list.body.products.map((p: Json) => p.productId)).toContain(id);
    expect((await dash("/products", ownerB.token)).body.products).toEqual([]);
  });

  test("GET /public/products and /public/products/:id: the spec's Product shape, newest first, archived ones with their status", async () => {
    const o = await owner();
    const key = await newKey(o.token);
    const older = (await dash("/products", o.token, { body: product })).body;
    await Bun.sleep(5); // a later createdAt
    const newer = (await dash("/products", o.token, { body: { title: "Day pass", description: "One day", type: "access", price: "1.5", accessDays: 1 } })).body;
    const archived = (await dash(`/products/${older.productId}/archive`, o.token, { method: "POST" })).body;
    expect(archived.status).toBe("archived");
    const listed = await pub("/products", key);
    expect(listed).toMatchObject({ status: 200 });
    expect(listed.body).toEqual({ products: [newer, archived] });
    expect(Object.keys(newer).sort()).toEqual(
      ["productId", "title", "description", "type", "price", "currency", "network", "featureIds", "payTo", "accessDays", "redirectOrigins", "status", "paymentUrl", "createdAt", "updatedAt"].sort(),
    );
    expect(newer).toMatchObject({ type: "access", price: "1.5", currency: "USDC", network: "localnet", featureIds: [], payTo: o.address, accessDays: 1, redirectOrigins: [], status: "active" });
    expect(Date.parse(newer.createdAt)).toBeGreaterThan(Date.parse(older.createdAt));
    expect(Date.parse(archived.updatedAt)).toBeGreaterThanOrEqual(Date.parse(older.updatedAt));
    expect((await pub(`/products/${older.productId}`, key)).body).toEqual(archived);
    expect((await pub(`/products/${newer.productId}`, key)).body).toEqual(newer);
  });

  test("every other error of the product, key, token and session routes, with its code", async () => {
    const o = await owner();
    const key = await newKey(o.token);
    const code = async (p: ReturnType<typeof call>) => statusAndCode(await p);
    const mine = (await dash("/products", o.token, { body: product })).body.productId as string;
    const theirs = (await dash("/products", ownerB.token, { body: product })).body.productId as string;
    for (const id of [theirs, "prod_unknown"]) {
      expect(await code(dash(`/products/${id}`, o.token, { method: "PATCH", body: { title: "Mine now" } }))).toEqual([404, "NOT_FOUND"]);
    }
    expect(await code(dash(`/products/${mine}`, o.token, { method: "PATCH", body: { payTo: "nope" } }))).toEqual([400, "INVALID_ADDRESS"]);
    // A PATCH body is a JSON object of known fields: an array, a scalar, a form or a misspelt field is refused,
    // not a 200 that changes nothing (products and webhook endpoints alike).
    const endpoint = (await dash("/webhooks", o.token, { body: { url: "https://hooks.example.com/in", events: ["payment.completed"] } })).body.endpointId as string;
    const patch = (path: string, body: string, type = "application/json") =>
      code(call(server.url, `/dashboard/api${path}`, { method: "PATCH", body, token: o.token, headers: { "content-type": type } }));
    for (const path of [`/products/${mine}`, `/webhooks/${endpoint}`]) {
      for (const [body, type] of [['[{"title":"x"}]'], ['"x"'], ["5"], ["null"], ['{"titel":"x","url":"x"}'], ['{"title":"x"}', "application/x-www-form-urlencoded"], ["title=x&enabled=true", "application/x-www-form-urlencoded"], ['{"title":"x"}', "text/plain"]] as const) {
        expect([path, body, await patch(path, body, type)]).toEqual([path, body, [400, "VALIDATION_ERROR"]]);
      }
      const form = new FormData();
      form.set("title", "Multipart");
      const multipart = await fetch(`${server.url}/dashboard/api${path}`, { method: "PATCH", body: form, headers: { authorization: `Bearer ${o.token}` } });
      expect([path, multipart.status]).toEqual([path, 400]);
    }
    // An edit that changes nothing writes nothing (no product.updated event: the time stays).
    const before = (await dash(`/products/${mine}`, o.token)).body;
    await Bun.sleep(5);
    for (const body of [{}, { title: before.title, price: before.price, featureIds: before.featureIds }]) {
      expect(await dash(`/products/${mine}`, o.token, { method: "PATCH", body })).toMatchObject({ status: 200, body: before });
    }
    expect((await dash(`/products/${mine}`, o.token, { method: "PATCH", body: { title: "Renamed" } })).body.updatedAt).not.toBe(before.updatedAt);
    for (const body of [{}, { label: "  " }, { label: "x".repeat(101) }, { label: "a\u0000b" }, { label: "a\u001bb" }, { label: "a\ud800b" }]) {
      expect([body, await code(dash("/keys", o.token, { body }))]).toEqual([body, [400, "VALIDATION_ERROR"]]);
    }
    for (const query of ["limit=0", "limit=1.5", "offset=-1", "status=gone"]) {
      expect([query, await code(dash(`/tokens?${query}`, o.token))]).toEqual([query, [400, "VALIDATION_ERROR"]]);
    }
    expect((await dash("/tokens?status=gone", o.token)).body.details).toEqual({
      fields: [{ field: "status", message: `Property 'status' should be one of: "active", "revoked", "expired"` }],
    });
    expect(await code(dash("/tokens?walletAddress=nope", o.token))).toEqual([400, "INVALID_ADDRESS"]);
    expect(await code(dash("/tokens/revoke", o.token, { body: {} }))).toEqual([400, "VALIDATION_ERROR"]);
    for (const accessToken of ["ft_nope", `ft_${"x".repeat(200)}`]) {
      // As /public/feature/revoke: an unknown token of any length is 404.
      expect(await code(dash("/tokens/revoke", o.token, { body: { accessToken } }))).toEqual([404, "NOT_FOUND"]);
      expect(await code(pub("/feature/revoke", key, { body: { accessToken } }))).toEqual([404, "NOT_FOUND"]);
    }
    // Ids are at most 64 characters wherever a route takes one.
    const long = "p".repeat(65);
    expect(await code(dash(`/products/${long}`, o.token))).toEqual([400, "VALIDATION_ERROR"]);
    expect(await code(dash(`/products/${long}/archive`, o.token, { method: "POST" }))).toEqual([400, "VALIDATION_ERROR"]);
    expect(await code(dash(`/keys/${long}`, o.token, { method: "DELETE" }))).toEqual([400, "VALIDATION_ERROR"]);
    expect(await code(pub(`/products/${long}`, key))).toEqual([400, "VALIDATION_ERROR"]);
    expect(await code(call(server.url, `/pay/${long}/product`))).toEqual([400, "VALIDATION_ERROR"]);
    // The session cookie route, from this server's own origin, with no token or an over-long one.
    const origin = new URL(server.url).origin;
    for (const body of [{}, { sessionToken: "x".repeat(2049) }]) {
      expect(await code(call(server.url, "/dashboard/api/session", { body, headers: { origin } }))).toEqual([400, "VALIDATION_ERROR"]);
    }
  });

  test("bad products are refused with the field named", async () => {
    const bad = async (body: Json) => (await dash("/products", ownerA.token, { body })).body;
    // A choice names what it accepts (the schema library's own words list only the members' types).
    expect(await bad({ ...product, type: "subscription" })).toMatchObject({
      code: "VALIDATION_ERROR",
      details: { fields: [{ field: "type", message: `Property 'type' should be one of: "feature_unlock", "access"` }] },
    });
    // Its text too: a JSON number is asked for ("0x10" is not 16 days, nor "0" a number out of range).
    for (const accessDays of [0, 2.5, -1, 36501, "0x10", "30", "1e3", "0"]) {
      expect(await bad({ ...product, type: "access", accessDays })).toMatchObject({
        code: "VALIDATION_ERROR",
        error: "invalid body",
        details: { fields: [{ field: "accessDays", message: "Property 'accessDays' should be an integer from 1 to 36500 or null" }] },
      });
    }
    expect(await bad({ ...product, price: "0" })).toMatchObject({ code: "VALIDATION_ERROR", details: { fields: [{ field: "price" }] } });
    expect(await bad({ ...product, price: "1.0000001" })).toMatchObject({ code: "VALIDATION_ERROR" });
    expect(await bad({ ...product, featureIds: [] })).toMatchObject({ code: "VALIDATION_ERROR", details: { fields: [{ field: "featureIds" }] } });
    expect(await bad({ ...product, currency: "DOGE" })).toMatchObject({ code: "VALIDATION_ERROR", details: { fields: [{ field: "currency" }] } });
    expect(await bad({ ...product, payTo: "nope" })).toMatchObject({ code: "INVALID_ADDRESS", details: { fields: [{ field: "payTo" }] } });
    expect(await bad({ ...product, payTo: "1".repeat(65) })).toMatchObject({ code: "INVALID_ADDRESS", details: { fields: [{ field: "payTo" }] } });
    // A program's address is no wallet: a sale's money would be lost for good (the mint and token accounts: products.test.ts).
    expect(await bad({ ...product, payTo: "TokenkegQfeZyiNwAJbNbGKPFXCWuBvf9Ss623VQ5DA" })).toMatchObject({ code: "VALIDATION_ERROR", details: { fields: [{ field: "payTo" }] } });
    // An unknown (or misspelt) field is refused, not dropped; so is a body that is not an object.
    expect(await bad({ ...product, acessDays: 30 })).toMatchObject({ code: "VALIDATION_ERROR", details: { fields: [{ field: "acessDays", message: expect.stringMatching(/^unknown field/) }] } });
    expect((await dash("/products", ownerA.token, { body: [] })).body).toMatchObject({ code: "VALIDATION_ERROR", details: { fields: [{ field: "body", message: "must be a JSON object" }] } });
    expect((await dash("/keys", ownerA.token, { body: { label: "x", revoked: true } })).body).toMatchObject({ code: "VALIDATION_ERROR", details: { fields: [{ field: "revoked" }] } });
    expect((await dash("/webhooks", ownerA.token, { body: { url: "https://example.com/h", events: ["product.created"], enabled: false } })).body).toMatchObject({
      code: "VALIDATION_ERROR",
      details: { fields: [{ field: "enabled" }] },
    });
    expect(await bad({ ...product, redirectOrigins: ["https://x.example/path"] })).toMatchObject({ code: "VALIDATION_ERROR" });
    expect(await bad({ ...product, title: " " })).toMatchObject({ code: "VALIDATION_ERROR", details: { fields: [{ field: "title" }] } });
    const access = await dash("/products", ownerA.token, { body: { title: "Day pass", description: "", type: "access", price: 1, currency: "wgt" } });
    expect(access).toMatchObject({ status: 201, body: { currency: "WGT", featureIds: [], accessDays: null } });
  });

  test("a price of up to 2^63-1 base units is kept exactly (past 2^53 too); one unit more is VALIDATION_ERROR", async () => {
    const most = "9223372036854.775807"; // 2^63-1 base units of USDC (6 decimals)
    const created = await dash("/products", ownerA.token, { body: { ...product, price: most } });
    expect(created).toMatchObject({ status: 201, body: { price: most } });
    const id = (created.body as { productId: string }).productId;
    expect((await dash(`/products/${id}`, ownerA.token)).body).toMatchObject({ price: most });
    const buyerView = await fetch(`${server.url}/pay/${id}/product`);
    expect(await buyerView.json()).toMatchObject({ price: most });
    const buyer = newWallet();
    const checkout = await fetch(`${server.url}/pay/${id}/checkout`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ walletAddress: buyer.address }),
    });
    expect(checkout.status).toBe(200);
    expect(await checkout.json()).toMatchObject({ amount: most });
    const edited = await dash(`/products/${id}`, ownerA.token, { method: "PATCH", body: { price: "9007199254.740993" } }); // 2^53+1
    expect(edited.body).toMatchObject({ price: "9007199254.740993" });
    const tooMuch = await dash("/products", ownerA.token, { body: { ...product, price: "9223372036854.775808" } });
    expect(tooMuch.body).toMatchObject({ code: "VALIDATION_ERROR", details: { fields: [{ field: "price" }] } });
  });
});

describe("API keys and /public/*", () => {
  test("a key is shown once, stored as a hash, listed by prefix, and revoked at once", async () => {
    const created = await dash("/keys", ownerA.token, { body: { label: "prod server" } });
    expect(created).toMatchObject({ status: 201, body: { label: "prod server" } });
    const key = created.body.key as string;
    expect(key).toMatch(/^pk_[0-9a-f]{64}$/);
    expect(created.body.prefix).toBe(key.slice(0, 12));
    const listed = await dash("/keys", ownerA.token);
    expect(JSON.stringify(listed.body)).not.toContain(key);
    expect(listed.body.keys.find((k: Json) => k.keyId === created.body.keyId)).toMatchObject({ prefix: key.slice(0, 12), lastUsedAt: null, revokedAt: null });

    expect((await pub("/products", key)).status).toBe(200);
    const used = (await dash("/keys", ownerA.token)).body.keys.find((k: Json) => k.keyId === created.body.keyId);
    expect(used.lastUsedAt).not.toBeNull();
    // Written at most once a minute (the minute itself: src/paygate/keys.test.ts): more requests leave it.
    for (let i = 0; i < 3; i++) expect((await pub("/products", key)).status).toBe(200);
    expect((await dash("/keys", ownerA.token)).body.keys.find((k: Json) => k.keyId === created.body.keyId).lastUsedAt).toBe(used.lastUsedAt);
    // Only its SHA-256 is kept: the key is in no column of the database, nor in the log.
    const database = `${server.dataDir}/walletgate.db`;
    expect(columnsHolding(database, key)).toEqual([]);
    expect(columnsHolding(database, createHash("sha256").update(key).digest("hex"))).toEqual(["api_keys.key_hash"]);
    expect(server.output()).not.toContain(key);

    expect(await dash(`/keys/${created.body.keyId}`, ownerB.token, { method: "DELETE" })).toMatchObject({ status: 404 });
    expect(await dash(`/keys/${created.body.keyId}`, ownerA.token, { method: "DELETE" })).toMatchObject({ status: 200, body: { revoked: true } });
    expect(await pub("/products", key)).toMatchObject({ status: 401, body: { code: "INVALID_API_KEY", error: "Invalid or expired API key" } });
  });

  test("at most 100 unrevoked keys: the 101st is 409 INVALID_STATE until one is revoked", async () => {
    const o = await owner();
    const made: string[] = [];
    for (let i = 0; i < 100; i++) {
      const res = await dash("/keys", o.token, { body: { label: `k${i}` } });
      expect([i, res.status]).toEqual([i, 201]);
      made.push(res.body.keyId as string);
    }
    const refused = await dash("/keys", o.token, { body: { label: "one more" } });
    expect(refused).toMatchObject({ status: 409, body: { code: "INVALID_STATE", error: expect.any(String) } });
    expect((await dash("/keys", o.token)).body.keys).toHaveLength(100);
    expect((await dash(`/keys/${made[0]}`, o.token, { method: "DELETE" })).status).toBe(200);
    expect((await dash("/keys", o.token, { body: { label: "one more" } })).status).toBe(201);
  });

  test("missing and invalid keys: the exact messages, no rate-limit headers", async () => {
    const missing = await pub("/products", null);
    expect(missing).toMatchObject({ status: 401, body: { error: "API key required", code: "MISSING_API_KEY" } });
    expect(missing.headers.get("x-ratelimit-limit")).toBeNull();
    for (const bad of ["pk_" + "0".repeat(64), "pk_short", "sk_" + "a".repeat(64), "PK_" + "a".repeat(64)]) {
      const res = await pub("/products", bad);
      expect(res).toMatchObject({ status: 401, body: { error: "Invalid or expired API key", code: "INVALID_API_KEY" } });
      expect(res.headers.get("x-ratelimit-remaining")).toBeNull();
    }
  });

  test("the key comes first: a body that is not JSON, or a path that names nothing, is 401 without a valid key", async () => {
    const o = await owner();
    const key = await newKey(o.token);
    for (const path of ["/access/check", "/feature/verify", "/feature/revoke"]) {
      expect(await pub(path, null, { body: "{not json" })).toMatchObject({ status: 401, body: { code: "MISSING_API_KEY" } });
      expect(await pub(path, "pk_" + "0".repeat(64), { body: "{not json" })).toMatchObject({ status: 401, body: { code: "INVALID_API_KEY" } });
      const bad = await pub(path, key, { body: "{not json" });
      expect(bad).toMatchObject({ status: 400, body: { code: "VALIDATION_ERROR", error: "request body is not valid JSON", details: { fields: [{ field: "body" }] } } });
      expect(bad.headers.get("x-ratelimit-limit")).toBe("60"); // an answer to a valid key: counted, with its headers
    }
    expect(await pub("/no-such-endpoint", null)).toMatchObject({ status: 401, body: { code: "MISSING_API_KEY" } });
    expect(await pub("/products/x/y/z", "pk_" + "0".repeat(64), { method: "DELETE" })).toMatchObject({ status: 401, body: { code: "INVALID_API_KEY" } });
    const unknown = await pub("/no-such-endpoint", key, { method: "PUT", body: { a: 1 } });
    expect(unknown).toMatchObject({ status: 404, body: { code: "NOT_FOUND" } });
    expect(unknown.headers.get("x-ratelimit-remaining")).toBe(String(60 - 3 - 1));
    // A body that is not JSON to a path that names nothing, or to a method a route does not take: the key first.
    for (const [path, method] of [["/no-such-endpoint", "POST"], ["/products", "POST"]] as const) {
      expect(await pub(path, null, { method, body: "{not json" })).toMatchObject({ status: 401, body: { code: "MISSING_API_KEY" } });
      const named = await pub(path, key, { method, body: "{not json" });
      expect(named).toMatchObject({ status: 404, body: { code: "NOT_FOUND" } });
      expect(named.headers.get("x-ratelimit-limit")).toBe("60");
    }
    // The endpoints themselves still answer as before.
    expect((await pub("/products", key)).status).toBe(200);
  });

  test("an address of any length that is not one is INVALID_ADDRESS; a token of any length that is unknown is not valid", async () => {
    const o = await owner();
    const key = await newKey(o.token);
    const created = await dash("/products", o.token, { body: product });
    const long = "A".repeat(200);
    expect(await pub("/access/check", key, { body: { productId: created.body.productId, walletAddress: long } })).toMatchObject({
      status: 400,
      body: { code: "INVALID_ADDRESS" },
    });
    expect(await pub(`/feature/tokens?walletAddress=${long}`, key)).toMatchObject({ status: 400, body: { code: "INVALID_ADDRESS" } });
    expect(await call(server.url, `/pay/${created.body.productId}/checkout`, { body: { walletAddress: long } })).toMatchObject({
      status: 400,
      body: { code: "INVALID_ADDRESS" },
    });
    const token = `ft_${"x".repeat(300)}`;
    expect(await pub("/feature/verify", key, { body: { accessToken: token } })).toMatchObject({ status: 200, body: { valid: false } });
    expect(await pub("/feature/revoke", key, { body: { accessToken: token } })).toMatchObject({
      status: 404,
      body: { success: false, code: "NOT_FOUND" },
    });
  });

  test("owner isolation: another owner's product is 404 through the public API", async () => {
    const keyB = await newKey(ownerB.token);
    const mine = await dash("/products", ownerA.token, { body: product });
    expect(await pub(`/products/${mine.body.productId}`, keyB)).toMatchObject({ status: 404, body: { code: "NOT_FOUND" } });
    const keyA = await newKey(ownerA.token);
    expect(await pub(`/products/${mine.body.productId}`, keyA)).toMatchObject({ status: 200, body: { productId: mine.body.productId } });
  });

  test("the CLI creates, lists and revokes keys against the running server's database", async () => {
    const created = await cli("keys", "create", "--owner", ownerB.address, "--label", "cron", "--json");
    expect(created.code).toBe(0);
    const { key, keyId } = JSON.parse(created.stdout) as { key: string; keyId: string };
    expect((await pub("/products", key)).status).toBe(200);
    const plain = await cli("keys", "create", "--owner", ownerB.address, "--label", "plain");
    expect(plain.stdout.trim()).toMatch(/^pk_[0-9a-f]{64}$/);
    expect(plain.stderr).toMatch(/^key id key_\w+ \(walletgate keys revoke key_\w+\); the key is shown only this once\n$/);
    const listed = JSON.parse((await cli("keys", "list", "--owner", ownerB.address, "--json")).stdout) as { keys: Json[] };
    expect(listed.keys.map((k) => k.keyId)).toContain(keyId);
    expect((await cli("keys", "revoke", keyId)).code).toBe(0);
    expect((await pub("/products", key)).status).toBe(401); // the next request, no restart
    expect((await cli("keys", "revoke", "key_nothing")).code).toBe(1);
    expect((await cli("keys", "create", "--label", "x")).code).toBe(2);
    expect((await cli("keys", "create", "--owner", "nope", "--label", "x")).code).toBe(2);
    // An address no one can sign in as: this network's USDC mint, a program. Nothing is created.
    const usdcMint = (JSON.parse((await cli("ledger", "tokens", "--json")).stdout) as { tokens: { token: string; mint: string | null }[] }).tokens.find((t) => t.token === "usdc")!.mint!;
    for (const [address, words] of [
      [usdcMint, "is the mint of USDC, not a wallet"],
      ["TokenkegQfeZyiNwAJbNbGKPFXCWuBvf9Ss623VQ5DA", "is a program, not a wallet"],
    ] as const) {
      const refused = await cli("keys", "create", "--owner", address, "--label", "x");
      expect({ code: refused.code, said: refused.stderr.includes(words), out: refused.stdout }).toEqual({ code: 2, said: true, out: "" });
      expect(JSON.parse((await cli("keys", "list", "--owner", address, "--json")).stdout)).toEqual({ keys: [] });
      // Nor is it made an owner with a tier.
      const tier = await cli("owners", "set-tier", address, "pro");
      expect({ code: tier.code, said: tier.stderr.includes(words), out: tier.stdout }).toEqual({ code: 2, said: true, out: "" });
      const owners = JSON.parse((await cli("owners", "list", "--json")).stdout) as { owners: { walletAddress: string }[] };
      expect(owners.owners.map((o) => o.walletAddress)).not.toContain(address);
    }
  });
});

describe("bodies nested too deep", () => {
  test("every JSON route refuses more than 32 levels with VALIDATION_ERROR naming the body, before parsing it", async () => {
    const key = await newKey(ownerA.token);
    const productId = ((await dash("/products", ownerA.token, { body: product })).body as { productId: string }).productId;
    const deepObject = (depth: number) => `{"walletAddress":${'{"a":'.repeat(depth)}1${"}".repeat(depth)},"nonce":"x","signature":"y","productId":"p"}`;
    const deepArray = (depth: number) => `{"walletAddress":${"[".repeat(depth)}${"]".repeat(depth)},"label":"x"}`;
    const routes: [string, Record<string, string>][] = [
      ["/auth/verify", {}],
      ["/auth/revoke-all", {}],
      [`/pay/${productId}/checkout`, {}],
      ["/dashboard/api/keys", { authorization: `Bearer ${ownerA.token}` }],
      ["/dashboard/api/session", { origin: new URL(server.url).origin }], // the Origin comes first there (403 without it)
      ["/public/access/check", { "x-api-key": key }],
    ];
    for (const [path, headers] of routes) {
      // 10,000 levels in 60 KB once cost a second and most of a gigabyte in the schema's report; 30,000 overflowed the stack (500).
      for (const body of [deepObject(10_000), deepArray(30_000), deepObject(33)]) {
        const res = await call(server.url, path, { body, headers });
        expect([path, ...statusAndCode(res)]).toEqual([path, 400, "VALIDATION_ERROR"]);
        expect(res.body.details).toEqual({ fields: [{ field: "body", message: "request body nests arrays and objects deeper than 32 levels" }] });
      }
      // Sent as anything but JSON, the same bodies are refused as cheaply: as text (the route's schema, or
      // its JSON parse), or as a form, whose fields Elysia would otherwise parse as JSON with no depth limit.
      for (const contentType of ["text/plain", ""]) {
        const res = await fetch(server.url + path, { method: "POST", headers: { ...headers, ...(contentType === "" ? {} : { "content-type": contentType }) }, body: deepArray(30_000) });
        expect([path, contentType, res.status, ((await res.json()) as Json).code]).toEqual([path, contentType, 400, "VALIDATION_ERROR"]);
      }
      const form = new FormData();
      form.set("walletAddress", "[".repeat(30_000) + "]".repeat(30_000));
      const formRes = await fetch(server.url + path, { method: "POST", headers, body: form });
      expect([path, "form", formRes.status, ((await formRes.json()) as Json).code]).toEqual([path, "form", 400, "VALIDATION_ERROR"]);
      // 32 levels are JSON like any other: refused by the route's own schema, if at all.
      const res = await call(server.url, path, { body: deepObject(31), headers });
      expect(JSON.stringify(res.body.details ?? {})).not.toContain("deeper than 32");
    }
    // Routes without a body never read one: a sign-out whose client sends a stray body still signs out.
    const token = (await signIn(server.url, newWallet())).sessionToken as string;
    const revoke = await fetch(`${server.url}/auth/revoke`, { method: "POST", headers: { authorization: `Bearer ${token}`, "content-type": "application/json" }, body: "{not json" });
    expect(revoke.status).toBe(200);
  });
});

describe("rate limits per owner", () => {
  /**
   * The minute is a sliding window over the clock's minutes (paygate.md): requests that straddled a minute's
   * end would find part of the earlier minute's count already weighed away, and one over the limit could
   * pass. Started early in a minute (and so in a UTC day), a test's burst does not straddle one.
   */
  async function earlyInAMinute(): Promise<void> {
    const intoMinute = Date.now() % 60_000;
    if (intoMinute > 45_000) await Bun.sleep(60_000 - intoMinute + 50);
  }

  test("a free owner: headers on every answer, the 61st request in a minute is 429 with Retry-After", async () => {
    const o = await owner();
    const key = await newKey(o.token);
    const keyTwo = await newKey(o.token); // limits are per owner, across its keys
    await earlyInAMinute();
    let last = await pub("/products", key);
    expect(last.headers.get("x-ratelimit-limit")).toBe("60");
    expect(last.headers.get("x-ratelimit-remaining")).toBe("59");
    const reset = Number(last.headers.get("x-ratelimit-reset"));
    expect(reset).toBeGreaterThan(Date.now() / 1000);
    expect(reset).toBeLessThanOrEqual(Math.ceil(Date.now() / 1000) + 60);
    for (let i = 2; i <= 60; i++) last = await pub(i % 2 === 0 ? "/products" : "/products/prod_unknown", i % 3 === 0 ? keyTwo : key);
    expect(last.headers.get("x-ratelimit-remaining")).toBe("0");
    const refused = await pub("/products", key);
    expect(refused.status).toBe(429);
    expect(refused.body).toMatchObject({ error: "Rate limit exceeded", code: "RATE_LIMITED" });
    expect(refused.body.retryAfter).toBeGreaterThanOrEqual(1);
    expect(refused.headers.get("retry-after")).toBe(String(refused.body.retryAfter));
    expect(refused.headers.get("x-ratelimit-limit")).toBe("60");
    // A 404 for a valid key carried the headers too (checked above through the mixed requests).
    expect((await pub("/products", null)).status).toBe(401); // a missing key is not charged to anyone
    const me = await dash("/me", o.token);
    expect(me.body.usage).toMatchObject({ minute: 60, day: 60 });
  });

  test("pro allows 300 a minute; unlimited carries no headers (tiers set with the CLI)", async () => {
    const o = await owner();
    const key = await newKey(o.token);
    expect((await cli("owners", "set-tier", o.address, "pro")).code).toBe(0);
    await earlyInAMinute();
    expect((await pub("/products", key)).headers.get("x-ratelimit-limit")).toBe("300");
    let status = 200;
    for (let i = 2; i <= 300; i++) status = (await pub("/products", key)).status;
    expect(status).toBe(200);
    expect((await pub("/products", key)).status).toBe(429);
    expect((await cli("owners", "set-tier", o.address, "unlimited")).code).toBe(0);
    const free = await pub("/products", key);
    expect(free.status).toBe(200);
    expect(free.headers.get("x-ratelimit-limit")).toBeNull();
    const listed = JSON.parse((await cli("owners", "list", "--json")).stdout) as { owners: Json[] };
    expect(listed.owners.find((x) => x.walletAddress === o.address)).toMatchObject({ tier: "unlimited" });
    expect((await cli("owners", "set-tier", o.address, "gold")).code).toBe(2);
  });
});
