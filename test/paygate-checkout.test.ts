// Buying products against the real server over sockets: checkout by external wallets signing with
// @solana/web3.js, submitted through /pay or by the buyer itself (MCP), then what the owner sees through
// /public/* (access, verification, tokens, stats) and the Dashboard API; refusals and isolation.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { Keypair } from "@solana/web3.js";
import { base58 } from "@scure/base";
import { createHash } from "node:crypto";
import { newBuyer, paymentVariant, signCheckout, signatureOf } from "./helpers/checkout.ts";
import { columnsHolding } from "./helpers/db-scan.ts";
import { connectMcp } from "./helpers/mcp.ts";
import { until } from "./helpers/until.ts";
import { openServerDatabase, runCli, startTestServer, type TestServer } from "./helpers/server.ts";
import { call, newWallet, signIn, type Json, type TestWallet } from "./helpers/wallet.ts";

let server: TestServer;
type Owner = { address: string; token: string; key: string };
let ownerA: Owner;
let ownerB: Owner;
let feature: string; // ownerA's feature_unlock product, 2.5 USDC, 30 days
let pass: string; // ownerA's access product, 1 USDC, no expiry
type Buyer = { wallet: TestWallet; keypair: Keypair; address: string; session: string };
let alice: Buyer; // pays through /pay/:id/submit
let bob: Buyer; // submits himself through MCP, then confirms
let mallory: Buyer; // pays for other people's checkouts

const dash = (path: string, token: string, init: { method?: string; body?: unknown } = {}) => call(server.url, `/dashboard/api${path}`, { ...init, token });
const pub = (path: string, key: string, init: { method?: string; body?: unknown } = {}) => call(server.url, `/public${path}`, { ...init, headers: { "x-api-key": key } });
const payApi = (productId: string, step: "checkout" | "submit" | "confirm", body: Json) => call(server.url, `/pay/${productId}/${step}`, { body });

async function newOwner(): Promise<Owner> {
  const wallet = newWallet();
  const token = (await signIn(server.url, wallet)).sessionToken;
  const key = await dash("/keys", token, { body: { label: "server" } });
  return { address: wallet.address, token, key: key.body.key as string };
}

async function newProduct(owner: Owner, body: Json): Promise<string> {
  const res = await dash("/products", owner.token, { body: { description: "", ...body } });
  expect(res.status).toBe(201);
  return res.body.productId as string;
}

async function fundedBuyer(): Promise<Buyer> {
  const { wallet, keypair } = newBuyer();
  const [airdrop, session] = await Promise.all([
    runCli(["ledger", "airdrop", "--to", wallet.address, "--sol", "1", "--usdc", "50"], { DATA_DIR: server.dataDir }),
    signIn(server.url, wallet),
  ]);
  expect({ code: airdrop.code, stderr: airdrop.stderr }).toEqual({ code: 0, stderr: "" });
  return { wallet, keypair, address: wallet.address, session: session.sessionToken };
}

async function checkout(productId: string, buyer: Buyer, checkoutId?: string): Promise<Json> {
  const res = await payApi(productId, "checkout", { walletAddress: buyer.address, ...(checkoutId === undefined ? {} : { checkoutId }) });
  expect(res.status).toBe(200);
  return res.body;
}

/** The buyer sends the signed transaction itself, with its own session (MCP plain envelope). */
async function submitOwn(buyer: Buyer, signed: string) {
  const res = await call(server.url, "/mcp", { body: { tool: "wallet_submit_transaction", params: { transaction: signed } }, token: buyer.session });
  expect(res.body).toMatchObject({ success: true, data: { status: "confirmed", signature: signatureOf(signed) } });
}

/** A new owner's 1 USDC access product, a checkout of it opened for bob, and its transaction signed and sent by bob himself (neither /submit nor /confirm). */
async function selfSentPayment(title: string) {
  const owner = await newOwner();
  const product = await newProduct(owner, { title, type: "access", price: "1" });
  const open = await checkout(product, bob);
  const signed = signCheckout(open.transaction as string, bob.keypair);
  await submitOwn(bob, signed);
  return { owner, product, open, signed };
}

const randomTxHash = () => base58.encode(crypto.getRandomValues(new Uint8Array(64)));

beforeAll(async () => {
  server = await startTestServer({ AUTH_RATE_LIMIT: "off" });
  [ownerA, ownerB] = await Promise.all([newOwner(), newOwner()]);
  [feature, pass] = await Promise.all([
    newProduct(ownerA, { title: "Pro", type: "feature_unlock", price: "2.5", featureIds: ["export", "api"], accessDays: 30 }),
    newProduct(ownerA, { title: "Pass", type: "access", price: 1 }),
  ]);
  [alice, bob, mallory] = await Promise.all([fundedBuyer(), fundedBuyer(), fundedBuyer()]);
}, 60_000);
afterAll(async () => {
  await server?.dispose();
});

