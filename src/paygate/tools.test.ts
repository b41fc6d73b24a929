// checkout_pay through the tool registry: an agent's custodial wallet buys a product end to end.
import { expect, test } from "bun:test";
import { Keypair, VersionedTransaction } from "@solana/web3.js";
import { testDeps } from "../../test/helpers/deps.ts";
import { createToolRegistry } from "../mcp/tools.ts";
import type { Caller } from "../mcp/registry.ts";
import { createCustodialWallet } from "../wallets/custody.ts";
import { REFERENCE_READS, createCheckoutWatcher, startCheckout } from "./checkout.ts";
import { paymentVariant, signCheckout } from "../../test/helpers/checkout.ts";
import { archiveProduct, createProduct, type ProductInput } from "./products.ts";
import { checkAccess, listPurchases } from "./purchases.ts";
import { AppError } from "../errors.ts";
import { verifyFeatureToken } from "./tokens.ts";
import { createLogger } from "../log.ts";
import { sha256Hex } from "../lib/hash.ts";

test("checkout_pay: a custodial buyer pays, gets the purchase and its token; others are refused clearly", async () => {
  const { deps } = await testDeps();
  const registry = createToolRegistry(deps);
  const owner = Keypair.generate().publicKey.toBase58();
  const product = await createProduct(deps, owner, { title: "Pro", description: "", type: "feature_unlock", price: "2.5", featureIds: ["pro"] });
  const buyer = (await createCustodialWallet(deps)).address;
  await deps.ledger.airdrop(buyer, { sol: 1_000_000_000n, usdc: 10_000_000n });
  const as = (walletAddress: string): Caller => ({
    kind: "wallet",
    walletAddress,
    sessionId: "s",
    jti: "j",
    token: null,
    issuedAtS: 0,
    expiresAtS: 2_000_000_000,
    source: "binding",
  });
  const ctx = (caller: Caller) => ({ deps, caller, session: { id: null, bind: async () => undefined, unbind: async () => undefined }, client: { ip: "192.0.2.9", userAgent: "t" } });

  const paid = await registry.call(ctx(as(buyer)), "checkout_pay", { productId: product.productId });
  if (!paid.success) throw new Error(JSON.stringify(paid));
  expect(paid.data).toMatchObject({ status: "completed", amount: "2.5", currency: "USDC", payTo: owner });
  expect(await checkAccess(deps, owner, product.productId, buyer)).toMatchObject({ hasAccess: true, txHash: paid.data.txHash });
  expect(await verifyFeatureToken(deps, owner, paid.data.accessToken as string)).toMatchObject({ valid: true, features: ["pro"], walletAddress: buyer });
  expect((await deps.ledger.getBalances(buyer)).usdc).toBe(7_500_000n);

  // maxAmount: a price above it is refused before anything is signed or opened; at the price it pays.
  const checkoutsBefore = deps.db.sqlite.query("SELECT count(*) AS n FROM checkouts").get();
  const over = await registry.call(ctx(as(buyer)), "checkout_pay", { productId: product.productId, maxAmount: "2.49", currency: "usdc" });
  expect(over).toMatchObject({ success: false, code: "PAYMENT_MISMATCH", error: "the product costs 2.5 USDC, more than maxAmount 2.49 USDC; nothing was paid" });
  expect((over as { details?: unknown }).details).toEqual({ reason: "amount", amount: "2.5", currency: "USDC", maxAmount: "2.49" });
  expect(deps.db.sqlite.query("SELECT count(*) AS n FROM checkouts").get()).toEqual(checkoutsBefore);
  expect((await deps.ledger.getBalances(buyer)).usdc).toBe(7_500_000n);
  for (const maxAmount of ["abc", "0", "-1", "1.0000001", 1e300]) {
    expect(await registry.call(ctx(as(buyer)), "checkout_pay", { productId: product.productId, maxAmount, currency: "USDC" })).toMatchObject({ success: false, code: "VALIDATION_ERROR" });
  }
  // maxAmount is a price only in a currency: without one it is refused; in another currency, the product is.
  const noCurrency = await registry.call(ctx(as(buyer)), "checkout_pay", { productId: product.productId, maxAmount: "5" });
  expect(noCurrency).toMatchObject({ success: false, code: "VALIDATION_ERROR" });
  const otherCurrency = await registry.call(ctx(as(buyer)), "checkout_pay", { productId: product.productId, maxAmount: "5", currency: "WGT" });
  expect(otherCurrency).toMatchObject({ success: false, code: "PAYMENT_MISMATCH", error: "the product is sold in USDC, not WGT; nothing was paid" });
  expect((otherCurrency as { details?: unknown }).details).toEqual({ reason: "mint", currency: "USDC" });
  expect(deps.db.sqlite.query("SELECT count(*) AS n FROM checkouts").get()).toEqual(checkoutsBefore);
  expect(await registry.call(ctx(as(buyer)), "checkout_pay", { productId: product.productId, maxAmount: 2.5, currency: "USDC" })).toMatchObject({ success: true, data: { status: "completed" } });
  expect((await deps.ledger.getBalances(buyer)).usdc).toBe(5_000_000n);

  // A connected wallet: the transaction to sign first, then the purchase when it comes back signed.
  const connectedKey = Keypair.generate();
  const connected = connectedKey.publicKey.toBase58();
  await deps.ledger.airdrop(connected, { sol: 1_000_000_000n, usdc: 5_000_000n });
  const first = await registry.call(ctx(as(connected)), "checkout_pay", { productId: product.productId, maxAmount: "2.5", currency: "USDC" });
  if (!first.success) throw new Error(JSON.stringify(first));
  // Read first: Bun's toMatchObject puts its matchers in place of what they matched.
  const { checkoutId, unsignedTransaction } = first.data as { checkoutId: string; unsignedTransaction: string };
  expect(first.data).toMatchObject({ amount: "2.5", currency: "USDC", payTo: owner, checkoutId: expect.stringMatching(/^chk_/), unsignedTransaction: expect.any(String) });
  expect((await deps.ledger.getBalances(connected)).usdc).toBe(5_000_000n); // nothing sent yet
  const signedTransaction = signCheckout(unsignedTransaction, connectedKey);
  const call = (params: Record<string, unknown>, who = connected) => registry.call(ctx(as(who)), "checkout_pay", { productId: product.productId, ...params });
  expect(await call({ signedTransaction })).toMatchObject({ success: false, code: "VALIDATION_ERROR" }); // no checkoutId
  expect(await call({ checkoutId, signedTransaction }, buyer)).toMatchObject({ success: false, code: "VALIDATION_ERROR" }); // custodial
  const stranger = Keypair.generate().publicKey.toBase58();
  expect(await call({ checkoutId, signedTransaction }, stranger)).toMatchObject({ success: false, code: "NOT_FOUND" }); // not its checkout
  const forged = VersionedTransaction.deserialize(Buffer.from(signedTransaction, "base64"));
  forged.signatures[0]![0]! ^= 1;
  expect(await call({ checkoutId, signedTransaction: Buffer.from(forged.serialize()).toString("base64") })).toMatchObject({ success: false, code: "TRANSACTION_REJECTED", details: { reason: "invalid_signature" } });
  expect((await deps.ledger.getBalances(connected)).usdc).toBe(5_000_000n);
  // Asked again before it sent anything: a fresh transaction for the same checkout, not a pending that waits for nothing.
  const again = await call({ checkoutId });
  expect(again).toMatchObject({ success: true, data: { checkoutId, unsignedTransaction: expect.any(String), amount: "2.5" } });
  const bought = await call({ checkoutId, signedTransaction });
  expect(bought).toMatchObject({ success: true, data: { status: "completed", checkoutId, amount: "2.5", currency: "USDC", accessToken: expect.stringMatching(/^ft_/) } });
  expect((await deps.ledger.getBalances(connected)).usdc).toBe(2_500_000n);
  expect(await call({ checkoutId, signedTransaction })).toMatchObject({ success: true, data: { status: "completed", checkoutId } }); // again: answered, not paid twice
  expect((await deps.ledger.getBalances(connected)).usdc).toBe(2_500_000n);
  expect(await registry.call(ctx(as(buyer)), "checkout_pay", { productId: "prod_nothing" })).toMatchObject({ success: false, code: "NOT_FOUND" });
  expect(await registry.call(ctx({ kind: "anonymous", tokenError: null }), "checkout_pay", { productId: product.productId })).toMatchObject({
    success: false,
    code: "UNAUTHENTICATED",
  });
});

