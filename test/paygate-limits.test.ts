// Checkout rows are bounded per client network: the 61st checkout in a minute from one address is 429;
// so are payment submits and confirms (each may read the chain): 300 a minute.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { Keypair } from "@solana/web3.js";
import { startTestServer, type TestServer } from "./helpers/server.ts";
import { connectMcp } from "./helpers/mcp.ts";
import { call, newWallet, signIn } from "./helpers/wallet.ts";

let server: TestServer;
beforeAll(async () => {
  server = await startTestServer(); // AUTH_RATE_LIMIT on, as in production
});
afterAll(async () => {
  await server?.dispose();
});

test("opening checkouts is rate limited per client network", async () => {
  const owner = newWallet();
  const token = (await signIn(server.url, owner)).sessionToken;
  const product = await call(server.url, "/dashboard/api/products", {
    token,
    body: { title: "Pass", description: "", type: "access", price: "1" },
  });
  const buyer = Keypair.generate().publicKey.toBase58();
  const statuses: number[] = [];
  for (let i = 0; i < 61; i++) {
    statuses.push((await call(server.url, `/pay/${product.body.productId}/checkout`, { body: { walletAddress: buyer } })).status);
  }
  expect(statuses.slice(0, 60).every((s) => s === 200)).toBe(true);
  const refused = await call(server.url, `/pay/${product.body.productId}/checkout`, { body: { walletAddress: buyer } });
  expect(refused).toMatchObject({ status: 429, body: { code: "RATE_LIMITED" } });
  expect(Number(refused.headers.get("retry-after"))).toBeGreaterThanOrEqual(1);
}, 60_000);

test("checkout_pay opens checkouts under the same limit: a connected wallet's 61st in a minute is 429, and so is the page's next", async () => {
  const fresh = await startTestServer(); // a limiter of its own
  try {
    const owner = (await signIn(fresh.url, newWallet())).sessionToken;
    const product = await call(fresh.url, "/dashboard/api/products", { token: owner, body: { title: "Pass", description: "", type: "access", price: "1" } });
    const buyer = newWallet();
    const token = (await signIn(fresh.url, buyer)).sessionToken;
    const pay = () => call(fresh.url, "/mcp", { token, body: { tool: "checkout_pay", params: { productId: product.body.productId } } });
    for (let i = 0; i < 60; i++) {
      const opened = await pay();
      expect([i, opened.status, typeof opened.body.data?.unsignedTransaction]).toEqual([i, 200, "string"]); // a connected wallet signs itself
    }
    expect(await pay()).toMatchObject({ status: 429, body: { success: false, code: "RATE_LIMITED" } });
    const page = await call(fresh.url, `/pay/${product.body.productId}/checkout`, { body: { walletAddress: buyer.address } });
    expect(page).toMatchObject({ status: 429, body: { code: "RATE_LIMITED" } });
  } finally {
    await fresh.dispose();
  }
}, 60_000);

test("submits and confirms together are rate limited per client network: the 301st in a minute is 429", async () => {
  const checkoutId = "chk_unknown"; // counted before the lookup: an unknown checkout costs a hit too
  const statuses: number[] = [];
  for (let i = 0; i < 300; i++) {
    const step = i % 2 === 0 ? "confirm" : "submit";
    statuses.push((await call(server.url, `/pay/prod_none/${step}`, { body: step === "confirm" ? { checkoutId } : { checkoutId, transaction: "AAAA" } })).status);
  }
  expect(statuses.every((s) => s === 404)).toBe(true);
  for (const step of ["confirm", "submit"]) {
    const refused = await call(server.url, `/pay/prod_none/${step}`, { body: step === "confirm" ? { checkoutId } : { checkoutId, transaction: "AAAA" } });
    expect(refused).toMatchObject({ status: 429, body: { code: "RATE_LIMITED" } });
    expect(Number(refused.headers.get("retry-after"))).toBeGreaterThanOrEqual(1);
  }
}, 60_000);

test("every checkout_pay counts as a payment check: with the page's submits, the 301st in a minute is 429", async () => {
  const fresh = await startTestServer(); // a limiter of its own
  try {
    const owner = (await signIn(fresh.url, newWallet())).sessionToken;
    const product = await call(fresh.url, "/dashboard/api/products", { token: owner, body: { title: "Pass", description: "", type: "access", price: "1" } });
    const productId = product.body.productId as string;
    const token = (await signIn(fresh.url, newWallet())).sessionToken;
    const opened = await call(fresh.url, "/mcp", { token, body: { tool: "checkout_pay", params: { productId } } });
    const checkoutId = opened.body.data.checkoutId as string;
    for (let i = 0; i < 149; i++) expect((await call(fresh.url, `/pay/${productId}/confirm`, { body: { checkoutId: "chk_unknown" } })).status).toBe(404);
    const resume = () => call(fresh.url, "/mcp", { token, body: { tool: "checkout_pay", params: { productId, checkoutId } } });
    for (let i = 0; i < 150; i++) expect([i, (await resume()).status]).toEqual([i, 200]);
    expect(await resume()).toMatchObject({ status: 429, body: { success: false, code: "RATE_LIMITED" } });
    const signed = await call(fresh.url, "/mcp", { token, body: { tool: "checkout_pay", params: { productId, checkoutId, signedTransaction: "AAAA" } } });
    expect(signed).toMatchObject({ status: 429, body: { code: "RATE_LIMITED" } });
    expect(await call(fresh.url, `/pay/${productId}/submit`, { body: { checkoutId, transaction: "AAAA" } })).toMatchObject({ status: 429 });
  } finally {
    await fresh.dispose();
  }
}, 60_000);