describe("a purchase through /pay/:id/submit (feature unlock)", () => {
  let txHash: string;
  let accessToken: string;

  test("checkout → pending → sign outside → submit → completed, with the token; confirming again is the same purchase", async () => {
    const started = Date.now();
    const open = await checkout(feature, alice);
    expect(open).toMatchObject({ amount: "2.5", currency: "USDC", payTo: ownerA.address });
    expect(open.checkoutId).toMatch(/^chk_[1-9A-HJ-NP-Za-km-z]+$/);
    expect(base58.decode(open.reference)).toHaveLength(32);
    expect(Date.parse(open.expiresAt) - started).toBeGreaterThan(14 * 60_000);
    expect(Date.parse(open.expiresAt) - started).toBeLessThanOrEqual(15 * 60_000 + 1000);
    expect((await payApi(feature, "confirm", { checkoutId: open.checkoutId })).body).toEqual({ status: "pending" });
    expect(await pub("/access/check", ownerA.key, { body: { productId: feature, walletAddress: alice.address } })).toMatchObject({
      status: 200,
      body: { hasAccess: false, paymentUrl: `${server.url}/pay/${feature}?wallet=${alice.address}` },
    });

    const again = await checkout(feature, alice, open.checkoutId);
    expect(again).toMatchObject({ checkoutId: open.checkoutId, reference: open.reference, amount: "2.5", expiresAt: open.expiresAt });
    const signed = signCheckout(again.transaction, alice.keypair);
    const done = await payApi(feature, "submit", { checkoutId: open.checkoutId, transaction: signed });
    expect(done).toMatchObject({ status: 200, body: { status: "completed", txHash: signatureOf(signed) } });
    expect(done.body.purchaseId).toMatch(/^pur_/);
    expect(done.body.accessToken).toMatch(/^ft_[1-9A-HJ-NP-Za-km-z]{40,44}$/);
    txHash = done.body.txHash;
    accessToken = done.body.accessToken;

    expect((await payApi(feature, "confirm", { checkoutId: open.checkoutId })).body).toEqual(done.body);
    expect((await payApi(feature, "submit", { checkoutId: open.checkoutId, transaction: signed })).body).toEqual(done.body);
    expect(await payApi(feature, "checkout", { walletAddress: alice.address, checkoutId: open.checkoutId })).toMatchObject({ status: 409, body: { code: "INVALID_STATE" } });
  });

  test("the owner sees it: access check, verify by txHash, feature verify, token list, purchases", async () => {
    const access = await pub("/access/check", ownerA.key, { body: { productId: feature, walletAddress: alice.address } });
    expect(access.body).toMatchObject({ hasAccess: true, txHash });
    expect(Date.parse(access.body.expiresAt) - Date.parse(access.body.purchasedAt)).toBe(30 * 86_400_000);

    expect((await pub(`/verify/${txHash}`, ownerA.key)).body).toEqual({
      valid: true,
      txHash,
      productId: feature,
      productTitle: "Pro",
      walletAddress: alice.address,
      amount: "2.5",
      currency: "USDC",
      network: "localnet",
      purchasedAt: access.body.purchasedAt,
    });
    expect((await pub(`/verify/${txHash}`, ownerB.key)).body).toEqual({ valid: false, txHash, error: "not a payment for your products" });
    const unknown = randomTxHash();
    expect((await pub(`/verify/${unknown}`, ownerA.key)).body).toEqual({ valid: false, txHash: unknown, error: "transaction not found" });
    for (const bad of ["abc", alice.address, `${txHash}0`]) {
      expect(await pub(`/verify/${bad}`, ownerA.key)).toMatchObject({ status: 400, body: { code: "VALIDATION_ERROR" } });
    }

    const verified = await pub("/feature/verify", ownerA.key, { body: { accessToken } });
    expect(verified.body).toMatchObject({ valid: true, features: ["export", "api"], productId: feature, productTitle: "Pro", walletAddress: alice.address, expiresAt: access.body.expiresAt });
    expect((await pub("/feature/verify", ownerB.key, { body: { accessToken } })).body).toEqual({ valid: false, error: "token not found" });
    expect((await pub("/feature/verify", ownerA.key, { body: { accessToken: "ft_nope" } })).body).toEqual({ valid: false, error: "token not found" });

    const listed = await pub(`/feature/tokens?productId=${feature}&walletAddress=${alice.address}`, ownerA.key);
    expect(listed.body).toMatchObject({ total: 1, limit: 100, offset: 0 });
    expect(listed.headers.get("cache-control")).toBe("no-store"); // the buyers' tokens: kept by no cache
    expect(listed.body.tokens[0]).toEqual({
      accessToken,
      productId: feature,
      productTitle: "Pro",
      features: ["export", "api"],
      walletAddress: alice.address,
      txHash,
      status: "active",
      createdAt: verified.body.createdAt,
      expiresAt: access.body.expiresAt,
    });
    expect((await dash(`/tokens?walletAddress=${alice.address}`, ownerA.token)).body).toEqual(listed.body);
    expect((await pub("/feature/tokens?status=revoked", ownerA.key)).body).toMatchObject({ tokens: [], total: 0 });
    expect((await pub("/feature/tokens", ownerB.key)).body).toMatchObject({ tokens: [], total: 0 });
    // Another owner's product, or none, named as a filter is 404 like any other of its ids.
    for (const productId of [feature, "prod_nope"]) {
      expect(await pub(`/feature/tokens?productId=${productId}`, ownerB.key)).toMatchObject({ status: 404, body: { code: "NOT_FOUND" } });
      expect(await dash(`/tokens?productId=${productId}`, ownerB.token)).toMatchObject({ status: 404, body: { code: "NOT_FOUND" } });
      expect(await dash(`/purchases?productId=${productId}`, ownerB.token)).toMatchObject({ status: 404, body: { code: "NOT_FOUND" } });
    }
    // Each names its field in details (a number out of bounds included: Elysia checks it alone, with no path).
    for (const query of ["limit=0", "limit=1001", "limit=2.5", "limit=0x10", "limit=1e1", "limit=%201", "offset=-1", "offset=9223372036854775807", "offset=1e20", "status=gone"]) {
      const res = await pub(`/feature/tokens?${query}`, ownerA.key);
      expect([query, res.status, res.body.code, res.body.error, res.body.details?.fields?.[0]?.field]).toEqual([query, 400, "VALIDATION_ERROR", expect.any(String), query.split("=")[0]]);
    }
    // Not decimal digits: the query's schema refuses it; out of range: the list's own check, saying the range.
    for (const path of ["/purchases?limit=0", "/purchases?offset=-1", "/purchases?limit=1.5", "/tokens?limit=1001", "/stats?days=366", "/stats?days=0.5", "/stats?days=0x10", "/tokens?offset=0b1"]) {
      const res = await dash(path, ownerA.token);
      const field = path.split("?")[1]!.split("=")[0];
      const named = (res.body.details?.fields ?? []).map((f: { field: string }) => f.field);
      expect([path, res.status, res.body.code, res.body.error, named.length > 0 && named.every((f: string) => f === field)]).toEqual([
        path,
        400,
        "VALIDATION_ERROR",
        expect.stringMatching(/^invalid query$|must be a whole number from/),
        true,
      ]);
    }
    expect((await pub("/feature/tokens?walletAddress=nope", ownerA.key)).body.code).toBe("INVALID_ADDRESS");
    for (const query of ["offset=1e300", "offset=9223372036854775808"]) expect((await dash(`/purchases?${query}`, ownerA.token)).status).toBe(400);
    const purchases = await dash(`/purchases?productId=${feature}`, ownerA.token);
    expect(purchases.body).toMatchObject({ total: 1, purchases: [{ txHash, walletAddress: alice.address, amount: "2.5", currency: "USDC", network: "localnet" }] });
    expect((await dash("/purchases", ownerB.token)).body).toEqual({ purchases: [], total: 0 });
  });

  test("the token is stored encrypted and found by its SHA-256: never in clear in any column", async () => {
    const database = `${server.dataDir}/walletgate.db`;
    expect(columnsHolding(database, accessToken)).toEqual([]);
    expect(columnsHolding(database, createHash("sha256").update(accessToken).digest("hex"))).toEqual(["feature_tokens.token_hash"]);
  });

  test("revoke: another owner's is 404; the owner's is permanent and ends access", async () => {
    expect(await pub("/feature/revoke", ownerB.key, { body: { accessToken } })).toMatchObject({ status: 404, body: { success: false, code: "NOT_FOUND" } });
    expect(await dash("/tokens/revoke", ownerB.token, { body: { accessToken } })).toMatchObject({ status: 404, body: { success: false, code: "NOT_FOUND" } });
    expect(await pub("/feature/revoke", ownerA.key, { body: { accessToken } })).toMatchObject({ status: 200, body: { success: true } });
    expect((await pub("/feature/verify", ownerA.key, { body: { accessToken } })).body).toEqual({ valid: false, error: "token revoked" });
    expect((await pub("/access/check", ownerA.key, { body: { productId: feature, walletAddress: alice.address } })).body.hasAccess).toBe(false);
    const revoked = (await pub("/feature/tokens?status=revoked", ownerA.key)).body;
    expect(revoked.tokens.map((t: Json) => [t.accessToken, t.status])).toEqual([[accessToken, "revoked"]]);
    expect(typeof revoked.tokens[0].revokedAt).toBe("string");
    expect((await dash("/tokens/revoke", ownerA.token, { body: { accessToken } })).body.success).toBe(true); // still revoked
    expect((await pub(`/verify/${txHash}`, ownerA.key)).body.valid).toBe(true); // the payment itself stays valid
  });
});