/**
 * A product, a custodial buyer holding 10 USDC, and a ledger that sends, then loses the answer (the
 * chain stopped answering while it waited) until `losing.off` is set.
 */
async function losingAnswers(input: ProductInput, lost: () => Error = () => new AppError("CHAIN_UNAVAILABLE", "the RPC stopped answering while the transaction was confirmed")) {
  const { deps: quiet } = await testDeps();
  const logLines: string[] = [];
  const base = { ...quiet, log: createLogger("info", "json", (line) => logLines.push(line)) } as typeof quiet;
  const losing = { off: false };
  const ledger = {
    ...base.ledger,
    submit: async (...args: Parameters<typeof base.ledger.submit>) => {
      const sent = await base.ledger.submit(...args);
      if (!losing.off) throw lost();
      return sent;
    },
  };
  const deps = { ...base, ledger } as typeof base;
  const owner = Keypair.generate().publicKey.toBase58();
  const product = await createProduct(deps, owner, input);
  const buyer = (await createCustodialWallet(deps)).address;
  await deps.ledger.airdrop(buyer, { sol: 1_000_000_000n, usdc: 10_000_000n });
  const caller = (walletAddress: string): Caller => ({ kind: "wallet", walletAddress, sessionId: "s", jti: "j", token: null, issuedAtS: 0, expiresAtS: 2_000_000_000, source: "binding" });
  const ctx = (walletAddress: string) => ({
    deps,
    caller: caller(walletAddress),
    session: { id: null, bind: async () => undefined, unbind: async () => undefined },
    client: { ip: "192.0.2.9", userAgent: "t" },
    requestId: "req-losing-1",
  });
  return { deps, registry: createToolRegistry(deps), losing, owner, product, buyer, ctx, logLines };
}

test("checkout_pay from a connected wallet whose signature came too late: a fresh transaction for the checkout, then the purchase", async () => {
  const { deps, clock } = await testDeps();
  const registry = createToolRegistry(deps);
  const owner = Keypair.generate().publicKey.toBase58();
  const product = await createProduct(deps, owner, { title: "Pass", description: "", type: "access", price: "1" });
  const key = Keypair.generate();
  const wallet = key.publicKey.toBase58();
  await deps.ledger.airdrop(wallet, { sol: 1_000_000_000n, usdc: 5_000_000n });
  const caller: Caller = { kind: "wallet", walletAddress: wallet, sessionId: "s", jti: "j", token: null, issuedAtS: 0, expiresAtS: 2_000_000_000, source: "binding" } as Caller;
  const call = (params: Record<string, unknown>) =>
    registry.call({ deps, caller, session: { id: null, bind: async () => undefined, unbind: async () => undefined }, client: { ip: "192.0.2.9", userAgent: "t" } }, "checkout_pay", { productId: product.productId, ...params });
  type Unsigned = { data: { checkoutId: string; unsignedTransaction: string } };
  const first = (await call({})) as unknown as Unsigned;
  const { checkoutId } = first.data;
  const stale = signCheckout(first.data.unsignedTransaction, key);
  clock.advance(120_000); // the wallet took two minutes to sign: its blockhash expired
  expect(await call({ checkoutId, signedTransaction: stale })).toMatchObject({ success: false, code: "TRANSACTION_REJECTED", details: { reason: "blockhash_expired" } });
  const fresh = (await call({ checkoutId })) as unknown as Unsigned;
  expect(fresh.data.checkoutId).toBe(checkoutId);
  expect(await call({ checkoutId, signedTransaction: signCheckout(fresh.data.unsignedTransaction, key) })).toMatchObject({ success: true, data: { status: "completed", checkoutId } });
  expect((await deps.ledger.getBalances(wallet)).usdc).toBe(4_000_000n);
});

