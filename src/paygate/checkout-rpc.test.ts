// Checkout on the RPC ledger, against a LiteSVM-backed JSON-RPC server: a payment the buyer sent itself
// counts once confirmed on devnet, and on mainnet only once finalized (paygate.md step 3: "confirmed
// (mainnet: finalized)"), whether /confirm or the watcher looks for it.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { ComputeBudgetProgram, Connection, Keypair, TransactionInstruction } from "@solana/web3.js";
import { FINALITY_SLOTS, startLiteSvmRpc, type LiteSvmRpc } from "../../test/helpers/litesvm-rpc.ts";
import { testDeps } from "../../test/helpers/deps.ts";
import { paymentVariant, signCheckout, signatureOf } from "../../test/helpers/checkout.ts";
import { USDC_MINTS } from "../ledger/rpc/ledger.ts";
import { codeOf, reasonOf } from "../../test/helpers/errors.ts";
import { CHECKOUT_TTL_MS, EXPIRY_GRACE_MS, confirmCheckout, createCheckoutWatcher, earlierPurchaseOf, recordPaymentOf, startCheckout, submitCheckout } from "./checkout.ts";
import { landingHeightLimit } from "../ledger/landing.ts";
import { parseTransaction } from "../ledger/transactions.ts";
import * as paygateStore from "./store.ts";
import { AppError } from "../errors.ts";
import { createProduct } from "./products.ts";
import { checkAccess, verifyTransaction } from "./purchases.ts";

const SOL = 1_000_000_000n;
const USDC = 1_000_000n;

let rpc: LiteSvmRpc;
const stops: (() => Promise<void>)[] = [];
beforeAll(async () => {
  rpc = await startLiteSvmRpc();
  rpc.createMint(6, USDC_MINTS.mainnet); // the devnet mint is made by the server itself
});
afterAll(async () => {
  for (const stop of stops) await stop();
  await rpc.stop();
});

async function setup(network: "devnet" | "mainnet") {
  const env: Record<string, string> = { NETWORK: network, SOLANA_RPC_URL: rpc.url };
  if (network === "mainnet") {
    Object.assign(env, { JWT_SECRET: "mainnet-test-secret-mainnet-test-secret-01", WALLET_ENCRYPTION_KEY: "11".repeat(32), AUTH_RATE_LIMIT: "on" });
  }
  const { deps, db, clock } = await testDeps(env);
  clock.set(Date.now()); // the test cluster stamps blocks with the real time
  stops.push(async () => {
    await deps.ledger.stop();
    db.close();
  });
  const owner = Keypair.generate().publicKey.toBase58();
  const { productId } = await createProduct(deps, owner, { title: "Pass", type: "access", price: "2", accessDays: 30 });
  const buyer = Keypair.generate();
  const wallet = buyer.publicKey.toBase58();
  rpc.setLamports(wallet, SOL);
  rpc.mintTokens(USDC_MINTS[network], wallet, 10n * USDC);
  /** The buyer signs the checkout's transaction and sends it itself (the ledger waits for `confirmed`). */
  const payItself = async () => {
    const checkout = await startCheckout(deps, productId, wallet);
    const signed = signCheckout(checkout.transaction, buyer);
    await deps.ledger.submit(Buffer.from(signed, "base64"));
    return { checkoutId: checkout.checkoutId, txHash: signatureOf(signed) };
  };
  const hasAccess = async () => (await checkAccess(deps, owner, productId, wallet)).hasAccess;
  /** A funded stranger sends `count` small payments carrying the checkout's (now public) reference. */
  const strangerCarriesReference = async (checkoutId: string, count: number) => {
    const stranger = Keypair.generate();
    rpc.setLamports(stranger.publicKey.toBase58(), SOL);
    rpc.mintTokens(USDC_MINTS[network], stranger.publicKey.toBase58(), 10n * USDC);
    const again = await startCheckout(deps, productId, wallet, checkoutId); // the same reference
    for (let i = 1; i <= count; i++) {
      await deps.ledger.submit(Buffer.from(paymentVariant(again.transaction, { payer: stranger, amount: BigInt(i) }), "base64"));
    }
  };
  return { deps, clock, owner, productId, buyer, wallet, payItself, hasAccess, strangerCarriesReference };
}