describe("a purchase the buyer submits itself (access pass)", () => {
  test("signed outside, sent through MCP wallet_submit_transaction, then /confirm", async () => {
    const open = await checkout(pass, bob);
    const signed = signCheckout(open.transaction, bob.keypair);
    await submitOwn(bob, signed);
    const done = await payApi(pass, "confirm", { checkoutId: open.checkoutId });
    expect(done).toEqual(expect.objectContaining({ status: 200 }));
    expect(done.body).toEqual({ status: "completed", txHash: signatureOf(signed), purchaseId: expect.stringMatching(/^pur_/) });
    const access = await pub("/access/check", ownerA.key, { body: { productId: pass, walletAddress: bob.address } });
    expect(access.body).toEqual({ hasAccess: true, txHash: signatureOf(signed), purchasedAt: expect.any(String) });
    // Posting the same signed bytes afterwards is no second purchase.
    expect((await payApi(pass, "submit", { checkoutId: open.checkoutId, transaction: signed })).body).toEqual(done.body);
    // Naming the transaction (txHash) reads it first; one that does not pay the checkout is refused.
    const other = await checkout(pass, bob);
    const mine = signCheckout(other.transaction, bob.keypair);
    await submitOwn(bob, mine);
    expect((await payApi(pass, "confirm", { checkoutId: other.checkoutId, txHash: signatureOf(signed) })).body).toMatchObject({ code: "PAYMENT_MISMATCH" });
    expect((await payApi(pass, "confirm", { checkoutId: other.checkoutId, txHash: signatureOf(mine) })).body).toMatchObject({ status: "completed", txHash: signatureOf(mine) });
    expect((await payApi(pass, "confirm", { checkoutId: other.checkoutId, txHash: "x".repeat(101) })).body).toMatchObject({ code: "VALIDATION_ERROR" });
    // Not base58 of 64 bytes (as GET /public/verify/:txHash says): refused naming the field, not answered "pending".
    for (const txHash of ["abc", "0".repeat(88), "1".repeat(43)]) {
      const refused = await payApi(pass, "confirm", { checkoutId: other.checkoutId, txHash });
      expect([txHash, refused.status, refused.body]).toMatchObject([txHash, 400, { code: "VALIDATION_ERROR", details: { fields: [{ field: "txHash" }] } }]);
    }
  });

  test("two concurrent confirms make one purchase", async () => {
    const product = await newProduct(ownerA, { title: "Race", type: "feature_unlock", price: "0.5", featureIds: ["x"] });
    const open = await checkout(product, bob);
    await submitOwn(bob, signCheckout(open.transaction, bob.keypair));
    const answers = await Promise.all([1, 2, 3].map(() => payApi(product, "confirm", { checkoutId: open.checkoutId })));
    expect(answers.map((a) => a.status)).toEqual([200, 200, 200]);
    expect(new Set(answers.map((a) => JSON.stringify(a.body))).size).toBe(1);
    expect((await dash(`/purchases?productId=${product}`, ownerA.token)).body.total).toBe(1);
    expect((await pub(`/feature/tokens?productId=${product}`, ownerA.key)).body.total).toBe(1);
  });
});