test("checkout_pay after an error that came once the payment had landed answers that purchase, not a second payment", async () => {
  const { deps, registry, losing, owner, product, buyer, ctx: as } = await losingAnswers({ title: "Pro", description: "", type: "feature_unlock", price: "2", featureIds: ["pro"] });
  const ctx = as(buyer);

  const failed = await registry.call(ctx, "checkout_pay", { productId: product.productId });
  const checkoutId = (failed as { details: { checkoutId: string } }).details.checkoutId; // read before a matcher replaces it (bun:test)
  expect(checkoutId).toMatch(/^chk_/);
  expect(failed).toMatchObject({ success: false, code: "CHAIN_UNAVAILABLE" });
  losing.off = true;
  const retried = await registry.call(ctx, "checkout_pay", { productId: product.productId });
  if (!retried.success) throw new Error(JSON.stringify(retried));
  expect(retried.data).toMatchObject({ status: "completed", amount: "2", currency: "USDC", payTo: owner, checkoutId });
  expect((await deps.ledger.getBalances(buyer)).usdc).toBe(8_000_000n); // paid once
  expect((await listPurchases(deps, owner, {})).total).toBe(1);
  // With its checkoutId, the earlier call's outcome, however it was completed meanwhile; never a payment.
  expect(await registry.call(ctx, "checkout_pay", { productId: product.productId, checkoutId })).toMatchObject({
    success: true,
    data: { status: "completed", checkoutId, txHash: retried.data.txHash },
  });
  expect((await deps.ledger.getBalances(buyer)).usdc).toBe(8_000_000n);
  // A later call is a new purchase (access is extended), paid again on purpose.
  expect(await registry.call(ctx, "checkout_pay", { productId: product.productId })).toMatchObject({ success: true, data: { status: "completed" } });
  expect((await deps.ledger.getBalances(buyer)).usdc).toBe(6_000_000n);
});

test("checkout_pay failing unexpectedly once the payment was sent answers INTERNAL_ERROR with the checkoutId to resume with", async () => {
  const { deps, registry, losing, product, buyer, ctx, logLines } = await losingAnswers({ title: "Pass", description: "", type: "access", price: "2" }, () => new TypeError("a bug"));
  const failed = await registry.call(ctx(buyer), "checkout_pay", { productId: product.productId });
  const checkoutId = (failed as { details?: { checkoutId?: string } }).details?.checkoutId;
  expect([failed.success, (failed as { code?: string }).code, (failed as { error?: string }).error]).toEqual([false, "INTERNAL_ERROR", "internal error"]);
  expect(checkoutId).toMatch(/^chk_/);
  // The cause is logged under the request's id, the checkout by its key: its id with the (public) product id
  // would let a reader of the log fetch the buyer's access token from the confirm step.
  await deps.log.flush();
  const line = logLines.map((l) => JSON.parse(l) as Record<string, unknown>).find((l) => l.msg === "checkout_pay failed once its payment may have been sent");
  expect(line).toMatchObject({ level: "error", requestId: "req-losing-1", checkoutKey: sha256Hex(checkoutId!).slice(0, 12), error: "TypeError: a bug" });
  expect(logLines.join("\n")).not.toContain(checkoutId!);
  losing.off = true;
  expect(await registry.call(ctx(buyer), "checkout_pay", { productId: product.productId, checkoutId })).toMatchObject({ success: true, data: { status: "completed", checkoutId } });
  expect((await deps.ledger.getBalances(buyer)).usdc).toBe(8_000_000n); // paid once
});

test("checkout_pay with the checkoutId of a call whose payment the watcher completed answers it; a stranger's checkoutId is NOT_FOUND", async () => {
  const { deps, registry, losing, product, buyer, ctx } = await losingAnswers({ title: "Pass", description: "", type: "access", price: "2" });

  const failed = await registry.call(ctx(buyer), "checkout_pay", { productId: product.productId });
  const checkoutId = (failed as { details: { checkoutId: string } }).details.checkoutId;
  losing.off = true;
  expect(await createCheckoutWatcher(deps).runOnce()).toBe(1); // completes it before the caller comes back
  expect(await registry.call(ctx(buyer), "checkout_pay", { productId: product.productId, checkoutId })).toMatchObject({ success: true, data: { status: "completed", checkoutId } });
  expect((await deps.ledger.getBalances(buyer)).usdc).toBe(8_000_000n); // paid once
  // A refusal before anything was sent carries no checkoutId: there is nothing to resume.
  const dear = await createProduct(deps, Keypair.generate().publicKey.toBase58(), { title: "Dear", description: "", type: "access", price: "20" });
  const refused = await registry.call(ctx(buyer), "checkout_pay", { productId: dear.productId });
  expect([refused.success, (refused as { code?: string }).code, (refused as { details?: unknown }).details]).toEqual([false, "INSUFFICIENT_FUNDS", { reason: "amount", currency: "USDC", held: "8", needed: "20" }]);
  const stranger = (await createCustodialWallet(deps)).address;
  expect(await registry.call(ctx(stranger), "checkout_pay", { productId: product.productId, checkoutId })).toMatchObject({ success: false, code: "NOT_FOUND" });
});

