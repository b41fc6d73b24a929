// A Solana RPC that refuses connections, against the real server over sockets: every route and tool that
// must ask the chain answers 503 CHAIN_UNAVAILABLE in the catalogue's shape (the tools in the envelope's),
// while what needs no chain (sign-in, products paid to the owner's own wallet) goes on working.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { base58 } from "@scure/base";
import { statusAndCode } from "./helpers/errors.ts";
import { openServerDatabase, startTestServer, type TestServer } from "./helpers/server.ts";
import { call, newWallet, signIn } from "./helpers/wallet.ts";

let server: TestServer;
let owner: { address: string; token: string; key: string };
let product: string;

const dash = (path: string, init: { method?: string; body?: unknown } = {}) => call(server.url, `/dashboard/api${path}`, { ...init, token: owner.token });
const tool = (name: string, params: Record<string, unknown>) => call(server.url, "/mcp", { body: { tool: name, params }, token: owner.token });

beforeAll(async () => {
  // A port that was just closed: connections to it are refused.
  const closed = Bun.serve({ port: 0, hostname: "127.0.0.1", fetch: () => new Response() });
  const rpcUrl = `http://127.0.0.1:${closed.port}/`;
  await closed.stop(true);
  server = await startTestServer({ NETWORK: "devnet", SOLANA_RPC_URL: rpcUrl, AUTH_RATE_LIMIT: "off" });
  const wallet = newWallet();
  const token = (await signIn(server.url, wallet)).sessionToken;
  const key = await call(server.url, "/dashboard/api/keys", { body: { label: "server" }, token });
  expect(key.status).toBe(201);
  owner = { address: wallet.address, token, key: key.body.key as string };
  // Paid to the owner's own wallet: nothing to ask the chain about.
  const created = await dash("/products", { body: { title: "Pass", description: "", type: "access", price: "1" } });
  expect(created.status).toBe(201);
  product = created.body.productId as string;
});
afterAll(async () => {
  await server?.dispose();
});

describe("HTTP routes that ask the chain", () => {
  test("GET /public/verify/:txHash: 503, with the key's rate-limit headers", async () => {
    const txHash = base58.encode(crypto.getRandomValues(new Uint8Array(64)));
    const res = await call(server.url, `/public/verify/${txHash}`, { headers: { "x-api-key": owner.key } });
    expect(statusAndCode(res)).toEqual([503, "CHAIN_UNAVAILABLE"]);
    expect(res.headers.get("x-ratelimit-limit")).not.toBeNull();
  });

  test("POST /pay/:id/checkout: 503, and no checkout is left open for the buyer", async () => {
    const buyer = newWallet();
    const res = await call(server.url, `/pay/${product}/checkout`, { body: { walletAddress: buyer.address } });
    expect(statusAndCode(res)).toEqual([503, "CHAIN_UNAVAILABLE"]);
    const db = openServerDatabase(server.dataDir);
    try {
      expect(db.query("SELECT count(*) AS n FROM checkouts WHERE wallet = ?").get(buyer.address)).toEqual({ n: 0 });
    } finally {
      db.close();
    }
  });

  test("POST /dashboard/api/products paid to another wallet: 503 (the recipient is checked on the chain); to the owner's own: 201", async () => {
    const other = newWallet().address;
    const refused = await dash("/products", { body: { title: "Elsewhere", description: "", type: "access", price: "1", payTo: other } });
    expect(statusAndCode(refused)).toEqual([503, "CHAIN_UNAVAILABLE"]);
    expect((await dash("/products")).body.products.map((p: { title: string }) => p.title)).toEqual(["Pass"]);
  });

  test("a product priced in the service token on devnet without SERVICE_TOKEN_MINT: 422 NOT_SUPPORTED", async () => {
    const res = await dash("/products", { body: { title: "Tokens", description: "", type: "access", price: "1", currency: "wgt" } });
    expect(statusAndCode(res)).toEqual([422, "NOT_SUPPORTED"]);
  });

  test("/readyz says the ledger is down; /healthz stays up", async () => {
    expect((await call(server.url, "/readyz")).status).toBe(503);
    expect((await call(server.url, "/healthz")).status).toBe(200);
  });
});

describe("tools that ask the chain (the plain /mcp envelope)", () => {
  for (const [name, params] of [
    ["wallet_get_balance", {}],
    ["wallet_get_history", {}],
    ["wallet_transfer", { to: "11111111111111111111111111111112", amount: "0.1", token: "sol" }],
    ["checkout_pay", { productId: "" }],
  ] as const) {
    test(`${name}: 503 CHAIN_UNAVAILABLE`, async () => {
      const res = await tool(name, name === "checkout_pay" ? { productId: product } : params);
      expect(res.status).toBe(503);
      expect(res.body).toMatchObject({ success: false, code: "CHAIN_UNAVAILABLE" });
      expect(typeof res.body.error).toBe("string");
    });
  }
});