describe("an agent's custodial wallet buys through /mcp (checkout_pay)", () => {
  test("with the SDK's own Client: paid, the token works; a session without a wallet, or an unknown product, is refused", async () => {
    const seller = await newOwner(); // its own: ownerA's and ownerB's statistics are asserted below
    const product = await newProduct(seller, { title: "Agent plan", type: "feature_unlock", price: "2.5", featureIds: ["agent"] });
    const agent = await connectMcp(server.url, `checkout-pay-test/${crypto.randomUUID()}`);
    try {
      expect(await agent.call("checkout_pay", { productId: product })).toMatchObject({ success: false, code: "UNAUTHENTICATED" });
      const created = await agent.ok("wallet_create", { airdropSol: 1, airdropUsdc: 10 });
      expect(await agent.call("checkout_pay", { productId: product, maxAmount: "2", currency: "USDC" })).toMatchObject({ success: false, code: "PAYMENT_MISMATCH" });
      const paid = await agent.ok("checkout_pay", { productId: product, maxAmount: "2.5", currency: "USDC" });
      expect(paid).toMatchObject({ status: "completed", amount: "2.5", currency: "USDC", payTo: seller.address });
      expect(paid.accessToken).toMatch(/^ft_/);
      expect((await pub("/access/check", seller.key, { body: { productId: product, walletAddress: created.address } })).body).toMatchObject({ hasAccess: true, txHash: paid.txHash });
      expect((await pub("/feature/verify", seller.key, { body: { accessToken: paid.accessToken } })).body).toMatchObject({ valid: true, features: ["agent"], walletAddress: created.address });
      expect(await agent.call("checkout_pay", { productId: "prod_nothing" })).toMatchObject({ success: false, code: "NOT_FOUND" });
    } finally {
      await agent.client.close();
    }
  });

  test("a connected wallet in two calls: the transaction to sign, then the purchase (SDK Client)", async () => {
    const seller = await newOwner();
    const product = await newProduct(seller, { title: "Connected plan", type: "feature_unlock", price: "1.5", featureIds: ["connected"] });
    const buyer = await fundedBuyer();
    const client = await connectMcp(server.url, `checkout-pay-connected/${crypto.randomUUID()}`, buyer.session);
    try {
      const first = await client.ok("checkout_pay", { productId: product, maxAmount: "1.5", currency: "USDC" });
      const { checkoutId, unsignedTransaction } = first as { checkoutId: string; unsignedTransaction: string };
      expect(first).toMatchObject({ amount: "1.5", currency: "USDC", payTo: seller.address, expiresAt: expect.any(String) });
      expect((await dash("/purchases", seller.token)).body.total).toBe(0);
      const signedTransaction = signCheckout(unsignedTransaction, buyer.keypair);
      expect(await client.call("checkout_pay", { productId: product, signedTransaction })).toMatchObject({ success: false, code: "VALIDATION_ERROR" });
      const paid = await client.ok("checkout_pay", { productId: product, checkoutId, signedTransaction });
      const accessToken = paid.accessToken as string; // read first: Bun's toMatchObject puts its matchers in place of what they matched
      expect(paid).toMatchObject({ status: "completed", checkoutId, amount: "1.5", currency: "USDC", accessToken: expect.stringMatching(/^ft_/) });
      expect((await pub("/feature/verify", seller.key, { body: { accessToken } })).body).toMatchObject({ valid: true, walletAddress: buyer.address });
      expect((await dash("/purchases", seller.token)).body.total).toBe(1);
    } finally {
      await client.client.close();
    }
  });

  test("its refusals: nothing is paid for an unknown checkout, a price without its currency, too little money or an archived product", async () => {
    const seller = await newOwner();
    const dear = await newProduct(seller, { title: "Dear", type: "access", price: "20" });
    const old = await newProduct(seller, { title: "Old", type: "access", price: "1" });
    expect((await dash(`/products/${old}/archive`, seller.token, { method: "POST" })).status).toBe(200);
    const agent = await connectMcp(server.url, `checkout-pay-refusals/${crypto.randomUUID()}`);
    try {
      await agent.ok("wallet_create", { airdropSol: 1, airdropUsdc: 5 });
      const refused = async (client: typeof agent, params: Json, code: string) => {
        const envelope = await client.call("checkout_pay", params);
        expect([params, envelope.success, envelope.code, typeof envelope.error]).toEqual([params, false, code, "string"]);
      };
      await refused(agent, { productId: dear, checkoutId: "chk_nothing" }, "NOT_FOUND");
      await refused(agent, { productId: dear, maxAmount: "25" }, "VALIDATION_ERROR");
      await refused(agent, { productId: dear }, "INSUFFICIENT_FUNDS");
      await refused(agent, { productId: old }, "INVALID_STATE");
      await refused(agent, { productId: dear, checkoutId: "chk_nothing", signedTransaction: "AAAA" }, "VALIDATION_ERROR"); // custodial: signed here
      expect((await agent.ok("wallet_get_balance")).balances).toMatchObject({ usdc: 5 });
      expect((await dash(`/purchases`, seller.token)).body.total).toBe(0);
    } finally {
      await agent.client.close();
    }
  });
});