test("checkout_pay is not stopped by checkouts someone else opened for the same wallet and crowded", async () => {
  const { deps, registry, losing, product, buyer, ctx } = await losingAnswers({ title: "Pro", description: "", type: "access", price: "2" });
  losing.off = true;
  // Anyone may open checkouts for any wallet; a stranger opens six (more than the attempts a retry
  // looks at) and fills one's reference with more transactions than one look reads.
  const opened = [];
  for (let i = 0; i < 6; i++) opened.push(await startCheckout(deps, product.productId, buyer));
  const stranger = Keypair.generate();
  await deps.ledger.airdrop(stranger.publicKey.toBase58(), { sol: 1_000_000_000n, usdc: 1_000_000n });
  for (let i = 1; i <= REFERENCE_READS + 1; i++) {
    await deps.ledger.submit(Buffer.from(paymentVariant(opened[0]!.transaction, { payer: stranger, amount: BigInt(i) }), "base64"));
  }
  const paid = await registry.call(ctx(buyer), "checkout_pay", { productId: product.productId });
  expect(paid).toMatchObject({ success: true, data: { status: "completed" } });
  expect((await deps.ledger.getBalances(buyer)).usdc).toBe(8_000_000n);
});

test("checkout_pay's retry pays nothing while an earlier transaction may still land, and buys once it no longer can", async () => {
  const { deps: base } = await testDeps();
  // A send whose fate is unknown: it never reaches the ledger, and the caller hears CHAIN_UNAVAILABLE.
  let dropping = true;
  const ledger = {
    ...base.ledger,
    submit: async (...args: Parameters<typeof base.ledger.submit>) => {
      if (dropping) throw new AppError("CHAIN_UNAVAILABLE", "the RPC stopped answering while the transaction was sent");
      return base.ledger.submit(...args);
    },
  };
  const deps = { ...base, ledger } as typeof base;
  const clock = base.clock as unknown as { advance(ms: number): void };
  const product = await createProduct(deps, Keypair.generate().publicKey.toBase58(), { title: "Pass", description: "", type: "access", price: "2" });
  const buyer = (await createCustodialWallet(deps)).address;
  await deps.ledger.airdrop(buyer, { sol: 1_000_000_000n, usdc: 10_000_000n });
  const registry = createToolRegistry(deps);
  const ctx = { deps, caller: { kind: "wallet", walletAddress: buyer, sessionId: "s", jti: "j", token: null, issuedAtS: 0, expiresAtS: 2_000_000_000, source: "binding" } as Caller, session: { id: null, bind: async () => undefined, unbind: async () => undefined }, client: { ip: "192.0.2.9", userAgent: "t" } };

  const failed = await registry.call(ctx, "checkout_pay", { productId: product.productId });
  const checkoutId = (failed as { details: { checkoutId: string } }).details.checkoutId;
  expect(failed).toMatchObject({ success: false, code: "CHAIN_UNAVAILABLE" });
  dropping = false;
  // Its blockhash is still valid: the earlier transaction could land any moment. Nothing is paid.
  const waiting = await registry.call(ctx, "checkout_pay", { productId: product.productId });
  expect(waiting).toMatchObject({ success: true, data: { status: "pending", checkoutId } });
  expect((await deps.ledger.getBalances(buyer)).usdc).toBe(10_000_000n);
  // Once its blockhash has expired (and two minutes passed) it can no longer land: the retry buys.
  clock.advance(121_000);
  expect(await registry.call(ctx, "checkout_pay", { productId: product.productId })).toMatchObject({ success: true, data: { status: "completed" } });
  expect((await deps.ledger.getBalances(buyer)).usdc).toBe(8_000_000n);
});

/**
 * A custodial buyer of a 2-USDC pass whose first payment is held on its way to the ledger until `gate` opens
 * (and then refused before it goes out, with `refuseFirst`).
 */
async function heldPayment(refuseFirst = false) {
  const { deps: base } = await testDeps();
  // The first payment is held on its way to the ledger (recorded by /submit, not landed yet).
  const gate = Promise.withResolvers<void>();
  let sends = 0;
  const ledger = {
    ...base.ledger,
    submit: async (...args: Parameters<typeof base.ledger.submit>) => {
      if (sends++ === 0) {
        await gate.promise;
        if (refuseFirst) throw new AppError("TRANSACTION_REJECTED", "the ledger refused it before sending", { details: { reason: "simulation_failed" } });
      }
      return base.ledger.submit(...args);
    },
  };
  const deps = { ...base, ledger } as typeof base;
  const product = await createProduct(deps, Keypair.generate().publicKey.toBase58(), { title: "Pass", description: "", type: "access", price: "2" });
  const buyer = (await createCustodialWallet(deps)).address;
  await deps.ledger.airdrop(buyer, { sol: 1_000_000_000n, usdc: 10_000_000n });
  const registry = createToolRegistry(deps);
  const ctx = { deps, caller: { kind: "wallet", walletAddress: buyer, sessionId: "s", jti: "j", token: null, issuedAtS: 0, expiresAtS: 2_000_000_000, source: "binding" } as Caller, session: { id: null, bind: async () => undefined, unbind: async () => undefined }, client: { ip: "192.0.2.9", userAgent: "t" } };
  return { deps, gate, sends: () => sends, productId: product.productId, buyer, registry, ctx };
}

test("two checkout_pay calls at once pay once; the later one waits for the earlier call's payment and answers its purchase", async () => {
  const { deps, gate, sends, productId, buyer, registry, ctx } = await heldPayment();
  const first = registry.call(ctx, "checkout_pay", { productId });
  let answered = false;
  const second = registry.call(ctx, "checkout_pay", { productId }).finally(() => (answered = true));
  await Bun.sleep(500);
  expect(answered).toBe(false); // the earlier payment may land any moment: waited for, not answered pending
  gate.resolve();
  const [paid, followed] = await Promise.all([first, second]);
  if (!paid.success || !followed.success) throw new Error(JSON.stringify([paid, followed]));
  expect(paid.data).toMatchObject({ status: "completed" });
  const { checkoutId, txHash, purchaseId } = paid.data as { checkoutId: string; txHash: string; purchaseId: string };
  // The earlier call's purchase, under its checkout.
  expect(followed.data).toMatchObject({ status: "completed", checkoutId, txHash, purchaseId, amount: "2", currency: "USDC" });
  expect(sends()).toBe(1);
  expect((await deps.ledger.getBalances(buyer)).usdc).toBe(8_000_000n); // paid once
});