test("product changes are limited per owner: the 121st create, edit or archive in a minute is 429, and another owner is not held back", async () => {
  const owner = (await signIn(server.url, newWallet())).sessionToken;
  const dash = (path: string, token: string, init: { method?: string; body?: unknown } = {}) => call(server.url, `/dashboard/api${path}`, { ...init, token });
  const created = await dash("/products", owner, { body: { title: "Pass", description: "", type: "access", price: "1" } });
  expect(created.status).toBe(201);
  const id = created.body.productId as string;
  // Each write makes an outbox event: counted before the product is looked up, so a 404 counts too.
  for (let i = 1; i < 120; i++) {
    const res = i % 2 === 0 ? await dash(`/products/${id}`, owner, { method: "PATCH", body: { title: `Pass ${i}` } }) : await dash("/products/prod_nothing/archive", owner, { method: "POST" });
    expect([i, res.status]).toEqual([i, i % 2 === 0 ? 200 : 404]);
  }
  for (const [method, path, body] of [
    ["POST", "/products", { title: "More", description: "", type: "access", price: "1" }],
    ["PATCH", `/products/${id}`, { title: "Again" }],
    ["POST", `/products/${id}/archive`, undefined],
  ] as const) {
    const refused = await dash(path, owner, { method, ...(body === undefined ? {} : { body }) });
    expect([method, path, refused.status, refused.body.code, typeof refused.body.error]).toEqual([method, path, 429, "RATE_LIMITED", "string"]);
    expect(refused.body.retryAfter).toBeGreaterThanOrEqual(1);
    expect(refused.headers.get("retry-after")).toBe(String(refused.body.retryAfter));
  }
  expect((await dash(`/products/${id}`, owner)).body).toMatchObject({ title: "Pass 118", status: "active" }); // reads are not limited
  const other = (await signIn(server.url, newWallet())).sessionToken;
  expect((await dash("/products", other, { body: { title: "Theirs", description: "", type: "access", price: "1" } })).status).toBe(201);
}, 60_000);

test("owners' writes are limited per client network too: new owners cost nothing, so the 301st write in a minute from one network is 429 whoever makes it", async () => {
  const fresh = await startTestServer(); // a limiter of its own
  try {
    const dash = (path: string, token: string, body: unknown) => call(fresh.url, `/dashboard/api${path}`, { token, body });
    const owners = await Promise.all([0, 1, 2, 3].map(async () => (await signIn(fresh.url, newWallet())).sessionToken));
    // Three owners, each within its own 120 a minute: 120 + 120 + 60 writes from one address.
    for (const [owner, writes] of [[owners[0]!, 120], [owners[1]!, 120], [owners[2]!, 60]] as const) {
      for (let i = 0; i < writes; i++) {
        const made = await dash("/products", owner, { title: `P${i}`, description: "", type: "access", price: "1" });
        expect([i, made.status]).toEqual([i, 201]);
      }
    }
    // A fourth owner's first writes of any kind (a product, an API key, a webhook endpoint) are refused.
    for (const [path, body] of [
      ["/products", { title: "One more", description: "", type: "access", price: "1" }],
      ["/keys", { label: "k" }],
      ["/webhooks", { url: "https://hooks.example/x", events: ["payment.completed"] }],
    ] as const) {
      const refused = await dash(path, owners[3]!, body);
      expect([path, refused.status, refused.body.code]).toEqual([path, 429, "RATE_LIMITED"]);
    }
    // And so is registering a marketplace agent over MCP (each holds up to 20 services of its owner's text).
    const mcp = await connectMcp(fresh.url, "limits-test", owners[3]!);
    try {
      const agent = await mcp.call("provider_register", { endpoint: "https://agent.example/hook", profile: { name: "A", basePrice: "1" } });
      expect(agent).toMatchObject({ success: false, code: "RATE_LIMITED" });
    } finally {
      await mcp.client.close();
    }
  } finally {
    await fresh.dispose();
  }
}, 120_000);