describe("refusals", () => {
  test("a buyer holding less than the price: INSUFFICIENT_FUNDS before sending, no fee charged", async () => {
    const { wallet, keypair } = newBuyer();
    const poor = { wallet, keypair, address: wallet.address, session: (await signIn(server.url, wallet)).sessionToken };
    expect((await runCli(["ledger", "airdrop", "--to", poor.address, "--sol", "1", "--usdc", "1"], { DATA_DIR: server.dataDir })).code).toBe(0);
    const balances = async () => (await call(server.url, "/mcp", { body: { tool: "wallet_get_balance", params: {} }, token: poor.session })).body.data.balances;
    const before = await balances();
    const open = await checkout(feature, poor);
    const signed = signCheckout(open.transaction, poor.keypair);
    expect(await payApi(feature, "submit", { checkoutId: open.checkoutId, transaction: signed })).toMatchObject({
      status: 422,
      body: { code: "INSUFFICIENT_FUNDS", error: "the wallet holds 1 USDC; this purchase needs 2.5 USDC" },
    });
    expect(await balances()).toEqual(before);
    expect(await payApi(feature, "confirm", { checkoutId: open.checkoutId })).toMatchObject({ status: 200, body: { status: "pending" } });
  });

  test("a transaction from the wrong payer: refused before sending, and when found on chain", async () => {
    const open = await checkout(feature, alice);
    const byMallory = paymentVariant(open.transaction, { payer: mallory.keypair });
    expect(await payApi(feature, "submit", { checkoutId: open.checkoutId, transaction: byMallory })).toMatchObject({
      status: 422,
      body: { code: "PAYMENT_MISMATCH", details: { reason: "payer" } },
    });
    await submitOwn(mallory, byMallory);
    expect(await payApi(feature, "confirm", { checkoutId: open.checkoutId })).toMatchObject({ status: 422, body: { code: "PAYMENT_MISMATCH", details: { reason: "payer" } } });
  });

  test("too little, and a transaction that is not one", async () => {
    const open = await checkout(feature, alice);
    const short = paymentVariant(open.transaction, { payer: alice.keypair, amount: 2_499_999n });
    expect(await payApi(feature, "submit", { checkoutId: open.checkoutId, transaction: short })).toMatchObject({
      status: 422,
      // In whole tokens, as every amount the service shows (spec README), never base units.
      body: { code: "PAYMENT_MISMATCH", error: "the payment is 2.499999 USDC; 2.5 USDC are asked", details: { reason: "amount" } },
    });
    expect(await payApi(feature, "submit", { checkoutId: open.checkoutId, transaction: "bm90IGEgdHJhbnNhY3Rpb24=" })).toMatchObject({ status: 422, body: { code: "TRANSACTION_REJECTED" } });
    expect(await payApi(feature, "submit", { checkoutId: open.checkoutId, transaction: "not base64!" })).toMatchObject({ status: 400, body: { code: "VALIDATION_ERROR" } });
    // Unsigned: the ledger refuses it, and the refusal passes through.
    expect(await payApi(feature, "submit", { checkoutId: open.checkoutId, transaction: open.transaction })).toMatchObject({ status: 422, body: { code: "TRANSACTION_REJECTED" } });
    expect((await payApi(feature, "confirm", { checkoutId: open.checkoutId })).body).toEqual({ status: "pending" });
  });

  test("one signature never buys twice: a payment carrying two checkouts' references is CONFLICT for the second", async () => {
    const first = await checkout(pass, alice);
    const second = await checkout(pass, alice);
    const both = paymentVariant(first.transaction, { payer: alice.keypair, extraReferences: [second.reference] });
    expect((await payApi(pass, "submit", { checkoutId: first.checkoutId, transaction: both })).body).toMatchObject({ status: "completed", txHash: signatureOf(both) });
    expect(await payApi(pass, "confirm", { checkoutId: second.checkoutId })).toMatchObject({ status: 409, body: { code: "CONFLICT" } });
    expect(await payApi(pass, "submit", { checkoutId: second.checkoutId, transaction: both })).toMatchObject({ status: 409, body: { code: "CONFLICT" } });
  });

  test("archived products, unknown ids, other products' checkouts, bad wallets", async () => {
    const product = await newProduct(ownerB, { title: "Old", type: "access", price: "1" });
    const open = await checkout(product, alice);
    expect((await dash(`/products/${product}/archive`, ownerB.token, { method: "POST" })).status).toBe(200);
    expect(await payApi(product, "checkout", { walletAddress: alice.address })).toMatchObject({ status: 409, body: { code: "INVALID_STATE" } });
    expect(await payApi(product, "confirm", { checkoutId: open.checkoutId })).toMatchObject({ status: 409, body: { code: "INVALID_STATE" } });
    expect(await payApi(product, "submit", { checkoutId: open.checkoutId, transaction: signCheckout(open.transaction, alice.keypair) })).toMatchObject({
      status: 409,
      body: { code: "INVALID_STATE" },
    });

    expect(await payApi("prod_nothing", "checkout", { walletAddress: alice.address })).toMatchObject({ status: 404, body: { code: "NOT_FOUND" } });
    const signed = signCheckout(open.transaction, alice.keypair);
    for (const checkoutId of ["chk_nothing", open.checkoutId]) {
      // An unknown checkout, or another product's, is no checkout to pay.
      expect(await payApi(feature, "submit", { checkoutId, transaction: signed })).toMatchObject({ status: 404, body: { code: "NOT_FOUND", error: expect.any(String) } });
    }
    expect(await payApi(feature, "confirm", { checkoutId: open.checkoutId })).toMatchObject({ status: 404, body: { code: "NOT_FOUND" } });
    expect(await payApi(feature, "confirm", { checkoutId: "chk_nothing" })).toMatchObject({ status: 404, body: { code: "NOT_FOUND" } });
    const mine = await checkout(feature, alice);
    expect(await payApi(feature, "checkout", { walletAddress: bob.address, checkoutId: mine.checkoutId })).toMatchObject({ status: 404 });
    expect(await payApi(feature, "checkout", { walletAddress: "not-a-wallet" })).toMatchObject({ status: 400, body: { code: "INVALID_ADDRESS", details: { fields: [{ field: "walletAddress" }] } } });
    expect(await payApi(feature, "checkout", {})).toMatchObject({ status: 400, body: { code: "VALIDATION_ERROR" } });
    for (const step of ["submit", "confirm"] as const) expect(await payApi(feature, step, {})).toMatchObject({ status: 400, body: { code: "VALIDATION_ERROR" } });
    const notJson = await fetch(`${server.url}/pay/${feature}/confirm`, { method: "POST", headers: { "content-type": "application/json" }, body: "{not json" });
    expect([notJson.status, ((await notJson.json()) as Json).code]).toEqual([400, "VALIDATION_ERROR"]);
  });

  test("an expired checkout: 409 INVALID_STATE for a fresh transaction, a submit and a confirm; nothing is sent", async () => {
    const open = await checkout(pass, alice);
    const signed = signCheckout(open.transaction, alice.keypair);
    // Fifteen minutes pass for this checkout alone: its expiry is moved into the past in the server's database.
    const db = openServerDatabase(server.dataDir);
    try {
      db.run("UPDATE checkouts SET expires_at = ? WHERE id = ?", [Date.now() - 1000, open.checkoutId]);
    } finally {
      db.close();
    }
    const expired = { status: 409, body: { code: "INVALID_STATE", error: expect.any(String) } };
    expect(await payApi(pass, "checkout", { walletAddress: alice.address, checkoutId: open.checkoutId })).toMatchObject(expired);
    expect(await payApi(pass, "submit", { checkoutId: open.checkoutId, transaction: signed })).toMatchObject(expired);
    expect(await payApi(pass, "confirm", { checkoutId: open.checkoutId })).toMatchObject(expired);
    const mcp = await call(server.url, "/mcp", { body: { tool: "wallet_get_history", params: { limit: 100 } }, token: alice.session });
    expect(mcp.body.data.transactions.map((t: Json) => t.signature)).not.toContain(signatureOf(signed));
  });

  test("a checkout in its last 2 minutes: 409 INVALID_STATE for a fresh transaction and a submit (it could land too late); confirm still answers", async () => {
    const carol = await fundedBuyer(); // no earlier purchase of the pass to be answered instead
    const open = await checkout(pass, carol);
    const signed = signCheckout(open.transaction, carol.keypair);
    const db = openServerDatabase(server.dataDir);
    try {
      db.run("UPDATE checkouts SET expires_at = ? WHERE id = ?", [Date.now() + 60_000, open.checkoutId]);
    } finally {
      db.close();
    }
    const tooLate = { status: 409, body: { code: "INVALID_STATE", error: expect.stringContaining("expires too soon") } };
    expect(await payApi(pass, "checkout", { walletAddress: carol.address, checkoutId: open.checkoutId })).toMatchObject(tooLate);
    expect(await payApi(pass, "submit", { checkoutId: open.checkoutId, transaction: signed })).toMatchObject(tooLate);
    expect(await payApi(pass, "confirm", { checkoutId: open.checkoutId })).toMatchObject({ status: 200, body: { status: "pending" } });
    const mcp = await call(server.url, "/mcp", { body: { tool: "wallet_get_history", params: { limit: 100 } }, token: carol.session });
    expect(mcp.body.data.transactions.map((t: Json) => t.signature)).not.toContain(signatureOf(signed));
  });

  test("another owner's product is 404 through /public/*; /public needs a key", async () => {
    expect(await pub("/access/check", ownerB.key, { body: { productId: feature, walletAddress: alice.address } })).toMatchObject({ status: 404, body: { code: "NOT_FOUND" } });
    expect(await pub("/access/check", ownerA.key, { body: { productId: feature, walletAddress: "nope" } })).toMatchObject({
      status: 400,
      body: { code: "INVALID_ADDRESS", details: { fields: [{ field: "walletAddress" }] } },
    });
    expect(await call(server.url, "/public/stats")).toMatchObject({ status: 401, body: { code: "MISSING_API_KEY" } });
    expect(await call(server.url, `/public/verify/${randomTxHash()}`)).toMatchObject({ status: 401, body: { code: "MISSING_API_KEY" } });
  });
});