test("when the earlier call's payment is refused before it goes out, the later call that waited for it answers CONFLICT; called again it buys", async () => {
  const { deps, gate, sends, productId, buyer, registry, ctx } = await heldPayment(true);
  const first = registry.call(ctx, "checkout_pay", { productId });
  const second = registry.call(ctx, "checkout_pay", { productId });
  await Bun.sleep(300);
  gate.resolve();
  const [refused, waited] = await Promise.all([first, second]);
  expect(refused).toMatchObject({ success: false, code: "TRANSACTION_REJECTED" });
  expect(waited).toMatchObject({ success: false, code: "CONFLICT", error: expect.stringContaining("call again to buy") });
  expect((await deps.ledger.getBalances(buyer)).usdc).toBe(10_000_000n); // nothing was paid
  expect(await registry.call(ctx, "checkout_pay", { productId })).toMatchObject({ success: true, data: { status: "completed" } });
  expect([sends(), (await deps.ledger.getBalances(buyer)).usdc]).toEqual([2, 8_000_000n]);
});

test("a payment followed that does not land in time is answered pending with its checkoutId, which resumes to the purchase", async () => {
  const { deps, gate, sends, productId, buyer, registry, ctx } = await heldPayment();
  const first = registry.call(ctx, "checkout_pay", { productId });
  // The later call's wait, cut short: still on its way, so pending, naming the earlier call's checkout.
  const { followCheckout } = await import("./checkout.ts");
  let open: { id: string } | undefined;
  for (let i = 0; i < 200 && open === undefined; i++) {
    await Bun.sleep(25); // until the earlier call has recorded its transaction
    [open] = deps.db.sqlite.query("SELECT checkout_id AS id FROM checkout_submissions").all() as { id: string }[];
  }
  const started = performance.now();
  expect(await followCheckout(deps, productId, buyer, open!.id, 300)).toMatchObject({ status: "pending", checkoutId: open!.id, amount: "2", currency: "USDC" });
  expect(performance.now() - started).toBeGreaterThanOrEqual(290);
  gate.resolve();
  const paid = await first;
  if (!paid.success) throw new Error(JSON.stringify(paid));
  expect(await registry.call(ctx, "checkout_pay", { productId, checkoutId: open!.id })).toMatchObject({
    success: true,
    data: { status: "completed", checkoutId: open!.id, txHash: (paid.data as { txHash: string }).txHash },
  });
  expect(sends()).toBe(1);
});

test("two checkout_pay calls at once for two products the wallet cannot both afford: one buys, the other is INSUFFICIENT_FUNDS and costs nothing", async () => {
  const { deps } = await testDeps();
  const registry = createToolRegistry(deps);
  const owner = Keypair.generate().publicKey.toBase58();
  const pass = { description: "", type: "access" as const, price: "3" };
  const products = [await createProduct(deps, owner, { ...pass, title: "A" }), await createProduct(deps, owner, { ...pass, title: "B" })];
  const buyer = (await createCustodialWallet(deps)).address;
  await deps.ledger.airdrop(buyer, { sol: 1_000_000_000n, usdc: 4_000_000n });
  const caller: Caller = { kind: "wallet", walletAddress: buyer, sessionId: "s", jti: "j", token: null, issuedAtS: 0, expiresAtS: 2_000_000_000, source: "binding" };
  const ctx = { deps, caller, session: { id: null, bind: async () => undefined, unbind: async () => undefined }, client: { ip: "192.0.2.9", userAgent: "t" } };
  const answers = await Promise.all(products.map((p) => registry.call(ctx, "checkout_pay", { productId: p.productId })));
  expect(answers.map((a) => (a.success ? (a.data.status as string) : a.code)).sort()).toEqual(["INSUFFICIENT_FUNDS", "completed"]);
  const paid = answers.find((a) => a.success)!;
  const fee = (await deps.ledger.getTransaction(paid.success ? (paid.data.txHash as string) : ""))!.fee;
  // One payment and its fee (and the payee's new token account's rent); no failed transaction was charged.
  const balances = await deps.ledger.getBalances(buyer);
  expect(balances.usdc).toBe(1_000_000n);
  expect(balances.sol).toBe(1_000_000_000n - fee - 2_039_280n);
  const statuses = (await deps.ledger.history(buyer, { limit: 10 })).map((t) => t.status);
  expect([statuses.length, statuses.includes("failed")]).toEqual([3, false]); // two airdrops (SOL, USDC), the payment
});

/** A custodial buyer (10 USDC) of a 2-USDC pass whose ledger sends through `submit`, which a test may replace. */
async function keyedBuyer(submit?: (send: () => Promise<unknown>) => Promise<unknown>, connected?: Keypair) {
  const { deps: base, clock } = await testDeps();
  const ledger = {
    ...base.ledger,
    submit: (...args: Parameters<typeof base.ledger.submit>) => (submit === undefined ? base.ledger.submit(...args) : submit(() => base.ledger.submit(...args))),
  };
  const deps = { ...base, ledger } as typeof base;
  const owner = Keypair.generate().publicKey.toBase58();
  const product = await createProduct(deps, owner, { title: "Pass", description: "", type: "access", price: "2" });
  const buyer = connected?.publicKey.toBase58() ?? (await createCustodialWallet(deps)).address;
  await deps.ledger.airdrop(buyer, { sol: 1_000_000_000n, usdc: 10_000_000n });
  const registry = createToolRegistry(deps);
  const ctx = { deps, caller: { kind: "wallet", walletAddress: buyer, sessionId: "s", jti: "j", token: null, issuedAtS: 0, expiresAtS: 2_000_000_000, source: "binding" } as Caller, session: { id: null, bind: async () => undefined, unbind: async () => undefined }, client: { ip: "192.0.2.9", userAgent: "t" } };
  const pay = (params: Record<string, unknown>) => registry.call(ctx, "checkout_pay", { productId: product.productId, ...params });
  const usdc = async () => (await deps.ledger.getBalances(buyer)).usdc;
  /** checkout_pay as another wallet of the same service. */
  const payAs = (walletAddress: string) => (params: Record<string, unknown>) =>
    registry.call({ ...ctx, caller: { ...ctx.caller, walletAddress } as Caller }, "checkout_pay", { productId: product.productId, ...params });
  return { deps, clock, owner, product, buyer, pay, payAs, usdc };
}

