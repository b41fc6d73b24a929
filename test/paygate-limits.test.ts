// Checkout rows are bounded per client network: the 61st checkout in a minute from one address is 429;
// so are payment submits and confirms (each may read the chain): 300 a minute.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { Keypair } from "@solana/web3.js";
import { startTestServer, type TestServer } from "./helpers/server.ts";
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
}, 30_000);

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
}, 30_000);