describe("statistics", () => {
  test("/public/stats and the dashboard's daily view count what was bought", async () => {
    // ownerA sold: Pro 2.5 (alice), Pass 1 (bob, twice: confirmed by reference, then by txHash), Race 0.5
    // (bob), Pass 1 (alice, two references).
    const stats = await pub("/stats", ownerA.key);
    expect(stats.body).toEqual({ totalRevenue: 6, totalTransactions: 5, productCount: 3, revenueByCurrency: { USDC: "6", WGT: "0" } });
    expect((await pub("/stats", ownerB.key)).body).toEqual({ totalRevenue: 0, totalTransactions: 0, productCount: 1, revenueByCurrency: { USDC: "0", WGT: "0" } });
    const today = () => new Date().toISOString().slice(0, 10);
    const asked = today();
    const daily = await dash("/stats?days=7", ownerA.token);
    expect(daily.body).toMatchObject(stats.body);
    expect(daily.body.daily).toHaveLength(7);
    expect([asked, today()]).toContain(daily.body.daily.at(-1).date);
    // Each day holds that day's purchases (UTC), as the purchase list dates them: all of them today, or, in a
    // run that crossed midnight, split across the last two days.
    const purchases = (await dash("/purchases", ownerA.token)).body.purchases as Json[];
    for (const day of daily.body.daily as Json[]) {
      const those = purchases.filter((p) => p.purchasedAt.slice(0, 10) === day.date);
      const revenue = those.reduce((sum, p) => sum + Number(p.amount), 0);
      expect(day).toEqual({ date: day.date, revenue: String(revenue), transactions: those.length }); // an amount: a decimal string
    }
    expect(purchases.map((p) => p.purchasedAt.slice(0, 10)).every((d: string) => daily.body.daily.slice(-2).some((day: Json) => day.date === d))).toBe(true);
    expect((await dash("/stats", ownerA.token)).body.daily).toHaveLength(30);
    expect((await dash("/stats?days=0", ownerA.token)).status).toBe(400);
    expect((await dash("/purchases", ownerA.token)).body.total).toBe(5);
  });
});