test("checkout_pay with an idempotencyKey: calling again with it answers that purchase; a new key buys again; a key is one product's", async () => {
  const { deps, owner, pay, usdc } = await keyedBuyer();
  const first = await pay({ idempotencyKey: "order-1" });
  if (!first.success) throw new Error(JSON.stringify(first));
  expect(first.data).toMatchObject({ status: "completed" });
  // The answer was lost (a dropped connection, a restarted server): the same key is that purchase.
  expect(await pay({ idempotencyKey: "order-1" })).toMatchObject({ success: true, data: { status: "completed", purchaseId: first.data.purchaseId, checkoutId: first.data.checkoutId } });
  expect(await usdc()).toBe(8_000_000n);
  const second = await pay({ idempotencyKey: "order-2" });
  expect(second).toMatchObject({ success: true, data: { status: "completed" } });
  expect((second as unknown as { data: { purchaseId: string } }).data.purchaseId).not.toBe(first.data.purchaseId);
  expect([await usdc(), (await listPurchases(deps, owner, {})).total]).toEqual([6_000_000n, 2]);
  const other = await createProduct(deps, owner, { title: "Other", description: "", type: "access", price: "1" });
  expect(await pay({ productId: other.productId, idempotencyKey: "order-1" })).toMatchObject({
    success: false,
    code: "VALIDATION_ERROR",
    details: { fields: [{ field: "idempotencyKey" }] },
  });
  expect(await pay({ idempotencyKey: "no spaces" })).toMatchObject({ success: false, code: "VALIDATION_ERROR" });
  expect(await usdc()).toBe(6_000_000n);
});

test("a key's retry after the product was archived answers the purchase made under it; a new key is refused as the product is", async () => {
  const { deps, owner, product, pay, usdc } = await keyedBuyer();
  const first = await pay({ idempotencyKey: "order-1" });
  if (!first.success) throw new Error(JSON.stringify(first));
  await archiveProduct(deps, owner, product.productId);
  expect(await pay({ idempotencyKey: "order-1" })).toMatchObject({ success: true, data: { status: "completed", purchaseId: first.data.purchaseId, checkoutId: first.data.checkoutId } });
  expect(await pay({ idempotencyKey: "order-2" })).toMatchObject({ success: false, code: "INVALID_STATE", error: "this product is archived and can no longer be bought" });
  expect(await usdc()).toBe(8_000_000n);
});

test("currency and maxAmount are read on every call: no amount is VALIDATION_ERROR even where the call pays nothing; a purchase made is answered as it is", async () => {
  const { pay, usdc } = await keyedBuyer();
  const first = await pay({});
  if (!first.success) throw new Error(JSON.stringify(first));
  const { checkoutId } = first.data as { checkoutId: string };
  for (const limits of [{ maxAmount: "-1", currency: "USDC" }, { maxAmount: "NaN", currency: "USDC" }, { maxAmount: "0", currency: "USDC" }, { maxAmount: "2" }, { maxAmount: "1.0000001", currency: "USDC" }]) {
    const answer = await pay({ checkoutId, ...limits });
    expect([limits, answer]).toMatchObject([limits, { success: false, code: "VALIDATION_ERROR" }]);
  }
  // Well-formed limits do not undo a purchase already made: it is answered, nothing paid again.
  for (const limits of [{ maxAmount: "1", currency: "USDC" }, { currency: "WGT" }, { maxAmount: "0.000001", currency: "WGT" }]) {
    const answer = await pay({ checkoutId, ...limits });
    expect([limits, answer]).toMatchObject([limits, { success: true, data: { status: "completed", checkoutId } }]);
  }
  expect(await usdc()).toBe(8_000_000n);
});

test("a connected wallet's signed transaction is held against its checkout's price and the call's limits before it is sent", async () => {
  const keypair = Keypair.generate();
  const { pay, usdc } = await keyedBuyer(undefined, keypair);
  const offered = await pay({ maxAmount: "2", currency: "USDC" });
  if (!offered.success) throw new Error(JSON.stringify(offered));
  const { checkoutId, unsignedTransaction } = offered.data as { checkoutId: string; unsignedTransaction: string };
  const signedTransaction = signCheckout(unsignedTransaction, keypair);
  expect(await pay({ checkoutId, signedTransaction, maxAmount: "1.5", currency: "USDC" })).toMatchObject({
    success: false,
    code: "PAYMENT_MISMATCH",
    details: { reason: "amount", amount: "2", currency: "USDC", maxAmount: "1.5" },
  });
  expect(await pay({ checkoutId, signedTransaction, currency: "WGT" })).toMatchObject({ success: false, code: "PAYMENT_MISMATCH", details: { reason: "mint" } });
  expect(await pay({ checkoutId, signedTransaction, maxAmount: "-2", currency: "USDC" })).toMatchObject({ success: false, code: "VALIDATION_ERROR" });
  expect(await usdc()).toBe(10_000_000n); // nothing was sent
  // Its resume hands out a fresh transaction (nothing sent can land): held against the checkout's price too.
  expect(await pay({ checkoutId, maxAmount: "1.5", currency: "USDC" })).toMatchObject({ success: false, code: "PAYMENT_MISMATCH", details: { reason: "amount" } });
  expect(await pay({ checkoutId, maxAmount: "2", currency: "USDC" })).toMatchObject({ success: true, data: { checkoutId, unsignedTransaction: expect.any(String) } });
  expect(await pay({ checkoutId, signedTransaction, maxAmount: "2", currency: "usdc" })).toMatchObject({ success: true, data: { status: "completed", checkoutId } });
  expect(await usdc()).toBe(8_000_000n);
  // Once paid, the same call with any well-formed limits answers the purchase.
  expect(await pay({ checkoutId, signedTransaction, maxAmount: "1", currency: "USDC" })).toMatchObject({ success: true, data: { status: "completed", checkoutId } });
});