describe("checkout on RPC networks", () => {
  test("a payment the buyer's wallet added an instruction to, sent by the buyer itself, is still its payment", async () => {
    const s = await setup("devnet");
    const checkout = await startCheckout(s.deps, s.productId, s.wallet);
    // Compute Budget SetLoadedAccountsDataSizeLimit(256 KiB): a cluster runs it; the service does not model it.
    const limit = new TransactionInstruction({ programId: ComputeBudgetProgram.programId, keys: [], data: Buffer.from([4, 0, 0, 4, 0]) });
    const signed = paymentVariant(checkout.transaction, { payer: s.buyer, prepend: [limit] });
    await new Connection(rpc.url, "confirmed").sendRawTransaction(Buffer.from(signed, "base64"), { skipPreflight: true });
    const txHash = signatureOf(signed);
    // Found by its reference (the watcher, /confirm) or named by its signature: a purchase, not "found 0".
    expect(await confirmCheckout(s.deps, s.productId, checkout.checkoutId)).toMatchObject({ status: "completed", txHash });
    expect(await confirmCheckout(s.deps, s.productId, checkout.checkoutId, txHash)).toMatchObject({ status: "completed", txHash });
    expect(await s.hasAccess()).toBe(true);
  });

  test("a payment whose block time the node does not know is not judged: CHAIN_UNAVAILABLE, nothing expires, completed once it is known", async () => {
    const s = await setup("devnet");
    const { checkoutId, txHash } = await s.payItself();
    // A stranger's later payment carrying the same (now public) reference: refused, but it must not hide
    // the undecided one and get the checkout expired.
    await s.strangerCarriesReference(checkoutId, 1);
    rpc.setBlockTimeUnknown(true);
    try {
      expect(await codeOf(confirmCheckout(s.deps, s.productId, checkoutId))).toBe("CHAIN_UNAVAILABLE");
      s.clock.advance(CHECKOUT_TTL_MS + EXPIRY_GRACE_MS + 1); // long past expiry: the watcher must not close it
      await createCheckoutWatcher(s.deps).runOnce();
      expect(await s.hasAccess()).toBe(false);
    } finally {
      rpc.setBlockTimeUnknown(false);
    }
    expect(await confirmCheckout(s.deps, s.productId, checkoutId)).toMatchObject({ status: "completed", txHash }); // it landed in time
    expect(await s.hasAccess()).toBe(true);
  });

  test("a node that answers a payment without its status (meta) is not answering: nothing is refused for good", async () => {
    const s = await setup("devnet");
    const { checkoutId, txHash } = await s.payItself();
    rpc.setMetaMissing(true);
    try {
      expect(await codeOf(confirmCheckout(s.deps, s.productId, checkoutId))).toBe("CHAIN_UNAVAILABLE");
    } finally {
      rpc.setMetaMissing(false);
    }
    expect(await confirmCheckout(s.deps, s.productId, checkoutId)).toMatchObject({ status: "completed", txHash });
  });

  test("a node answering out of spec (no err in the status, no owner in token balances, no result) is not answering", async () => {
    const s = await setup("devnet");
    const { checkoutId, txHash } = await s.payItself();
    type Tx = { meta: Record<string, unknown> & { postTokenBalances: Record<string, unknown>[]; preTokenBalances: Record<string, unknown>[] } };
    const withTx = (change: (tx: Tx) => void) => (method: string, answer: Record<string, unknown>) => {
      if (method !== "getTransaction" || answer.result === null) return answer;
      const tx = structuredClone(answer.result) as Tx; // the node's own record stays as it is
      change(tx);
      return { ...answer, result: tx };
    };
    const outOfSpec: [string, (method: string, answer: Record<string, unknown>) => Record<string, unknown>][] = [
      ["status without err", withTx((tx) => void delete tx.meta.err)],
      ["token balances without owner", withTx((tx) => tx.meta.postTokenBalances.forEach((b) => delete b.owner))],
      ["neither result nor error", (method, answer) => (method === "getTransaction" ? { jsonrpc: "2.0", id: answer.id } : answer)],
    ];
    for (const [what, filter] of outOfSpec) {
      rpc.setAnswerFilter(filter);
      try {
        expect([what, await codeOf(confirmCheckout(s.deps, s.productId, checkoutId))]).toEqual([what, "CHAIN_UNAVAILABLE"]);
      } finally {
        rpc.setAnswerFilter(null);
      }
    }
    expect(await confirmCheckout(s.deps, s.productId, checkoutId)).toMatchObject({ status: "completed", txHash });
    // A failure reported only in status.Err is a failure (judged for good: another checkout's payment).
    const other = await s.payItself();
    rpc.setAnswerFilter(withTx((tx) => ((tx.meta.err = null), (tx.meta.status = { Err: { InstructionError: [0, { Custom: 1 }] } }))));
    try {
      expect(await reasonOf(confirmCheckout(s.deps, s.productId, other.checkoutId))).toBe("PAYMENT_MISMATCH:failed");
    } finally {
      rpc.setAnswerFilter(null);
    }
  });

  test("a server clock minutes behind the chain's: a payment the checkout let the buyer send counts, judged on the chain's clock", async () => {
    const s = await setup("devnet");
    s.clock.set(Date.now() - 20 * 60_000); // a paused VM, resumed and not yet corrected
    const { checkoutId, txHash } = await s.payItself(); // its block is stamped 20 minutes after expiresAt
    expect(await confirmCheckout(s.deps, s.productId, checkoutId)).toMatchObject({ status: "completed", txHash });
    expect(await s.hasAccess()).toBe(true);
  });

  test("a payment landing after the checkout's expiry on the chain's clock is refused, whatever this server's clock says", async () => {
    const s = await setup("devnet");
    const checkout = await startCheckout(s.deps, s.productId, s.wallet);
    rpc.setBlockTimeOffset(CHECKOUT_TTL_MS + 60_000); // the chain's clock moves on; this server's does not
    try {
      const signed = signCheckout(checkout.transaction, s.buyer);
      await s.deps.ledger.submit(Buffer.from(signed, "base64"));
      expect(await codeOf(confirmCheckout(s.deps, s.productId, checkout.checkoutId, signatureOf(signed)))).toBe("INVALID_STATE");
    } finally {
      rpc.setBlockTimeOffset(0);
    }
    expect(await s.hasAccess()).toBe(false);
  });

  test("a node that cannot tell the chain's time when the checkout opens: it is judged on this server's clock, as before", async () => {
    const s = await setup("devnet");
    s.clock.set(Date.now() - 20 * 60_000);
    rpc.setBlockTimeUnknown(true);
    let checkout: Awaited<ReturnType<typeof startCheckout>>;
    try {
      checkout = await startCheckout(s.deps, s.productId, s.wallet);
    } finally {
      rpc.setBlockTimeUnknown(false);
    }
    const signed = signCheckout(checkout.transaction, s.buyer);
    await s.deps.ledger.submit(Buffer.from(signed, "base64"));
    expect(await codeOf(confirmCheckout(s.deps, s.productId, checkout.checkoutId, signatureOf(signed)))).toBe("INVALID_STATE");
  });

  test("a node slow to tell the chain's time: the checkout opens after 2 s without it, judged on this server's clock", async () => {
    const s = await setup("devnet");
    s.clock.set(Date.now() - 20 * 60_000);
    rpc.setSlowMethod({ method: "getBlockTime", ms: 10_000 }); // under the ledger's own 15-s limit on a call
    let checkout: Awaited<ReturnType<typeof startCheckout>>;
    const started = performance.now();
    try {
      checkout = await startCheckout(s.deps, s.productId, s.wallet);
    } finally {
      rpc.setSlowMethod(null);
    }
    expect(performance.now() - started).toBeLessThan(8_000); // not the node's 10 s
    const signed = signCheckout(checkout.transaction, s.buyer);
    await s.deps.ledger.submit(Buffer.from(signed, "base64"));
    // Its block is stamped 20 minutes after the expiry on this server's clock, the only one the checkout has.
    expect(await codeOf(confirmCheckout(s.deps, s.productId, checkout.checkoutId, signatureOf(signed)))).toBe("INVALID_STATE");
  });

  test("a node whose latest block lagged when the checkout opened: a payment this server let the buyer send still counts", async () => {
    const s = await setup("devnet");
    rpc.setAnswerFilter((method, answer) => (method === "getBlockTime" ? { ...answer, result: (answer.result as number) - 300 } : answer));
    let opened: Awaited<ReturnType<typeof startCheckout>>;
    try {
      opened = await startCheckout(s.deps, s.productId, s.wallet); // the chain's time read 5 minutes old
    } finally {
      rpc.setAnswerFilter(null);
    }
    // 12 minutes on, on both clocks: this server still hands out a transaction (3 minutes left by it).
    s.clock.advance(12 * 60_000);
    rpc.setBlockTimeOffset(12 * 60_000);
    try {
      const again = await startCheckout(s.deps, s.productId, s.wallet, opened.checkoutId);
      const signed = signCheckout(again.transaction, s.buyer);
      await s.deps.ledger.submit(Buffer.from(signed, "base64"));
      expect(await confirmCheckout(s.deps, s.productId, opened.checkoutId, signatureOf(signed))).toMatchObject({ status: "completed" });
    } finally {
      rpc.setBlockTimeOffset(0);
    }
    expect(await s.hasAccess()).toBe(true);
  });

  test("a node that fails to tell the chain's time (Block not available): the checkout opens all the same, judged on this server's clock", async () => {
    const s = await setup("devnet");
    rpc.setAnswerFilter((method, answer) => (method === "getBlockTime" ? { jsonrpc: "2.0", id: answer.id, error: { code: -32004, message: "Block not available for slot" } } : answer));
    let checkoutId: string;
    try {
      ({ checkoutId } = await s.payItself());
    } finally {
      rpc.setAnswerFilter(null);
    }
    expect(await confirmCheckout(s.deps, s.productId, checkoutId)).toMatchObject({ status: "completed" });
    expect(await s.hasAccess()).toBe(true);
  });

  test("devnet: a buyer with the price in USDC but no SOL for the fee is told so (details.reason fee), as on localnet", async () => {
    const s = await setup("devnet");
    const broke = Keypair.generate();
    const wallet = broke.publicKey.toBase58();
    rpc.mintTokens(USDC_MINTS.devnet, wallet, 10n * USDC); // no lamports at all
    const checkout = await startCheckout(s.deps, s.productId, wallet);
    const refused = await submitCheckout(s.deps, s.productId, checkout.checkoutId, signCheckout(checkout.transaction, broke)).catch((err: unknown) => err);
    expect(refused).toBeInstanceOf(AppError);
    expect([(refused as AppError).code, (refused as AppError).extra.details, (refused as AppError).message]).toEqual([
      "INSUFFICIENT_FUNDS",
      { reason: "fee", currency: "SOL", held: "0" },
      "the wallet holds 0 SOL, too little for the network fee and any account this payment opens",
    ]);
  });

  test("devnet: a kept payment is judged by the chain's height: a wall clock stepped forward and a node behind do not let it go", async () => {
    const s = await setup("devnet");
    const checkout = await startCheckout(s.deps, s.productId, s.wallet);
    const signed = signCheckout(checkout.transaction, s.buyer);
    const tx = parseTransaction(Buffer.from(signed, "base64"));
    // Kept, not sent yet (a process stopped between keeping and sending it, or its send still on the way).
    const kept = { signature: tx.signature, blockhash: tx.recentBlockhash, validHeight: await landingHeightLimit(s.deps) };
    expect(await paygateStore.recordSubmission(s.deps.db, checkout.checkoutId, kept, s.clock.now(), 8)).toBe(true);
    s.clock.advance(3_600_000); // the wall clock stepped forward an hour
    // A node behind: the fresh blockhash is unknown to it.
    rpc.setAnswerFilter((method, answer) => (method === "isBlockhashValid" ? { ...answer, result: { ...(answer.result as object), value: false } } : answer));
    try {
      expect(await earlierPurchaseOf(s.deps, s.productId, s.wallet)).toMatchObject({ status: "pending", checkoutId: checkout.checkoutId });
    } finally {
      rpc.setAnswerFilter(null);
    }
    // The chain past its landing limit: it can never land, and no longer holds a new payment back.
    rpc.expireBlockhash();
    rpc.expireBlockhash();
    expect(await earlierPurchaseOf(s.deps, s.productId, s.wallet)).toBeNull();
    expect(await paygateStore.listSubmissions(s.deps.db, checkout.checkoutId)).toEqual([]);
    expect(await reasonOf(s.deps.ledger.submit(Buffer.from(signed, "base64")))).toMatch(/^TRANSACTION_REJECTED:blockhash/);
  });

  test("devnet: /submit records the landing limit of the payment it keeps: a stepped clock and a node behind do not let it go", async () => {
    const s = await setup("devnet");
    const checkout = await startCheckout(s.deps, s.productId, s.wallet);
    // Kept by submitCheckout itself, then the process stopped before sending it.
    const stopped = { ...s.deps, ledger: { ...s.deps.ledger, submit: async () => Promise.reject(new Error("the process stopped here")) } } as typeof s.deps;
    await submitCheckout(stopped, s.productId, checkout.checkoutId, signCheckout(checkout.transaction, s.buyer)).catch(() => undefined);
    const [kept] = await paygateStore.listSubmissions(s.deps.db, checkout.checkoutId);
    expect(kept?.validHeight).toBeGreaterThan((await s.deps.ledger.latestBlockhash()).lastValidBlockHeight); // its limit, with the margin
    s.clock.advance(3_600_000);
    rpc.setAnswerFilter((method, answer) => (method === "isBlockhashValid" ? { ...answer, result: { ...(answer.result as object), value: false } } : answer));
    try {
      expect(await earlierPurchaseOf(s.deps, s.productId, s.wallet)).toMatchObject({ status: "pending", checkoutId: checkout.checkoutId });
    } finally {
      rpc.setAnswerFilter(null);
    }
  });

  test("devnet: a confirmed payment completes the checkout at once", async () => {
    const s = await setup("devnet");
    const { checkoutId, txHash } = await s.payItself();
    expect(await confirmCheckout(s.deps, s.productId, checkoutId)).toMatchObject({ status: "completed", txHash });
    expect(await s.hasAccess()).toBe(true);
  });

  test("devnet: strangers' transactions carrying the reference after the payment do not hide it", async () => {
    const s = await setup("devnet");
    const { checkoutId, txHash } = await s.payItself();
    await s.strangerCarriesReference(checkoutId, 12); // more than the newest 10 an earlier version read
    rpc.calls.length = 0;
    expect(await confirmCheckout(s.deps, s.productId, checkoutId)).toMatchObject({ status: "completed", txHash });
    // One listing of the reference, one transaction read: the oldest, the payment.
    expect(rpc.calls.filter((m) => m === "getSignaturesForAddress" || m === "getTransaction")).toEqual(["getSignaturesForAddress", "getTransaction"]);
    expect(await s.hasAccess()).toBe(true);
  });

  test("mainnet: a confirmed payment stays pending until it is finalized, then completes", async () => {
    const s = await setup("mainnet");
    const { checkoutId, txHash } = await s.payItself();
    expect(await confirmCheckout(s.deps, s.productId, checkoutId)).toEqual({ status: "pending" });
    expect(await s.hasAccess()).toBe(false);
    rpc.advanceSlots(FINALITY_SLOTS - 2);
    expect(await confirmCheckout(s.deps, s.productId, checkoutId)).toEqual({ status: "pending" });
    rpc.advanceSlots(2);
    expect(await confirmCheckout(s.deps, s.productId, checkoutId)).toMatchObject({ status: "completed", txHash });
    expect(await s.hasAccess()).toBe(true);
  });

  test("mainnet: /public/verify of a payment confirmed but not finalized records no purchase until it is finalized", async () => {
    const s = await setup("mainnet");
    const { txHash } = await s.payItself();
    // As GET /public/verify/:txHash asks: the transaction read by its signature, a purchase recorded if it pays a checkout.
    const verify = () => verifyTransaction(s.deps, s.owner, txHash, (tx) => recordPaymentOf(s.deps, s.owner, tx));
    expect(await verify()).toMatchObject({ valid: false });
    expect(await s.hasAccess()).toBe(false);
    rpc.advanceSlots(FINALITY_SLOTS);
    expect(await verify()).toMatchObject({ valid: true, txHash, productId: s.productId });
    expect(await s.hasAccess()).toBe(true);
  });

  test("mainnet: the watcher, too, completes a checkout only once its payment is finalized", async () => {
    const s = await setup("mainnet");
    const { checkoutId } = await s.payItself();
    const watcher = createCheckoutWatcher(s.deps);
    await watcher.runOnce();
    expect(await s.hasAccess()).toBe(false);
    rpc.advanceSlots(FINALITY_SLOTS);
    await watcher.runOnce();
    expect(await s.hasAccess()).toBe(true);
    expect(await confirmCheckout(s.deps, s.productId, checkoutId)).toMatchObject({ status: "completed" });
  });
});