describe("a payment the buyer sent itself, neither submitted nor confirmed", () => {
  test("is found by the server's checkout watcher (every 5 s) and recorded: access granted, the checkout completed", async () => {
    // paygate.md: confirm "(and a background watcher over open checkouts) finds the transaction"
    const { owner, product, open, signed } = await selfSentPayment("Watched");
    const access = async () => (await pub("/access/check", owner.key, { body: { walletAddress: bob.address, productId: product } })).body;
    expect(await access()).toMatchObject({ hasAccess: false }); // nothing has looked yet
    expect(await until(async () => ((await dash("/purchases", owner.token)).body.total === 1 ? true : undefined), 15_000, 250)).toBe(true);
    expect(await access()).toMatchObject({ hasAccess: true, txHash: signatureOf(signed) });
    expect((await payApi(product, "confirm", { checkoutId: open.checkoutId })).body).toMatchObject({ status: "completed", txHash: signatureOf(signed) });
  }, 30_000);
});

describe("/public/verify of a payment the buyer sent itself", () => {
  test("is recorded by the verify (not only by the watcher, every 5 s) and answered valid; to another owner it is no payment", async () => {
    const { owner, product, open, signed } = await selfSentPayment("Self-sent");
    const txHash = signatureOf(signed);
    expect((await pub(`/verify/${txHash}`, ownerB.key)).body).toEqual({ valid: false, txHash, error: "not a payment for your products" });
    expect((await pub(`/verify/${txHash}`, owner.key)).body).toMatchObject({ valid: true, txHash, productId: product, productTitle: "Self-sent", walletAddress: bob.address, currency: "USDC" });
    expect((await payApi(product, "confirm", { checkoutId: open.checkoutId })).body).toMatchObject({ status: "completed", txHash });
    expect((await dash("/purchases", owner.token)).body.total).toBe(1);
  });
});