test("a custodial wallet's keys are each a purchase, even while another key's payment is on its way", async () => {
  const gate = Promise.withResolvers<void>();
  let sends = 0;
  const { deps, owner, pay, usdc } = await keyedBuyer(async (send) => {
    if (sends++ === 0) await gate.promise; // k1's payment is held on its way
    return send();
  });
  const first = pay({ idempotencyKey: "k1" });
  for (let i = 0; i < 200 && sends === 0; i++) await Bun.sleep(10);
  const second = pay({ idempotencyKey: "k2" });
  await Bun.sleep(200);
  gate.resolve();
  const [a, b] = (await Promise.all([first, second])) as unknown as { success: boolean; data: { status: string; checkoutId: string; purchaseId: string } }[];
  expect([a!.data.status, b!.data.status]).toEqual(["completed", "completed"]);
  expect(a!.data.purchaseId).not.toBe(b!.data.purchaseId);
  expect([await usdc(), (await listPurchases(deps, owner, {})).total]).toEqual([6_000_000n, 2]);
});

test("a key is each wallet's own: two wallets buying with the same key both buy", async () => {
  const { deps, owner, pay, payAs, usdc } = await keyedBuyer();
  const other = (await createCustodialWallet(deps)).address;
  await deps.ledger.airdrop(other, { sol: 1_000_000_000n, usdc: 10_000_000n });
  expect(await pay({ idempotencyKey: "order-1" })).toMatchObject({ success: true, data: { status: "completed" } });
  expect(await payAs(other)({ idempotencyKey: "order-1" })).toMatchObject({ success: true, data: { status: "completed" } });
  expect([await usdc(), (await deps.ledger.getBalances(other)).usdc, (await listPurchases(deps, owner, {})).total]).toEqual([8_000_000n, 8_000_000n, 2]);
});

test("a key whose payment was kept but never sent (the server stopped in between): pending while it could land, then its retry pays it once; a checkoutId resume answers CONFLICT", async () => {
  let stopped = true; // the first send never happens: the process died after keeping the transaction
  const { clock, pay, usdc } = await keyedBuyer(async (send) => {
    if (stopped) throw new Error("the process stopped here");
    return send();
  });
  const failed = await pay({ idempotencyKey: "k" });
  const checkoutId = (failed as { details: { checkoutId: string } }).details.checkoutId;
  expect(failed).toMatchObject({ success: false, code: "INTERNAL_ERROR" });
  stopped = false;
  // Within two minutes of its keeping it could still land (a node behind): nothing is paid, the retry waits.
  expect(await pay({ checkoutId })).toMatchObject({ success: true, data: { status: "pending", checkoutId } });
  expect(await usdc()).toBe(10_000_000n);
  clock.advance(121_000); // its blockhash expired, and two minutes passed: it can never land
  expect(await pay({ checkoutId })).toMatchObject({ success: false, code: "CONFLICT", error: expect.stringContaining("nothing was paid") });
  expect(await pay({ idempotencyKey: "k" })).toMatchObject({ success: true, data: { status: "completed", checkoutId } });
  expect(await pay({ idempotencyKey: "k" })).toMatchObject({ success: true, data: { status: "completed", checkoutId } });
  expect(await usdc()).toBe(8_000_000n); // once
});

test("a connected wallet's signedTransaction sent again with other limits, while the first sending may still land, is answered as it is, not refused", async () => {
  const keypair = Keypair.generate();
  let stopped = true; // the first sending is kept, then the process stops before it goes out
  const { pay, usdc } = await keyedBuyer(async (send) => {
    if (stopped) throw new Error("the process stopped here");
    return send();
  }, keypair);
  const offered = await pay({ maxAmount: "2", currency: "USDC" });
  if (!offered.success) throw new Error(JSON.stringify(offered));
  const { checkoutId, unsignedTransaction } = offered.data as { checkoutId: string; unsignedTransaction: string };
  const signedTransaction = signCheckout(unsignedTransaction, keypair);
  expect(await pay({ checkoutId, signedTransaction })).toMatchObject({ success: false, code: "INTERNAL_ERROR" });
  stopped = false;
  // Its kept sending may still land: this call pays nothing new, so its limit refuses nothing ("nothing was paid" would be untrue).
  expect(await pay({ checkoutId, signedTransaction, maxAmount: "1", currency: "USDC" })).toMatchObject({ success: true, data: { status: "completed", checkoutId } });
  expect(await usdc()).toBe(8_000_000n);
});

test("a key whose call was refused before paying (too little USDC) buys with it once funded", async () => {
  const { deps, buyer, pay, usdc } = await keyedBuyer();
  const dear = await createProduct(deps, Keypair.generate().publicKey.toBase58(), { title: "Dear", description: "", type: "access", price: "12" });
  expect(await pay({ productId: dear.productId, idempotencyKey: "dear" })).toMatchObject({ success: false, code: "INSUFFICIENT_FUNDS" });
  await deps.ledger.airdrop(buyer, { usdc: 5_000_000n });
  expect(await pay({ productId: dear.productId, idempotencyKey: "dear" })).toMatchObject({ success: true, data: { status: "completed" } });
  expect(await usdc()).toBe(3_000_000n);
});

test("two calls with one key at once pay once: the later waits for the earlier's payment and answers its purchase", async () => {
  const gate = Promise.withResolvers<void>();
  let sends = 0;
  const { deps, owner, pay, usdc } = await keyedBuyer(async (send) => {
    sends++;
    await gate.promise;
    return send();
  });
  const first = pay({ idempotencyKey: "same" });
  let answered = false;
  const second = pay({ idempotencyKey: "same" }).finally(() => (answered = true));
  await Bun.sleep(500);
  expect(answered).toBe(false);
  gate.resolve();
  const [a, b] = await Promise.all([first, second]);
  if (!a.success || !b.success) throw new Error(JSON.stringify([a, b]));
  expect(b.data).toMatchObject({ status: "completed", purchaseId: (a.data as { purchaseId: string }).purchaseId });
  // Both may have sent the checkout's transaction (the same bytes: one checkout, one blockhash): it is paid once.
  expect([sends >= 1, await usdc(), (await listPurchases(deps, owner, {})).total]).toEqual([true, 8_000_000n, 1]);
});

test("a key's retry that meets its payment's last chance pays the checkout, not CONFLICT; limits hold on a retry; a key whose checkout expired is spent", async () => {
  let stopped = true;
  const { clock, pay, usdc } = await keyedBuyer(async (send) => {
    if (stopped) throw new Error("the process stopped here");
    return send();
  });
  const failed = await pay({ idempotencyKey: "k" });
  const checkoutId = (failed as { details: { checkoutId: string } }).details.checkoutId;
  stopped = false;
  clock.advance(110_000); // the kept transaction could still land for 10 s: the retry waits for it
  const retry = pay({ idempotencyKey: "k" });
  await Bun.sleep(200);
  clock.advance(15_000); // and then it cannot any more
  expect(await retry).toMatchObject({ success: true, data: { status: "completed", checkoutId } });
  expect(await usdc()).toBe(8_000_000n);
  // A retry's currency and maxAmount are held against the key's checkout, as a new call's are.
  stopped = true;
  const second = await pay({ idempotencyKey: "k2" });
  stopped = false;
  expect(second).toMatchObject({ success: false, code: "INTERNAL_ERROR" });
  clock.advance(121_000);
  expect(await pay({ idempotencyKey: "k2", currency: "WGT" })).toMatchObject({ success: false, code: "PAYMENT_MISMATCH" });
  expect(await pay({ idempotencyKey: "k2", currency: "USDC", maxAmount: "1.99" })).toMatchObject({ success: false, code: "PAYMENT_MISMATCH" });
  // Its checkout expired unpaid: the key is spent, and the answer says to use a new one.
  clock.advance(15 * 60_000);
  expect(await pay({ idempotencyKey: "k2" })).toMatchObject({ success: false, code: "INVALID_STATE", error: expect.stringContaining("give a new idempotencyKey") });
  expect(await usdc()).toBe(8_000_000n);
  expect(await pay({ idempotencyKey: "k3" })).toMatchObject({ success: true, data: { status: "completed" } });
});

test("a connected wallet's keys: each is its own purchase, even while another's payment is on its way; a kept transaction that never went out gets a fresh one", async () => {
  const key = Keypair.generate();
  const gate = Promise.withResolvers<void>();
  let sends = 0;
  let stopped = false;
  const { deps, clock, owner, pay, usdc } = await keyedBuyer(async (send) => {
    if (stopped) throw new Error("the process stopped here");
    if (sends++ === 0) await gate.promise; // the first key's payment is held on its way
    return send();
  }, key);
  type Unsigned = { success: true; data: { checkoutId: string; unsignedTransaction: string } };
  const k1 = (await pay({ idempotencyKey: "k1" })) as unknown as Unsigned;
  const k2 = (await pay({ idempotencyKey: "k2" })) as unknown as Unsigned;
  expect(k1.data.checkoutId).not.toBe(k2.data.checkoutId);
  const signed = (u: Unsigned) => ({ checkoutId: u.data.checkoutId, signedTransaction: signCheckout(u.data.unsignedTransaction, key) });
  const first = pay(signed(k1));
  const { listSubmissions } = await import("./store.ts");
  for (let i = 0; i < 200 && (await listSubmissions(deps.db, k1.data.checkoutId)).length === 0; i++) await Bun.sleep(10);
  const second = await pay(signed(k2)); // k1's payment is still on its way
  expect(second).toMatchObject({ success: true, data: { status: "completed", checkoutId: k2.data.checkoutId } });
  gate.resolve();
  expect(await first).toMatchObject({ success: true, data: { status: "completed", checkoutId: k1.data.checkoutId } });
  expect([await usdc(), (await listPurchases(deps, owner, {})).total]).toEqual([6_000_000n, 2]);
  // k3's signed transaction was kept, then the process stopped before sending it.
  const k3 = (await pay({ idempotencyKey: "k3" })) as unknown as Unsigned;
  stopped = true;
  expect(await pay(signed(k3))).toMatchObject({ success: false, code: "INTERNAL_ERROR" });
  stopped = false;
  expect(await pay({ idempotencyKey: "k3" })).toMatchObject({ success: true, data: { status: "pending" } }); // it could still land
  clock.advance(121_000);
  const fresh = (await pay({ idempotencyKey: "k3" })) as unknown as Unsigned;
  const again = signed(fresh); // before a matcher stands in for its fields (bun:test)
  expect(fresh.data).toMatchObject({ checkoutId: k3.data.checkoutId, unsignedTransaction: expect.any(String) });
  expect(await pay(again)).toMatchObject({ success: true, data: { status: "completed", checkoutId: k3.data.checkoutId } });
  expect(await usdc()).toBe(4_000_000n);
});
