// Checkout, purchases and feature tokens in-process on the embedded ledger, with the manual clock for what
// only time shows: expiry, late confirmation, the watcher, access extension, token expiry and daily stats.
import { afterAll, describe, expect, test } from "bun:test";
import { rmSync } from "node:fs";
import { join } from "node:path";
import { Keypair, PublicKey, SystemProgram, VersionedTransaction, type TransactionInstruction } from "@solana/web3.js";
import { createAssociatedTokenAccountIdempotentInstruction, createTransferCheckedInstruction, createTransferInstruction } from "@solana/spl-token";
import { associatedTokenAddress, compileTransaction } from "../ledger/transactions.ts";
import { testDeps } from "../../test/helpers/deps.ts";
import { tempDir } from "../../test/helpers/server.ts";
import { ISO_MS } from "../../test/helpers/time.ts";
import { paymentVariant, signCheckout, signatureOf } from "../../test/helpers/checkout.ts";
import { codeOf, reasonOf } from "../../test/helpers/errors.ts";
import { AppError } from "../errors.ts";
import { encodeBase58 } from "../lib/encoding.ts";
import { randomBytes } from "node:crypto";
import type { Deps } from "../deps.ts";
import {
  CHECKOUT_TTL_MS,
  EXPIRY_GRACE_MS,
  MAX_SUBMISSIONS,
  REFERENCE_PAGE,
  SEND_MARGIN_MS,
  SUBMIT_LEASE_MS,
  REFERENCE_PAGES,
  REFERENCE_READS,
  checkLandedPayment,
  confirmCheckout,
  createCheckoutWatcher,
  WATCH_BATCH,
  recordPaymentOf,
  startCheckout,
  submitCheckout,
} from "./checkout.ts";
import { archiveProduct, createProduct, updateProduct, type ProductInput } from "./products.ts";
import { checkAccess, listPurchases, ownerStatsWithDaily, verifyTransaction } from "./purchases.ts";
import { listFeatureTokens, revokeFeatureToken, verifyFeatureToken } from "./tokens.ts";
import { revokeAnswer } from "./routes.ts";
import { eventBody } from "../webhooks/outbox.ts";
import { EXPIRED_CHECKOUT_KEPT_MS, purgeCheckouts } from "./purge.ts";
import * as paygateStore from "./store.ts";
import { STEP_ROWS } from "../db/steps.ts";
import { PAGE_MAX_CHARS } from "../lib/fit.ts";

const SOL = 1_000_000_000n;
const USDC = 1_000_000n;
const DAY_MS = 86_400_000;

const opened: { close(): void }[] = [];

async function setup(product: ProductInput = { title: "Pro", type: "feature_unlock", price: "2", featureIds: ["export"], accessDays: 30 }, dbPath?: string) {
  const { deps, clock, db } = await testDeps({}, dbPath === undefined ? {} : { dbPath });
  opened.push(db);
  const owner = Keypair.generate().publicKey.toBase58();
  const created = await createProduct(deps, owner, product);
  const buyer = Keypair.generate();
  await deps.ledger.airdrop(buyer.publicKey.toBase58(), { sol: SOL, usdc: 50n * USDC });
  return { deps, clock, owner, productId: created.productId, buyer, wallet: buyer.publicKey.toBase58() };
}

async function pay(deps: Deps, productId: string, buyer: Keypair) {
  const checkout = await startCheckout(deps, productId, buyer.publicKey.toBase58());
  const signed = signCheckout(checkout.transaction, buyer);
  await deps.ledger.submit(Buffer.from(signed, "base64"));
  return { checkout, signed, txHash: signatureOf(signed) };
}


/** Buys `productId` for `buyer` through the checkout, returning its feature token; and a token's expiry as verified. */
function tokenBuyer(deps: Deps, owner: string, productId: string, buyer: Keypair) {
  return {
    buy: async () => {
      const paid = await pay(deps, productId, buyer);
      const done = await confirmCheckout(deps, productId, paid.checkout.checkoutId);
      if (done.status !== "completed" || done.accessToken === undefined) throw new Error("a feature unlock issues a token");
      return done.accessToken;
    },
    expiryOf: async (token: string) => ((await verifyFeatureToken(deps, owner, token)) as { expiresAt?: string }).expiresAt,
  };
}

/** The bodies of the owner's outbox events of `type`, oldest first, as they would be delivered. */
async function eventsOf(deps: Deps, owner: string, type: string): Promise<Record<string, unknown>[]> {
  const rows = deps.db.sqlite.query("SELECT id FROM outbox_events WHERE target_id = ? AND type = ? ORDER BY created_at, id").all(owner, type) as { id: string }[];
  return Promise.all(
    rows.map(async (row) => {
      const body = JSON.parse((await eventBody(deps, row.id))!) as Record<string, unknown>;
      expect(body.id).toBe(row.id); // the body's id is the event's (webhook-id)
      return body;
    }),
  );
}

/** USDC's mint and decimals on the test's ledger. */
async function usdcToken(deps: Deps): Promise<{ mint: string; decimals: number }> {
  const usdc = (await deps.ledger.tokens()).find((t) => t.key === "usdc")!;
  return { mint: usdc.mint!, decimals: usdc.decimals };
}

/** A TransferChecked of `amount` base units of `token` from the buyer's token account to payTo's, with `references` on it. */
function transferToPayTo(buyer: Keypair, payTo: string, token: { mint: string; decimals: number }, amount: bigint, references: string[]): TransactionInstruction {
  const mint = new PublicKey(token.mint);
  const transfer = createTransferCheckedInstruction(
    new PublicKey(associatedTokenAddress(buyer.publicKey.toBase58(), token.mint)),
    mint,
    new PublicKey(associatedTokenAddress(payTo, token.mint)),
    buyer.publicKey,
    amount,
    token.decimals,
  );
  for (const reference of references) transfer.keys.push({ pubkey: new PublicKey(reference), isSigner: false, isWritable: false });
  return transfer;
}

/** payTo's token account for `mint`, created if missing, paid by the buyer (as the checkout's transaction does). */
const createPayToAccount = (buyer: Keypair, payTo: string, mint: string) =>
  createAssociatedTokenAccountIdempotentInstruction(buyer.publicKey, new PublicKey(associatedTokenAddress(payTo, mint)), new PublicKey(payTo), new PublicKey(mint));

/** The buyer's own transaction of `instructions` on a fresh blockhash, signed, base64. */
async function buyerTransaction(deps: Deps, buyer: Keypair, instructions: TransactionInstruction[]): Promise<string> {
  const wire = compileTransaction(instructions, buyer.publicKey.toBase58(), (await deps.ledger.latestBlockhash()).blockhash);
  return signCheckout(Buffer.from(wire).toString("base64"), buyer);
}

/** Step 4 never ran: no purchase, no token, no payment event, and the checkout still open. */
/**
 * A cluster where a payment passes its trial and then fails when executed (another payment of the wallet
 * landed in between): the embedded ledger, which tries and executes a checkout's payment in one write, never
 * does that by itself.
 */
const executedAsSent = (deps: Deps): Deps => ({ ...deps, ledger: { ...deps.ledger, submit: (wire, options) => deps.ledger.submit(wire, { ...options, ownTransfer: false }) } });

async function expectNothingBought(deps: Deps, owner: string, checkoutId: string) {
  expect((await listPurchases(deps, owner, {})).total).toBe(0);
  expect((await listFeatureTokens(deps, owner, {})).total).toBe(0);
  expect([...(await eventsOf(deps, owner, "payment.completed")), ...(await eventsOf(deps, owner, "feature.unlocked"))]).toEqual([]);
  expect(await paygateStore.findCheckout(deps.db, checkoutId)).toMatchObject({ status: "open", purchaseId: null });
}


describe("checkout", () => {
  test("a payment the buyer sent itself is held to the byte-level rules too: a plain Transfer is not a checkout payment", async () => {
    const { deps, owner, productId, buyer, wallet } = await setup();
    const checkout = await startCheckout(deps, productId, wallet);
    const { mint } = (await deps.ledger.tokens()).find((t) => t.key === "usdc")!;
    // Right amount, right recipient account, the reference on the instruction — but Transfer, not TransferChecked.
    const transfer = createTransferInstruction(
      new PublicKey(associatedTokenAddress(wallet, mint!)),
      new PublicKey(associatedTokenAddress(owner, mint!)),
      buyer.publicKey,
      2n * USDC,
    );
    transfer.keys.push({ pubkey: new PublicKey(checkout.reference), isSigner: false, isWritable: false });
    const create = createAssociatedTokenAccountIdempotentInstruction(buyer.publicKey, new PublicKey(associatedTokenAddress(owner, mint!)), new PublicKey(owner), new PublicKey(mint!));
    const wire = compileTransaction([create, transfer], wallet, (await deps.ledger.latestBlockhash()).blockhash);
    const tx = VersionedTransaction.deserialize(wire);
    tx.sign([buyer]);
    await deps.ledger.submit(tx.serialize());
    expect(await reasonOf(confirmCheckout(deps, productId, checkout.checkoutId))).toBe("PAYMENT_MISMATCH:recipient");
    expect((await listPurchases(deps, owner, {})).total).toBe(0);
  });

  test("the transaction: buyer pays fee and rent, creates payTo's token account once, carries the reference", async () => {
    const { deps, productId, buyer, owner } = await setup();
    const first = await pay(deps, productId, buyer);
    expect(first.checkout).toMatchObject({ amount: "2", currency: "USDC", payTo: owner });
    const result = await confirmCheckout(deps, productId, first.checkout.checkoutId);
    expect(result).toMatchObject({ status: "completed", txHash: first.txHash });
    expect((await deps.ledger.getBalances(owner)).usdc).toBe(2n * USDC);
    expect((await deps.ledger.getBalances(buyer.publicKey.toBase58())).sol).toBe(SOL - 5000n - 2_039_280n); // fee and the new account's rent
    const tx = VersionedTransaction.deserialize(Buffer.from(first.checkout.transaction, "base64"));
    const keys = tx.message.staticAccountKeys.map((k) => k.toBase58());
    expect(keys[0]).toBe(buyer.publicKey.toBase58());
    expect(tx.message.header.numRequiredSignatures).toBe(1);
    const reference = keys.indexOf(first.checkout.reference);
    const transfer = tx.message.compiledInstructions.at(-1)!;
    expect(transfer.accountKeyIndexes.slice(4)).toEqual([reference]);
    expect([tx.message.isAccountSigner(reference), tx.message.isAccountWritable(reference)]).toEqual([false, false]);
    // payTo's token account now exists: the next transaction has no create instruction and is smaller.
    const second = await startCheckout(deps, productId, buyer.publicKey.toBase58());
    expect(Buffer.from(second.transaction, "base64").length).toBeLessThan(Buffer.from(first.checkout.transaction, "base64").length);
    expect(second.reference).not.toBe(first.checkout.reference);
  });

  test("lamports sent to payTo's token account address before it exists: the checkout still creates it, and is paid", async () => {
    const { deps, productId, buyer, owner } = await setup();
    const griefer = Keypair.generate();
    await deps.ledger.airdrop(griefer.publicKey.toBase58(), { sol: SOL });
    const usdcMint = (await deps.ledger.tokens()).find((t) => t.key === "usdc")!.mint!;
    const ata = associatedTokenAddress(owner, usdcMint);
    const grief = compileTransaction([SystemProgram.transfer({ fromPubkey: griefer.publicKey, toPubkey: new PublicKey(ata), lamports: 890_880 })], griefer.publicKey.toBase58(), (await deps.ledger.latestBlockhash()).blockhash);
    await deps.ledger.submit(Buffer.from(signCheckout(Buffer.from(grief).toString("base64"), griefer), "base64"));
    const paid = await pay(deps, productId, buyer);
    expect(await confirmCheckout(deps, productId, paid.checkout.checkoutId)).toMatchObject({ status: "completed", txHash: paid.txHash });
    expect((await deps.ledger.getBalances(owner)).usdc).toBe(2n * USDC);
  });

  test("an expired checkout: no refresh, no submit, and confirm is INVALID_STATE", async () => {
    const { deps, clock, productId, buyer, wallet } = await setup();
    const checkout = await startCheckout(deps, productId, wallet);
    const signed = signCheckout(checkout.transaction, buyer);
    clock.advance(CHECKOUT_TTL_MS + 1);
    expect(await codeOf(startCheckout(deps, productId, wallet, checkout.checkoutId))).toBe("INVALID_STATE");
    expect(await codeOf(submitCheckout(deps, productId, checkout.checkoutId, signed))).toBe("INVALID_STATE");
    expect(await codeOf(confirmCheckout(deps, productId, checkout.checkoutId))).toBe("INVALID_STATE");
    expect((await deps.ledger.getBalances(wallet)).usdc).toBe(50n * USDC); // nothing was sent
  });

  test("in the last SEND_MARGIN_MS no transaction is handed out or sent (it could land late), but one already on chain is confirmed", async () => {
    const { deps, clock, productId, buyer, wallet } = await setup();
    const checkout = await startCheckout(deps, productId, wallet);
    clock.advance(CHECKOUT_TTL_MS - SEND_MARGIN_MS + 1);
    expect(await reasonOf(startCheckout(deps, productId, wallet, checkout.checkoutId))).toBe("INVALID_STATE:");
    const { blockhash } = await deps.ledger.latestBlockhash();
    expect(await reasonOf(submitCheckout(deps, productId, checkout.checkoutId, paymentVariant(checkout.transaction, { payer: buyer, blockhash })))).toBe("INVALID_STATE:");
    expect((await deps.ledger.getBalances(wallet)).usdc).toBe(50n * USDC); // nothing sent
    // Sent by the buyer itself in time, and posted now: confirmed, not refused.
    const selfSent = await startCheckout(deps, productId, wallet);
    const signed = signCheckout(selfSent.transaction, buyer);
    await deps.ledger.submit(Buffer.from(signed, "base64"));
    clock.advance(CHECKOUT_TTL_MS - SEND_MARGIN_MS + 1);
    expect(await submitCheckout(deps, productId, selfSent.checkoutId, signed)).toMatchObject({ status: "completed", txHash: signatureOf(signed) });
  });

  test("a payment that landed in time is honoured however late it is confirmed; one that landed late is not", async () => {
    const { deps, clock, productId, buyer, wallet } = await setup();
    const inTime = await pay(deps, productId, buyer);
    const late = await startCheckout(deps, productId, wallet);
    clock.advance(CHECKOUT_TTL_MS + 10 * 60_000);
    expect(await confirmCheckout(deps, productId, inTime.checkout.checkoutId)).toMatchObject({ status: "completed", txHash: inTime.txHash });
    const { blockhash } = await deps.ledger.latestBlockhash();
    await deps.ledger.submit(Buffer.from(paymentVariant(late.transaction, { payer: buyer, blockhash }), "base64"));
    expect(await codeOf(confirmCheckout(deps, productId, late.checkoutId))).toBe("INVALID_STATE");
  });

  test("refusals found on chain: a failed payment, a stranger paying, too little", async () => {
    const { deps, productId, buyer, wallet } = await setup();
    const stranger = Keypair.generate();
    await deps.ledger.airdrop(stranger.publicKey.toBase58(), { sol: SOL, usdc: 50n * USDC });

    const failed = await startCheckout(deps, productId, wallet);
    const overdraw = paymentVariant(failed.transaction, { payer: buyer, amount: 500n * USDC });
    expect(await reasonOf(deps.ledger.submit(Buffer.from(overdraw, "base64")))).toBe("TRANSACTION_REJECTED:execution_failed");
    expect(await reasonOf(confirmCheckout(deps, productId, failed.checkoutId))).toBe("PAYMENT_MISMATCH:failed");
    expect(await verifyTransaction(deps, Keypair.generate().publicKey.toBase58(), signatureOf(overdraw))).toMatchObject({ valid: false, error: "transaction failed" });
    // The checkout stays open: a good payment after a failed one completes it.
    const retry = signCheckout((await startCheckout(deps, productId, wallet, failed.checkoutId)).transaction, buyer);
    await deps.ledger.submit(Buffer.from(retry, "base64"));
    expect(await confirmCheckout(deps, productId, failed.checkoutId)).toMatchObject({ status: "completed", txHash: signatureOf(retry) });

    const byStranger = await startCheckout(deps, productId, wallet);
    await deps.ledger.submit(Buffer.from(paymentVariant(byStranger.transaction, { payer: stranger }), "base64"));
    expect(await reasonOf(confirmCheckout(deps, productId, byStranger.checkoutId))).toBe("PAYMENT_MISMATCH:payer");

    const tooLittle = await startCheckout(deps, productId, wallet);
    const short = paymentVariant(tooLittle.transaction, { payer: buyer, amount: 2n * USDC - 1n });
    expect(await reasonOf(submitCheckout(deps, productId, tooLittle.checkoutId, short))).toBe("PAYMENT_MISMATCH:amount");
    await deps.ledger.submit(Buffer.from(short, "base64"));
    expect(await reasonOf(confirmCheckout(deps, productId, tooLittle.checkoutId))).toBe("PAYMENT_MISMATCH:amount");
  });

  // paygate.md "Checkout" step 3: exactly one TransferChecked to payTo's associated token account, of the
  // product's mint, carrying the reference. /submit refuses before sending; a payment the buyer sent
  // itself is refused when confirmed.
  test("a payment in another mint than the product's is PAYMENT_MISMATCH (mint), and buys nothing", async () => {
    const { deps, owner, productId, buyer, wallet } = await setup(); // priced in USDC
    const other = (await deps.ledger.tokens()).find((t) => t.kind === "spl" && t.key !== "usdc")!;
    const whole = 10n ** BigInt(other.decimals);
    await deps.ledger.airdrop(wallet, { token: 10n * whole }); // the service token
    const checkout = await startCheckout(deps, productId, wallet);
    // As many whole tokens as the price, to payTo's token account of that mint, with the reference.
    const token = { mint: other.mint!, decimals: other.decimals };
    const signed = await buyerTransaction(deps, buyer, [createPayToAccount(buyer, owner, token.mint), transferToPayTo(buyer, owner, token, 2n * whole, [checkout.reference])]);
    expect(await reasonOf(submitCheckout(deps, productId, checkout.checkoutId, signed))).toBe("PAYMENT_MISMATCH:mint");
    expect((await deps.ledger.getBalances(wallet))[other.key]).toBe(10n * whole); // refused before it was sent
    await deps.ledger.submit(Buffer.from(signed, "base64")); // the buyer sends it itself
    expect((await deps.ledger.getBalances(owner))[other.key]).toBe(2n * whole);
    expect(await reasonOf(confirmCheckout(deps, productId, checkout.checkoutId))).toBe("PAYMENT_MISMATCH:mint");
    expect(await reasonOf(confirmCheckout(deps, productId, checkout.checkoutId, signatureOf(signed)))).toBe("PAYMENT_MISMATCH:mint");
    await expectNothingBought(deps, owner, checkout.checkoutId);
  });

  test("a right transfer without the reference, named to confirm by its txHash, is PAYMENT_MISMATCH (reference), and buys nothing", async () => {
    const { deps, owner, productId, buyer, wallet } = await setup();
    const token = await usdcToken(deps);
    const checkout = await startCheckout(deps, productId, wallet);
    const signed = await buyerTransaction(deps, buyer, [createPayToAccount(buyer, owner, token.mint), transferToPayTo(buyer, owner, token, 2n * USDC, [])]);
    expect(await reasonOf(submitCheckout(deps, productId, checkout.checkoutId, signed))).toBe("PAYMENT_MISMATCH:reference");
    expect((await deps.ledger.getBalances(wallet)).usdc).toBe(50n * USDC); // refused before it was sent
    await deps.ledger.submit(Buffer.from(signed, "base64")); // the buyer sends it itself
    expect((await deps.ledger.getBalances(owner)).usdc).toBe(2n * USDC);
    // Not found by the reference; named by its txHash, it is read and refused.
    expect(await confirmCheckout(deps, productId, checkout.checkoutId)).toEqual({ status: "pending" });
    expect(await reasonOf(confirmCheckout(deps, productId, checkout.checkoutId, signatureOf(signed)))).toBe("PAYMENT_MISMATCH:reference");
    await expectNothingBought(deps, owner, checkout.checkoutId);
  });

  test("two TransferChecked to payTo in one transaction, each a full payment with the reference, is PAYMENT_MISMATCH (recipient), and buys nothing", async () => {
    const { deps, owner, productId, buyer, wallet } = await setup();
    const token = await usdcToken(deps);
    const checkout = await startCheckout(deps, productId, wallet);
    // The checkout's own transaction, with another transfer of the price to payTo put before it.
    const signed = paymentVariant(checkout.transaction, {
      payer: buyer,
      prepend: [createPayToAccount(buyer, owner, token.mint), transferToPayTo(buyer, owner, token, 2n * USDC, [checkout.reference])],
    });
    expect(VersionedTransaction.deserialize(Buffer.from(signed, "base64")).message.compiledInstructions.filter((ix) => ix.data[0] === 12)).toHaveLength(2);
    expect(await reasonOf(submitCheckout(deps, productId, checkout.checkoutId, signed))).toBe("PAYMENT_MISMATCH:recipient");
    expect((await deps.ledger.getBalances(wallet)).usdc).toBe(50n * USDC); // refused before it was sent
    await deps.ledger.submit(Buffer.from(signed, "base64")); // the buyer sends it itself
    expect((await deps.ledger.getBalances(owner)).usdc).toBe(4n * USDC);
    expect(await reasonOf(confirmCheckout(deps, productId, checkout.checkoutId))).toBe("PAYMENT_MISMATCH:recipient");
    expect(await reasonOf(confirmCheckout(deps, productId, checkout.checkoutId, signatureOf(signed)))).toBe("PAYMENT_MISMATCH:recipient");
    await expectNothingBought(deps, owner, checkout.checkoutId);
  });

  test("a tip in another token to payTo beside the payment, as a plain Transfer or a TransferChecked, is not a second payment: sent, confirmed, bought once", async () => {
    for (const tip of ["Transfer", "TransferChecked"] as const) {
      const { deps, owner, productId, buyer, wallet } = await setup();
      await deps.ledger.airdrop(wallet, { token: 50n * USDC });
      const service = (await deps.ledger.tokens()).find((t) => t.kind === "spl" && t.key !== "usdc")!;
      const token = { mint: service.mint!, decimals: service.decimals };
      const checkout = await startCheckout(deps, productId, wallet);
      const tipped =
        tip === "TransferChecked"
          ? transferToPayTo(buyer, owner, token, 1n, [])
          : createTransferInstruction(new PublicKey(associatedTokenAddress(wallet, token.mint)), new PublicKey(associatedTokenAddress(owner, token.mint)), buyer.publicKey, 1n);
      const signed = paymentVariant(checkout.transaction, { payer: buyer, prepend: [createPayToAccount(buyer, owner, token.mint), tipped] });
      expect({ tip, answer: await submitCheckout(deps, productId, checkout.checkoutId, signed) }).toMatchObject({ tip, answer: { status: "completed", txHash: signatureOf(signed) } });
      expect((await deps.ledger.getBalances(wallet)).usdc).toBe(48n * USDC);
      expect((await listPurchases(deps, owner, {})).total).toBe(1);
    }
    // Only a tip, no payment in the checkout's token: refused for its mint, before anything is sent.
    const { deps, owner, productId, buyer, wallet } = await setup();
    await deps.ledger.airdrop(wallet, { token: 50n * USDC });
    const service = (await deps.ledger.tokens()).find((t) => t.kind === "spl" && t.key !== "usdc")!;
    const token = { mint: service.mint!, decimals: service.decimals };
    const checkout = await startCheckout(deps, productId, wallet);
    const signed = await buyerTransaction(deps, buyer, [createPayToAccount(buyer, owner, token.mint), transferToPayTo(buyer, owner, token, 2n * USDC, [checkout.reference])]);
    expect(await reasonOf(submitCheckout(deps, productId, checkout.checkoutId, signed))).toBe("PAYMENT_MISMATCH:mint");
    await deps.ledger.submit(Buffer.from(signed, "base64")); // the buyer sends it itself
    expect(await reasonOf(confirmCheckout(deps, productId, checkout.checkoutId, signatureOf(signed)))).toBe("PAYMENT_MISMATCH:mint");
    await expectNothingBought(deps, owner, checkout.checkoutId);
  });

  describe("strangers' transactions carrying a checkout's reference", () => {
    /** A stranger funded to send `count` small payments that carry the checkout's reference, each its own. */
    async function strangerSends(deps: Deps, transaction: string, count: number, blockhash?: string): Promise<string[]> {
      const stranger = Keypair.generate();
      await deps.ledger.airdrop(stranger.publicKey.toBase58(), { sol: SOL, usdc: USDC });
      const sent: string[] = [];
      for (let i = 1; i <= count; i++) {
        const signed = paymentVariant(transaction, { payer: stranger, amount: BigInt(i), blockhash });
        await deps.ledger.submit(Buffer.from(signed, "base64"));
        sent.push(signatureOf(signed));
      }
      return sent;
    }
    /** The same deps, counting the transactions read from the ledger. */
    function countingReads(deps: Deps): { deps: Deps; reads: string[] } {
      const reads: string[] = [];
      const getTransaction = (signature: string) => {
        reads.push(signature);
        return deps.ledger.getTransaction(signature);
      };
      return { deps: { ...deps, ledger: { ...deps.ledger, getTransaction } }, reads };
    }

    test("many of them after the payment do not hide it: the oldest is read first", async () => {
      const { deps, productId, buyer } = await setup();
      const paid = await pay(deps, productId, buyer);
      await strangerSends(deps, paid.checkout.transaction, 25); // more than a page of the old look (10)
      const counted = countingReads(deps);
      expect(await confirmCheckout(counted.deps, productId, paid.checkout.checkoutId)).toMatchObject({ status: "completed", txHash: paid.txHash });
      expect(counted.reads).toEqual([paid.txHash]);
    });

    test("before the payment: each look reads a bounded number, none twice, and the checkout stays open until all are read", async () => {
      const { deps, clock, owner, productId, buyer, wallet } = await setup();
      const checkout = await startCheckout(deps, productId, wallet);
      const strangers = await strangerSends(deps, checkout.transaction, REFERENCE_READS + 5);
      const signed = signCheckout(checkout.transaction, buyer);
      await deps.ledger.submit(Buffer.from(signed, "base64"));
      const counted = countingReads(deps);
      // The first look reads the oldest REFERENCE_READS, all refused: the rest may hold the payment.
      expect(await confirmCheckout(counted.deps, productId, checkout.checkoutId)).toEqual({ status: "pending" });
      expect(counted.reads).toEqual(strangers.slice(0, REFERENCE_READS));
      // Long past expiry: the watcher's look reads on from there (it landed in time) and completes it.
      clock.advance(CHECKOUT_TTL_MS + EXPIRY_GRACE_MS + 1);
      expect(await createCheckoutWatcher(counted.deps).runOnce()).toBe(1);
      expect(counted.reads).toEqual([...strangers, signatureOf(signed)]);
      expect((await listPurchases(deps, owner, {})).purchases.map((p) => p.txHash)).toEqual([signatureOf(signed)]);
    });

    test("a payment sent through /submit is read by its signature, however crowded its reference", async () => {
      const { deps, productId, buyer, wallet } = await setup();
      const checkout = await startCheckout(deps, productId, wallet);
      await strangerSends(deps, checkout.transaction, REFERENCE_READS + 5); // before it: the oldest
      const signed = signCheckout(checkout.transaction, buyer);
      const counted = countingReads(deps);
      expect(await submitCheckout(counted.deps, productId, checkout.checkoutId, signed)).toMatchObject({ status: "completed", txHash: signatureOf(signed) });
      expect([...new Set(counted.reads)]).toEqual([signatureOf(signed)]); // no stranger's read (its own: before sending, and after)
    });

    test("a submitted transaction listed but not readable keeps its checkout open; the newest refusal in chain order is reported", async () => {
      const { deps, clock, productId, buyer, wallet } = await setup();
      // Strangers first, then the buyer's own submitted payment, which fails on chain.
      const failing = await startCheckout(deps, productId, wallet);
      await strangerSends(deps, failing.transaction, 3);
      const overdraw = paymentVariant(failing.transaction, { payer: buyer, amount: 500n * USDC });
      // Tried before it is executed: a payment the wallet cannot make is refused, nothing kept or charged.
      const solBefore = (await deps.ledger.getBalances(wallet)).sol;
      expect(await reasonOf(submitCheckout(deps, productId, failing.checkoutId, overdraw))).toBe("INSUFFICIENT_FUNDS:amount"); // it sends more than the wallet holds
      expect(deps.db.sqlite.query("SELECT count(*) AS n FROM checkout_submissions WHERE checkout_id = ?").get(failing.checkoutId)).toEqual({ n: 0 });
      expect((await deps.ledger.getBalances(wallet)).sol).toBe(solBefore);
      // On a cluster it may still pass its trial and fail when executed.
      expect(await reasonOf(submitCheckout(executedAsSent(deps), productId, failing.checkoutId, overdraw))).toBe("TRANSACTION_REJECTED:execution_failed");
      // Sent, landed and failed: kept (it was sent), and judged refused, so it holds nothing back.
      expect(deps.db.sqlite.query("SELECT count(*) AS n FROM checkout_submissions WHERE checkout_id = ?").get(failing.checkoutId)).toEqual({ n: 1 });
      expect(await reasonOf(confirmCheckout(deps, productId, failing.checkoutId))).toBe("PAYMENT_MISMATCH:failed");
      expect(await reasonOf(confirmCheckout(deps, productId, failing.checkoutId))).toBe("PAYMENT_MISMATCH:failed"); // from the kept progress

      // A payment /submit sent whose answer was lost, listed by the node but not readable from it yet.
      const checkout = await startCheckout(deps, productId, wallet);
      const signed = signCheckout(checkout.transaction, buyer);
      let hidden = true;
      const getTransaction: Deps["ledger"]["getTransaction"] = (signature, options) =>
        hidden && signature === signatureOf(signed) ? Promise.resolve(null) : deps.ledger.getTransaction(signature, options);
      const lagging: Deps = { ...deps, ledger: { ...deps.ledger, getTransaction } };
      expect(await codeOf(submitCheckout(lagging, productId, checkout.checkoutId, signed))).toBe("CHAIN_UNAVAILABLE");
      clock.advance(CHECKOUT_TTL_MS + EXPIRY_GRACE_MS + 1);
      expect(await createCheckoutWatcher(lagging).runOnce()).toBe(1); // the failed one only
      const status = (id: string) => (deps.db.sqlite.query("SELECT status FROM checkouts WHERE id = ?").get(id) as { status: string }).status;
      expect([status(failing.checkoutId), status(checkout.checkoutId)]).toEqual(["expired", "open"]); // it may be paid
      hidden = false;
      expect(await confirmCheckout(lagging, productId, checkout.checkoutId)).toMatchObject({ status: "completed", txHash: signatureOf(signed) });
    });

    test("/submit records only transactions the checkout's wallet signed", async () => {
      const { deps, productId, buyer, wallet } = await setup();
      const checkout = await startCheckout(deps, productId, wallet); // anyone may open one for any wallet
      const forged = VersionedTransaction.deserialize(Buffer.from(signCheckout(checkout.transaction, buyer), "base64"));
      forged.signatures[0] = new Uint8Array(64).fill(7);
      const unsigned = checkout.transaction; // all-zero signature
      expect(await reasonOf(submitCheckout(deps, productId, checkout.checkoutId, Buffer.from(forged.serialize()).toString("base64")))).toBe("TRANSACTION_REJECTED:invalid_signature");
      expect(await reasonOf(submitCheckout(deps, productId, checkout.checkoutId, unsigned))).toBe("TRANSACTION_REJECTED:missing_signature");
      expect(deps.db.sqlite.query("SELECT count(*) AS n FROM checkout_submissions").get()).toEqual({ n: 0 });
    });

    test("/submit sends none while an earlier one of the wallet may still land, keeps at most MAX_SUBMISSIONS, and takes the same one again", async () => {
      const { deps, clock, productId, buyer, wallet } = await setup();
      const checkout = await startCheckout(deps, productId, wallet);
      // A send whose fate is unknown (never reaching the chain): while its blockhash lives, no second one.
      const lost: Deps = { ...deps, ledger: { ...deps.ledger, submit: () => Promise.reject(new AppError("CHAIN_UNAVAILABLE", "no answer")) } };
      expect(await codeOf(submitCheckout(lost, productId, checkout.checkoutId, signCheckout(checkout.transaction, buyer)))).toBe("CHAIN_UNAVAILABLE");
      const refreshed = (await startCheckout(deps, productId, wallet, checkout.checkoutId)).transaction;
      const second = await submitCheckout(deps, productId, checkout.checkoutId, paymentVariant(refreshed, { payer: buyer, amount: 2n * USDC + 1n }));
      expect(second).toEqual({ status: "pending" }); // keep confirming: the first one may land
      expect((await deps.ledger.getBalances(wallet)).usdc).toBe(50n * USDC); // nothing sent
      // Another checkout of the same wallet and product meanwhile (a page reloaded): the same answer.
      const reopened = await startCheckout(deps, productId, wallet);
      // Its answer names the checkout to follow: this one will never be paid.
      expect(await submitCheckout(deps, productId, reopened.checkoutId, signCheckout(reopened.transaction, buyer))).toEqual({ status: "pending", checkoutId: checkout.checkoutId });
      expect((await deps.ledger.getBalances(wallet)).usdc).toBe(50n * USDC);
      // A node that calls every blockhash invalid (one a few slots behind): still held for two minutes.
      const behind: Deps = { ...deps, ledger: { ...deps.ledger, blockhashValid: async () => false } };
      expect(await submitCheckout(behind, productId, checkout.checkoutId, paymentVariant(refreshed, { payer: buyer, amount: 2n * USDC + 2n }))).toEqual({ status: "pending" });
      clock.advance(121_000); // its blockhash expired and two minutes passed: it can no longer land, and is forgotten
      // Transactions that land and fail are kept (they were sent); past MAX_SUBMISSIONS, no more.
      const fresh = (await startCheckout(deps, productId, wallet, checkout.checkoutId)).transaction;
      const failing = (i: number) => paymentVariant(fresh, { payer: buyer, amount: 500n * USDC + BigInt(i) });
      const onCluster = executedAsSent(deps);
      for (let i = 0; i < MAX_SUBMISSIONS; i++) expect(await reasonOf(submitCheckout(onCluster, productId, checkout.checkoutId, failing(i)))).toBe("TRANSACTION_REJECTED:execution_failed");
      expect(await reasonOf(submitCheckout(onCluster, productId, checkout.checkoutId, failing(MAX_SUBMISSIONS)))).toBe("INVALID_STATE:");
      expect(await reasonOf(submitCheckout(onCluster, productId, checkout.checkoutId, failing(0)))).not.toBe("INVALID_STATE:"); // the same one again
      expect(deps.db.sqlite.query("SELECT count(*) AS n FROM checkout_submissions").get()).toEqual({ n: MAX_SUBMISSIONS });
    });

    test("the same signed bytes posted again after a lost answer are sent, not held back by themselves", async () => {
      const { deps, productId, buyer, wallet } = await setup();
      const checkout = await startCheckout(deps, productId, wallet);
      const signed = signCheckout(checkout.transaction, buyer);
      const lost: Deps = { ...deps, ledger: { ...deps.ledger, submit: () => Promise.reject(new AppError("CHAIN_UNAVAILABLE", "no answer")) } };
      expect(await codeOf(submitCheckout(lost, productId, checkout.checkoutId, signed))).toBe("CHAIN_UNAVAILABLE");
      expect(await submitCheckout(deps, productId, checkout.checkoutId, signed)).toMatchObject({ status: "completed", txHash: signatureOf(signed) });
      expect((await deps.ledger.getBalances(wallet)).usdc).toBe(48n * USDC);
    });

    /** A first checkout whose /submit sent and landed its payment, but whose answer never came back. */
    async function paidWithAnswerLost() {
      const s = await setup();
      const first = await startCheckout(s.deps, s.productId, s.wallet);
      const signed = signCheckout(first.transaction, s.buyer);
      const losing: Deps = { ...s.deps, ledger: { ...s.deps.ledger, submit: async (...a) => { await s.deps.ledger.submit(...a); throw new AppError("CHAIN_UNAVAILABLE", "no answer"); } } };
      expect(await codeOf(submitCheckout(losing, s.productId, first.checkoutId, signed))).toBe("CHAIN_UNAVAILABLE");
      return { ...s, signed, firstId: first.checkoutId };
    }

    test("a payment /submit sent whose answer a crash cut off is completed on the watcher's first round, however many checkouts are open", async () => {
      const { deps, owner, productId, wallet, signed } = await paidWithAnswerLost();
      for (let i = 0; i < 60; i++) await startCheckout(deps, productId, Keypair.generate().publicKey.toBase58()); // open, unpaid
      // A watcher as after a restart (its turn through the open checkouts starts again), one at a time.
      expect(await createCheckoutWatcher(deps, { batchSize: 1 }).runOnce()).toBe(1);
      expect(await listPurchases(deps, owner, {})).toMatchObject({ total: 1, purchases: [{ txHash: signatureOf(signed), walletAddress: wallet }] });
    });

    test("a page reloaded after a lost answer opens another checkout: its /submit answers the first payment, naming its checkout, and pays nothing", async () => {
      const { deps, productId, buyer, wallet, signed, firstId } = await paidWithAnswerLost();
      const second = await startCheckout(deps, productId, wallet);
      const answer = await submitCheckout(deps, productId, second.checkoutId, signCheckout(second.transaction, buyer));
      // The checkout that was paid, the one to confirm from then on: this one never will be.
      expect(answer).toMatchObject({ status: "completed", txHash: signatureOf(signed), checkoutId: firstId });
      expect(await confirmCheckout(deps, productId, firstId)).toMatchObject({ status: "completed", txHash: signatureOf(signed) });
      expect((await deps.ledger.getBalances(wallet)).usdc).toBe(48n * USDC); // paid once
    });

    test("the same when the owner changed the product's currency in between: the first payment is judged in its own", async () => {
      const { deps, owner, productId, buyer, wallet, signed } = await paidWithAnswerLost();
      await updateProduct(deps, owner, productId, { currency: "WGT" });
      await deps.ledger.airdrop(wallet, { token: 10n ** 9n * 100n });
      const second = await startCheckout(deps, productId, wallet);
      expect(await submitCheckout(deps, productId, second.checkoutId, signCheckout(second.transaction, buyer))).toMatchObject({ status: "completed", txHash: signatureOf(signed) });
      expect((await listPurchases(deps, owner, {})).total).toBe(1);
    });

    test("the same when the watcher completed the first checkout before the reload; checkout_pay still buys anew on purpose", async () => {
      const { deps, productId, buyer, wallet, signed, firstId } = await paidWithAnswerLost();
      expect(await createCheckoutWatcher(deps).runOnce()).toBe(1); // it looks every 5 s
      const second = await startCheckout(deps, productId, wallet);
      expect(await submitCheckout(deps, productId, second.checkoutId, signCheckout(second.transaction, buyer))).toMatchObject({
        status: "completed",
        txHash: signatureOf(signed),
        checkoutId: firstId,
      });
      expect((await deps.ledger.getBalances(wallet)).usdc).toBe(48n * USDC);
      const third = await startCheckout(deps, productId, wallet);
      expect(await submitCheckout(deps, productId, third.checkoutId, signCheckout(third.transaction, buyer), { answerRecentPurchase: false })).toMatchObject({ status: "completed" });
      expect((await deps.ledger.getBalances(wallet)).usdc).toBe(46n * USDC);
    });

    test("a recent purchase whose token the owner revoked is not the answer: buying again buys", async () => {
      // Feature unlock: the owner revokes the token minutes after the purchase; the buyer pays again.
      const { deps, owner, productId, buyer, wallet } = await paidWithAnswerLost();
      expect(await createCheckoutWatcher(deps).runOnce()).toBe(1);
      const [first] = (await listFeatureTokens(deps, owner, {})).tokens;
      await revokeFeatureToken(deps, owner, first!.accessToken);
      const again = await startCheckout(deps, productId, wallet);
      const bought = await submitCheckout(deps, productId, again.checkoutId, signCheckout(again.transaction, buyer));
      expect(bought).toMatchObject({ status: "completed", accessToken: expect.not.stringMatching(first!.accessToken) });
      expect((await deps.ledger.getBalances(wallet)).usdc).toBe(46n * USDC); // paid twice: two purchases
      expect((await checkAccess(deps, owner, productId, wallet)).hasAccess).toBe(true);
    });

    test("two /submits at once for one wallet and product (two tabs, a retrying client) send one payment", async () => {
      const { deps, clock, owner, productId, buyer, wallet } = await setup();
      const a = await startCheckout(deps, productId, wallet);
      clock.advance(1_000); // a fresh blockhash: another transaction for the same checkout
      const again = await startCheckout(deps, productId, wallet, a.checkoutId);
      const b = await startCheckout(deps, productId, wallet); // another tab
      const answers = await Promise.all([
        submitCheckout(deps, productId, a.checkoutId, signCheckout(a.transaction, buyer)),
        submitCheckout(deps, productId, a.checkoutId, signCheckout(again.transaction, buyer)),
        submitCheckout(deps, productId, b.checkoutId, signCheckout(b.transaction, buyer)),
      ]);
      expect(answers.filter((r) => r.status === "completed")).not.toHaveLength(0);
      expect((await deps.ledger.getBalances(wallet)).usdc).toBe(48n * USDC); // charged once
      expect((await listPurchases(deps, owner, {})).total).toBe(1);
    });

    test("an unpaid checkout they crowd is closed once all are read and refused", async () => {
      const { deps, clock, productId, wallet } = await setup();
      const checkout = await startCheckout(deps, productId, wallet);
      const strangers = await strangerSends(deps, checkout.transaction, REFERENCE_READS + 1);
      clock.advance(CHECKOUT_TTL_MS + EXPIRY_GRACE_MS + 1);
      const counted = countingReads(deps);
      const watcher = createCheckoutWatcher(counted.deps);
      expect(await watcher.runOnce()).toBe(0); // one left unread: not expired
      expect(await watcher.runOnce()).toBe(1);
      expect(counted.reads).toEqual(strangers);
      expect(await codeOf(startCheckout(deps, productId, wallet, checkout.checkoutId))).toBe("INVALID_STATE");
      // Asked again, it answers from what was read: the newest refusal, and nothing read twice.
      expect(await reasonOf(confirmCheckout(counted.deps, productId, checkout.checkoutId))).toBe("PAYMENT_MISMATCH:payer");
      expect(counted.reads).toEqual(strangers);
      // A crowd that comes after it expired does not make it pending again.
      await strangerSends(deps, checkout.transaction, REFERENCE_READS + 1, (await deps.ledger.latestBlockhash()).blockhash);
      expect(await reasonOf(confirmCheckout(deps, productId, checkout.checkoutId))).toBe("PAYMENT_MISMATCH:payer");
    });

    test("a reference carrying REFERENCE_PAGES full pages of them is never judged (pending); its checkout is closed past its grace, a payment still named by txHash", async () => {
      const { deps, clock, productId, wallet } = await setup();
      const checkout = await startCheckout(deps, productId, wallet);
      // A flooded chain, as a node would list it: full pages of signatures (unknown to this ledger).
      let pages = 0;
      const signatures = async () => {
        pages++;
        return Array.from({ length: REFERENCE_PAGE }, () => encodeBase58(randomBytes(64)));
      };
      const counted = countingReads(deps);
      const flooded: Deps = { ...counted.deps, ledger: { ...counted.deps.ledger, signatures } };
      expect(await confirmCheckout(flooded, productId, checkout.checkoutId)).toEqual({ status: "pending" });
      expect(pages).toBe(REFERENCE_PAGES);
      expect(counted.reads).toEqual([]); // the newest of them are not worth reading: the payment is older
      clock.advance(CHECKOUT_TTL_MS + EXPIRY_GRACE_MS);
      expect(await createCheckoutWatcher(flooded).runOnce()).toBe(0); // within its grace: left open
      expect(await confirmCheckout(flooded, productId, checkout.checkoutId)).toEqual({ status: "pending" });
      // Past it: no look will ever reach the oldest, so the watcher closes it as any unpaid one (each look was
      // REFERENCE_PAGES listings, for ever).
      clock.advance(1);
      expect(await createCheckoutWatcher(flooded).runOnce()).toBe(1);
      expect(await createCheckoutWatcher(flooded).runOnce()).toBe(0);
      await expect(confirmCheckout(flooded, productId, checkout.checkoutId)).rejects.toMatchObject({ code: "INVALID_STATE", message: expect.stringContaining("txHash") });
      expect(await codeOf(confirmCheckout(deps, productId, checkout.checkoutId))).toBe("INVALID_STATE"); // the real chain: unpaid
      expect(counted.reads).toEqual([]);
    });

    test("a flooded reference's checkout whose /submit payment is not readable yet is kept open past its grace, and completed once it is", async () => {
      const { deps, clock, owner, productId, buyer, wallet } = await setup();
      const checkout = await startCheckout(deps, productId, wallet);
      const signed = signCheckout(checkout.transaction, buyer);
      // Sent by /submit, its answer lost: listed nowhere the node can read yet.
      const lagging: Deps = { ...deps, ledger: { ...deps.ledger, getTransaction: (signature, options) => (signature === signatureOf(signed) ? Promise.resolve(null) : deps.ledger.getTransaction(signature, options)) } };
      expect(await codeOf(submitCheckout(lagging, productId, checkout.checkoutId, signed))).toBe("CHAIN_UNAVAILABLE");
      const signatures = async () => Array.from({ length: REFERENCE_PAGE }, () => encodeBase58(randomBytes(64)));
      const floodedAndLagging: Deps = { ...lagging, ledger: { ...lagging.ledger, signatures } };
      clock.advance(CHECKOUT_TTL_MS + EXPIRY_GRACE_MS + 1);
      expect(await createCheckoutWatcher(floodedAndLagging).runOnce()).toBe(0);
      expect(await confirmCheckout(floodedAndLagging, productId, checkout.checkoutId)).toEqual({ status: "pending" }); // not closed
      const flooded: Deps = { ...deps, ledger: { ...deps.ledger, signatures } };
      expect(await createCheckoutWatcher(flooded).runOnce()).toBe(1);
      expect((await listPurchases(deps, owner, {})).purchases.map((p) => p.txHash)).toEqual([signatureOf(signed)]);
    });

    test("a flooded reference's checkout whose /submit transaction never left is closed past its grace (it cannot land any more)", async () => {
      const { deps, clock, productId, buyer, wallet } = await setup();
      const checkout = await startCheckout(deps, productId, wallet);
      const signed = signCheckout(checkout.transaction, buyer);
      const lost: Deps = { ...deps, ledger: { ...deps.ledger, submit: () => Promise.reject(new AppError("CHAIN_UNAVAILABLE", "the RPC did not answer")) } };
      expect(await codeOf(submitCheckout(lost, productId, checkout.checkoutId, signed))).toBe("CHAIN_UNAVAILABLE");
      expect(deps.db.sqlite.query("SELECT count(*) AS n FROM checkout_submissions WHERE checkout_id = ?").get(checkout.checkoutId)).toEqual({ n: 1 });
      const signatures = async () => Array.from({ length: REFERENCE_PAGE }, () => encodeBase58(randomBytes(64)));
      const flooded: Deps = { ...deps, ledger: { ...deps.ledger, signatures } };
      clock.advance(CHECKOUT_TTL_MS + EXPIRY_GRACE_MS + 1);
      expect(await deps.ledger.blockhashValid(VersionedTransaction.deserialize(Buffer.from(signed, "base64")).message.recentBlockhash)).toBe(false);
      expect(await createCheckoutWatcher(flooded).runOnce()).toBe(1);
      expect(await paygateStore.findCheckout(deps.db, checkout.checkoutId)).toMatchObject({ status: "expired" });
    });

    test("a payment the buyer sent itself to a flooded reference is found when confirm names its txHash, also once the checkout was closed", async () => {
      const { deps, clock, productId, buyer, wallet } = await setup();
      const checkout = await startCheckout(deps, productId, wallet);
      const signed = signCheckout(checkout.transaction, buyer);
      await deps.ledger.submit(Buffer.from(signed, "base64")); // sent by the buyer, not through /submit
      const [stranger] = await strangerSends(deps, checkout.transaction, 1);
      const signatures = async () => Array.from({ length: REFERENCE_PAGE }, () => encodeBase58(randomBytes(64)));
      const flooded: Deps = { ...deps, ledger: { ...deps.ledger, signatures } };
      expect(await confirmCheckout(flooded, productId, checkout.checkoutId)).toEqual({ status: "pending" });
      // A transaction that does not pay this checkout is answered with its refusal; an unknown one decides nothing.
      expect(await reasonOf(confirmCheckout(flooded, productId, checkout.checkoutId, stranger))).toBe("PAYMENT_MISMATCH:payer");
      expect(await confirmCheckout(flooded, productId, checkout.checkoutId, encodeBase58(randomBytes(64)))).toEqual({ status: "pending" });
      expect(await reasonOf(confirmCheckout(flooded, productId, checkout.checkoutId, "not a signature"))).toBe("VALIDATION_ERROR:"); // as /public/verify
      // Closed by the watcher past its grace (no look can reach the payment): the txHash still finds it.
      clock.advance(CHECKOUT_TTL_MS + EXPIRY_GRACE_MS + 1);
      expect(await createCheckoutWatcher(flooded).runOnce()).toBe(1);
      await expect(confirmCheckout(flooded, productId, checkout.checkoutId)).rejects.toMatchObject({ code: "INVALID_STATE" });
      expect(await confirmCheckout(flooded, productId, checkout.checkoutId, signatureOf(signed))).toMatchObject({ status: "completed", txHash: signatureOf(signed) });
      // Completed: a later hint changes nothing.
      expect(await confirmCheckout(flooded, productId, checkout.checkoutId, stranger)).toMatchObject({ status: "completed", txHash: signatureOf(signed) });
    });
  });

  test("a payment the buyer sent itself is confirmed by /submit after the product was archived or the checkout expired", async () => {
    const { deps, clock, owner, productId, buyer } = await setup();
    const beforeArchive = await pay(deps, productId, buyer);
    const beforeExpiry = await pay(deps, productId, buyer);
    await archiveProduct(deps, owner, productId);
    expect(await submitCheckout(deps, productId, beforeArchive.checkout.checkoutId, beforeArchive.signed)).toMatchObject({ status: "completed", txHash: beforeArchive.txHash });
    clock.advance(CHECKOUT_TTL_MS + 1);
    expect(await submitCheckout(deps, productId, beforeExpiry.checkout.checkoutId, beforeExpiry.signed)).toMatchObject({ status: "completed", txHash: beforeExpiry.txHash });
    expect((await listPurchases(deps, owner, {})).total).toBe(2);
    // Not on chain: refused as before, whatever the transaction.
    const fresh = await setup();
    const open = await startCheckout(fresh.deps, fresh.productId, fresh.wallet);
    fresh.clock.advance(CHECKOUT_TTL_MS + 1);
    // On chain but not this checkout's: another checkout's payment, a plain transfer. Refused as before too.
    const othersPayment = await pay(fresh.deps, fresh.productId, fresh.buyer);
    const plain = compileTransaction([SystemProgram.transfer({ fromPubkey: fresh.buyer.publicKey, toPubkey: new PublicKey(fresh.owner), lamports: 1_000_000 })], fresh.wallet, (await fresh.deps.ledger.latestBlockhash()).blockhash);
    const sentPlain = signCheckout(Buffer.from(plain).toString("base64"), fresh.buyer);
    await fresh.deps.ledger.submit(Buffer.from(sentPlain, "base64"));
    for (const body of [signCheckout(open.transaction, fresh.buyer), "not base64!", Buffer.from("junk").toString("base64"), othersPayment.signed, sentPlain]) {
      expect(await reasonOf(submitCheckout(fresh.deps, fresh.productId, open.checkoutId, body))).toBe("INVALID_STATE:");
    }
    expect((await fresh.deps.ledger.getBalances(fresh.wallet)).usdc).toBe(48n * USDC); // only the other checkout's payment
  });

  test("/submit of a fresh transaction for a checkout the wallet already paid itself answers that payment and sends nothing", async () => {
    const { deps, clock, owner, productId, buyer, wallet } = await setup();
    const first = await startCheckout(deps, productId, wallet);
    const paid = signCheckout(first.transaction, buyer);
    await deps.ledger.submit(Buffer.from(paid, "base64")); // sent by the wallet itself; its answer lost, say
    clock.advance(1000);
    const fresh = await startCheckout(deps, productId, wallet, first.checkoutId); // the same reference, a new blockhash
    expect(await submitCheckout(deps, productId, first.checkoutId, signCheckout(fresh.transaction, buyer))).toMatchObject({ status: "completed", txHash: signatureOf(paid) });
    expect((await deps.ledger.getBalances(wallet)).usdc).toBe(48n * USDC); // paid once
    expect((await deps.ledger.getBalances(owner)).usdc).toBe(2n * USDC);
    expect((await listPurchases(deps, owner, {})).total).toBe(1);
  });

  test("a self-sent payment listed but not readable, not final or with its block time unknown: /submit waits (pending), sends nothing", async () => {
    const { deps, clock, productId, buyer, wallet } = await setup();
    const first = await startCheckout(deps, productId, wallet);
    const paid = signCheckout(first.transaction, buyer);
    await deps.ledger.submit(Buffer.from(paid, "base64"));
    clock.advance(1000);
    const fresh = signCheckout((await startCheckout(deps, productId, wallet, first.checkoutId)).transaction, buyer);
    const usdc = (await deps.ledger.getBalances(wallet)).usdc;
    type Read = Deps["ledger"]["getTransaction"];
    const reading = (read: (tx: Awaited<ReturnType<Read>>) => Awaited<ReturnType<Read>>): Deps => ({
      ...deps,
      ledger: { ...deps.ledger, getTransaction: async (...args: Parameters<Read>) => (args[0] === signatureOf(paid) ? read(await deps.ledger.getTransaction(...args)) : deps.ledger.getTransaction(...args)) },
    });
    // Not readable yet (a node behind, or on mainnet not final yet), then its block time not known yet.
    for (const node of [reading(() => null), reading((tx) => (tx === null ? null : { ...tx, timestamp: 0 }))]) {
      expect(await submitCheckout(node, productId, first.checkoutId, fresh)).toEqual({ status: "pending" });
      expect((await deps.ledger.getBalances(wallet)).usdc).toBe(usdc); // nothing sent
    }
    expect(await submitCheckout(deps, productId, first.checkoutId, fresh)).toMatchObject({ status: "completed", txHash: signatureOf(paid) });
  });

  test("a listing /submit cannot see to its end: a full one of the reference sends nothing; of the wallet, every reference transaction is read", async () => {
    const { deps, clock, productId, buyer, wallet } = await setup();
    const first = await startCheckout(deps, productId, wallet);
    const flooded = (address: string): Deps => ({
      ...deps,
      ledger: {
        ...deps.ledger,
        signatures: async (listed, query) => (listed === address ? Array.from({ length: REFERENCE_PAGE }, () => encodeBase58(randomBytes(64))) : deps.ledger.signatures(listed, query)),
      },
    });
    const usdc = (await deps.ledger.getBalances(wallet)).usdc!;
    // A thousand transactions carry the reference (a payment among the older ones cannot be ruled out).
    expect(await submitCheckout(flooded(first.reference), productId, first.checkoutId, signCheckout(first.transaction, buyer))).toEqual({ status: "pending" });
    expect((await deps.ledger.getBalances(wallet)).usdc).toBe(usdc);
    // The wallet's own payment, then a thousand newer transactions naming the wallet: still found.
    const paid = signCheckout(first.transaction, buyer);
    await deps.ledger.submit(Buffer.from(paid, "base64"));
    clock.advance(1000);
    const fresh = signCheckout((await startCheckout(deps, productId, wallet, first.checkoutId)).transaction, buyer);
    expect(await submitCheckout(flooded(wallet), productId, first.checkoutId, fresh)).toMatchObject({ status: "completed", txHash: signatureOf(paid) });
    expect((await deps.ledger.getBalances(wallet)).usdc).toBe(usdc - 2n * USDC); // paid once
  });

  test("strangers naming the reference and the wallet cannot push a self-sent payment out of /submit's sight", async () => {
    const { deps, clock, owner, productId, buyer, wallet } = await setup();
    const stranger = Keypair.generate();
    await deps.ledger.airdrop(stranger.publicKey.toBase58(), { sol: SOL, usdc: 50n * USDC });
    const first = await startCheckout(deps, productId, wallet);
    const paid = signCheckout(first.transaction, buyer);
    await deps.ledger.submit(Buffer.from(paid, "base64")); // sent by the wallet itself
    const crowd = async (n: number) => {
      for (let i = 0; i < n; i++) {
        const { blockhash } = await deps.ledger.latestBlockhash();
        await deps.ledger.submit(Buffer.from(paymentVariant(first.transaction, { payer: stranger, amount: BigInt(i + 1), extraReferences: [wallet], blockhash }), "base64"));
      }
    };
    await crowd(4); // newer than the payment: the payment is still read
    clock.advance(1000);
    let fresh = await startCheckout(deps, productId, wallet, first.checkoutId);
    expect(await submitCheckout(deps, productId, first.checkoutId, signCheckout(fresh.transaction, buyer))).toMatchObject({ status: "completed", txHash: signatureOf(paid) });
    // Past what /submit reads: it cannot rule out a payment among them, so it sends nothing (pending).
    const second = await startCheckout(deps, productId, wallet);
    await deps.ledger.submit(Buffer.from(signCheckout(second.transaction, buyer), "base64"));
    const many = async (n: number) => {
      for (let i = 0; i < n; i++) {
        const { blockhash } = await deps.ledger.latestBlockhash();
        await deps.ledger.submit(Buffer.from(paymentVariant(second.transaction, { payer: stranger, amount: BigInt(i + 1), extraReferences: [wallet], blockhash }), "base64"));
      }
    };
    await many(9);
    clock.advance(1000);
    const usdcBefore = (await deps.ledger.getBalances(wallet)).usdc;
    fresh = await startCheckout(deps, productId, wallet, second.checkoutId);
    expect(await submitCheckout(deps, productId, second.checkoutId, signCheckout(fresh.transaction, buyer))).toEqual({ status: "pending" });
    expect((await deps.ledger.getBalances(wallet)).usdc).toBe(usdcBefore); // nothing sent
    expect(await confirmCheckout(deps, productId, second.checkoutId)).toMatchObject({ status: "completed" }); // confirm walks them all
    expect((await listPurchases(deps, owner, {})).total).toBe(2);
  });

  test("a checkout purged while a late confirm judges its payment is NOT_FOUND, not a database error", async () => {
    const { deps, clock, productId, buyer } = await setup();
    const { checkout } = await pay(deps, productId, buyer);
    deps.db.sqlite.run("UPDATE checkouts SET status = 'expired' WHERE id = ?", [checkout.checkoutId]); // as a watcher behind a lagging node might
    clock.advance(CHECKOUT_TTL_MS + EXPIRED_CHECKOUT_KEPT_MS + 1);
    let purged = 0;
    const racing: Deps = {
      ...deps,
      ledger: {
        ...deps.ledger,
        getTransaction: async (...args: Parameters<Deps["ledger"]["getTransaction"]>) => {
          if (purged++ === 0) await purgeCheckouts(deps); // the hourly purge, while the payment is read
          return deps.ledger.getTransaction(...args);
        },
      },
    };
    expect(await codeOf(confirmCheckout(racing, productId, checkout.checkoutId))).toBe("NOT_FOUND");
    expect(await codeOf(confirmCheckout(deps, productId, checkout.checkoutId))).toBe("NOT_FOUND");
  });

  test("/public/verify records a confirmed payment of one of the owner's checkouts that nothing recorded yet", async () => {
    const { deps, owner, productId, buyer } = await setup();
    const { txHash, checkout } = await pay(deps, productId, buyer);
    const record = (who: string) => (tx: Parameters<typeof recordPaymentOf>[2]) => recordPaymentOf(deps, who, tx);
    const stranger = Keypair.generate().publicKey.toBase58();
    expect(await verifyTransaction(deps, owner, txHash)).toEqual({ valid: false, txHash, error: "not a payment for your products" }); // nothing asked to record
    expect(await verifyTransaction(deps, stranger, txHash, record(stranger))).toEqual({ valid: false, txHash, error: "not a payment for your products" });
    expect((await listPurchases(deps, owner, {})).total).toBe(0);
    expect(await verifyTransaction(deps, owner, txHash, record(owner))).toMatchObject({ valid: true, txHash, productId });
    expect(await confirmCheckout(deps, productId, checkout.checkoutId)).toMatchObject({ status: "completed", txHash });
    expect((await listPurchases(deps, owner, {})).total).toBe(1);
    // Another owner whose recording says yes (a purchase recorded meanwhile, but the owner's): still not theirs.
    expect(await verifyTransaction(deps, stranger, txHash, async () => true)).toEqual({ valid: false, txHash, error: "not a payment for your products" });
    // A transaction naming many of the owner's checkouts (their references are public) is judged as it is,
    // against a few of them: no ledger read per checkout.
    const crowd = await Promise.all(Array.from({ length: 8 }, () => startCheckout(deps, productId, buyer.publicKey.toBase58())));
    const transfer = SystemProgram.transfer({ fromPubkey: buyer.publicKey, toPubkey: new PublicKey(owner), lamports: 1_000_000 });
    for (const c of crowd) transfer.keys.push({ pubkey: new PublicKey(c.reference), isSigner: false, isWritable: false });
    const crowded = compileTransaction([transfer], buyer.publicKey.toBase58(), (await deps.ledger.latestBlockhash()).blockhash);
    const sentCrowded = await deps.ledger.submit(Buffer.from(signCheckout(Buffer.from(crowded).toString("base64"), buyer), "base64"));
    let reads = 0;
    const counting = { ...deps, ledger: { ...deps.ledger, getTransaction: (...args: Parameters<Deps["ledger"]["getTransaction"]>) => (reads++, deps.ledger.getTransaction(...args)) } };
    expect(await verifyTransaction(counting, owner, sentCrowded.signature, (tx) => recordPaymentOf(counting, owner, tx))).toMatchObject({ valid: false });
    expect(reads).toBe(1); // verify's own
    // A confirmed transaction that pays no checkout: still no payment, nothing recorded.
    const plain = compileTransaction([SystemProgram.transfer({ fromPubkey: buyer.publicKey, toPubkey: new PublicKey(owner), lamports: 1_000_000 })], buyer.publicKey.toBase58(), (await deps.ledger.latestBlockhash()).blockhash);
    const elsewhere = await deps.ledger.submit(Buffer.from(signCheckout(Buffer.from(plain).toString("base64"), buyer), "base64"));
    expect(await verifyTransaction(deps, owner, elsewhere.signature, record(owner))).toEqual({ valid: false, txHash: elsewhere.signature, error: "not a payment for your products" });
  });

  test("a payment that landed before the product was archived is still recorded, by confirm and by the watcher", async () => {
    const { deps, clock, owner, productId, buyer, wallet } = await setup();
    const byConfirm = await pay(deps, productId, buyer);
    const byWatcher = await pay(deps, productId, buyer);
    const unpaid = await startCheckout(deps, productId, wallet);
    await archiveProduct(deps, owner, productId); // e.g. while /submit waited for finality, or the process was down
    expect(await confirmCheckout(deps, productId, byConfirm.checkout.checkoutId)).toMatchObject({ status: "completed", txHash: byConfirm.txHash });
    expect((await listPurchases(deps, owner, {})).total).toBe(1);
    await createCheckoutWatcher(deps).runOnce(); // records the other on its own
    expect((await listPurchases(deps, owner, {})).total).toBe(2);
    expect(await confirmCheckout(deps, productId, byWatcher.checkout.checkoutId)).toMatchObject({ status: "completed", txHash: byWatcher.txHash });
    // An unpaid checkout of an archived product is refused, and the watcher closes it once its time is up.
    expect(await codeOf(confirmCheckout(deps, productId, unpaid.checkoutId))).toBe("INVALID_STATE");
    clock.advance(CHECKOUT_TTL_MS + EXPIRY_GRACE_MS + 1);
    await createCheckoutWatcher(deps).runOnce();
    expect((await deps.db.sqlite.query("SELECT status FROM checkouts WHERE id = ?").get(unpaid.checkoutId)) as { status: string }).toEqual({ status: "expired" });
  });

  test("confirm answers the access token until EXPIRY_GRACE_MS past the checkout's expiry, then the purchase without it", async () => {
    const { deps, clock, productId, buyer } = await setup();
    const paid = await pay(deps, productId, buyer);
    const first = await confirmCheckout(deps, productId, paid.checkout.checkoutId);
    expect(first).toMatchObject({ status: "completed", accessToken: expect.stringMatching(/^ft_/) });
    clock.set(Date.parse(paid.checkout.expiresAt) + EXPIRY_GRACE_MS);
    expect(await confirmCheckout(deps, productId, paid.checkout.checkoutId)).toEqual(first);
    clock.advance(1);
    expect(await confirmCheckout(deps, productId, paid.checkout.checkoutId)).toEqual({ status: "completed", txHash: paid.txHash, purchaseId: (first as { purchaseId: string }).purchaseId });
  });

  test("concurrent confirms make one purchase; an archived product sells no more but keeps its access", async () => {
    const { deps, owner, productId, buyer, wallet } = await setup();
    const paid = await pay(deps, productId, buyer);
    const results = await Promise.all(Array.from({ length: 5 }, () => confirmCheckout(deps, productId, paid.checkout.checkoutId)));
    expect(new Set(results.map((r) => (r.status === "completed" ? `${r.purchaseId} ${r.accessToken}` : "pending"))).size).toBe(1);
    expect((await listPurchases(deps, owner, {})).total).toBe(1);
    expect((await listFeatureTokens(deps, owner, {})).total).toBe(1);
    // The outbox events were written with the purchase, once: payment.completed and feature.unlocked.
    const events = deps.db.sqlite
      .query("SELECT id, type FROM outbox_events WHERE target_id = ? AND type IN ('payment.completed', 'feature.unlocked') ORDER BY type")
      .all(owner) as { id: string; type: string }[];
    expect(events.map((e) => e.type)).toEqual(["feature.unlocked", "payment.completed"]);
    const completedEvent = JSON.parse((await eventBody(deps, events[1]!.id))!);
    expect(completedEvent).toMatchObject({ type: "payment.completed", productId, walletAddress: wallet, txHash: paid.txHash, network: "localnet" });
    expect(JSON.parse((await eventBody(deps, events[0]!.id))!)).toMatchObject({ type: "feature.unlocked", accessToken: results[0]!.status === "completed" ? results[0]!.accessToken : "" });

    const open = await startCheckout(deps, productId, wallet);
    await archiveProduct(deps, owner, productId);
    expect(await codeOf(startCheckout(deps, productId, wallet))).toBe("INVALID_STATE");
    expect(await codeOf(confirmCheckout(deps, productId, open.checkoutId))).toBe("INVALID_STATE");
    expect(await confirmCheckout(deps, productId, paid.checkout.checkoutId)).toMatchObject({ status: "completed" });
    expect(await checkAccess(deps, owner, productId, wallet)).toMatchObject({ hasAccess: true, txHash: paid.txHash });
  });
});

// paygate.md "Webhooks": the bodies of the purchase and token events, flat, with `id` and `network`.
describe("webhook events of purchases and feature tokens", () => {
  const product: ProductInput = { title: "Pro plan", type: "feature_unlock", price: "2.5", featureIds: ["export", "api"], accessDays: 30 };

  test("a purchase writes payment.completed and feature.unlocked once, with exactly the spec's fields (and expiresAt, as access ends)", async () => {
    const { deps, clock, owner, productId, buyer, wallet } = await setup(product);
    const paid = await pay(deps, productId, buyer);
    clock.advance(61_000); // the events carry the time the purchase was recorded
    const done = await confirmCheckout(deps, productId, paid.checkout.checkoutId);
    if (done.status !== "completed" || done.accessToken === undefined) throw new Error("a feature unlock issues a token");
    const timestamp = new Date(clock.now()).toISOString();
    const expiresAt = new Date(clock.now() + 30 * 86_400_000).toISOString(); // the product's 30 days
    const [completed, ...moreCompleted] = await eventsOf(deps, owner, "payment.completed");
    const [unlocked, ...moreUnlocked] = await eventsOf(deps, owner, "feature.unlocked");
    expect([moreCompleted, moreUnlocked]).toEqual([[], []]);
    // { id, type, productId, productTitle, walletAddress, txHash, amount, currency, timestamp, network }, and
    // expiresAt when access ends (decisions.md)
    expect(Object.keys(completed!).sort()).toEqual(["amount", "currency", "expiresAt", "id", "network", "productId", "productTitle", "timestamp", "txHash", "type", "walletAddress"]);
    expect(completed).toEqual({
      id: expect.stringMatching(/^evt_/),
      type: "payment.completed",
      productId,
      productTitle: "Pro plan",
      walletAddress: wallet,
      txHash: paid.txHash,
      amount: "2.5", // the price's decimal string, in whole USDC
      currency: "USDC",
      expiresAt,
      timestamp,
      network: "localnet",
    });
    // { id, type, productId, productTitle, accessToken, featureIds, walletAddress, txHash, timestamp, network }, and
    // expiresAt when access ends
    expect(Object.keys(unlocked!).sort()).toEqual(["accessToken", "expiresAt", "featureIds", "id", "network", "productId", "productTitle", "timestamp", "txHash", "type", "walletAddress"]);
    expect(unlocked).toEqual({
      id: expect.stringMatching(/^evt_/),
      type: "feature.unlocked",
      productId,
      productTitle: "Pro plan",
      accessToken: done.accessToken,
      featureIds: ["export", "api"],
      walletAddress: wallet,
      txHash: paid.txHash,
      expiresAt,
      timestamp,
      network: "localnet",
    });
    expect(unlocked!.id).not.toBe(completed!.id);
    // The token's own end, as /public/feature/verify tells it.
    expect((await verifyFeatureToken(deps, owner, done.accessToken)) as Record<string, unknown>).toMatchObject({ valid: true, expiresAt });
    expect(timestamp).toMatch(ISO_MS);
    // The same time as the purchase's record.
    expect((await listPurchases(deps, owner, {})).purchases.map((p) => p.purchasedAt)).toEqual([timestamp]);
    // Confirmed again: the same purchase, no second event.
    await confirmCheckout(deps, productId, paid.checkout.checkoutId);
    expect([(await eventsOf(deps, owner, "payment.completed")).length, (await eventsOf(deps, owner, "feature.unlocked")).length]).toEqual([1, 1]);
  });

  test("an access purchase writes payment.completed only (no token, no feature.unlocked); its expiresAt adds up passes as access does", async () => {
    const { deps, clock, owner, productId, buyer, wallet } = await setup({ title: "Day pass", type: "access", price: "0.75", accessDays: 1 });
    const start = clock.now();
    const paid = await pay(deps, productId, buyer);
    expect(await confirmCheckout(deps, productId, paid.checkout.checkoutId)).not.toHaveProperty("accessToken");
    expect((await eventsOf(deps, owner, "payment.completed")).map((e) => [e.productTitle, e.amount, e.currency])).toEqual([["Day pass", "0.75", "USDC"]]);
    expect(await eventsOf(deps, owner, "feature.unlocked")).toEqual([]);
    // A second day pass bought an hour later ends a day after the first one does, not a day after it was bought.
    clock.advance(3_600_000);
    const again = await pay(deps, productId, buyer);
    await confirmCheckout(deps, productId, again.checkout.checkoutId);
    const events = await eventsOf(deps, owner, "payment.completed");
    const ends = events.map((e) => Date.parse(e.expiresAt as string) - start);
    expect(ends.map((ms) => Math.round(ms / 60_000))).toEqual([24 * 60, 48 * 60]); // minutes: a day, then two
    expect(events[1]!.expiresAt).toBe((await checkAccess(deps, owner, productId, wallet) as { expiresAt?: string }).expiresAt);
  });

  test("a purchase whose access does not end sends no expiresAt", async () => {
    const { deps, owner, productId, buyer } = await setup({ title: "Lifetime", type: "feature_unlock", price: "1", featureIds: ["all"] });
    const paid = await pay(deps, productId, buyer);
    await confirmCheckout(deps, productId, paid.checkout.checkoutId);
    const [completed] = await eventsOf(deps, owner, "payment.completed");
    const [unlocked] = await eventsOf(deps, owner, "feature.unlocked");
    expect([completed, unlocked].map((e) => Object.hasOwn(e!, "expiresAt"))).toEqual([false, false]);
  });

  test("revoking a token writes exactly one feature.revoked, with exactly the spec's fields; revoking it again writes none", async () => {
    const { deps, clock, owner, productId, buyer, wallet } = await setup(product);
    const paid = await pay(deps, productId, buyer);
    const done = await confirmCheckout(deps, productId, paid.checkout.checkoutId);
    if (done.status !== "completed" || done.accessToken === undefined) throw new Error("a feature unlock issues a token");
    expect(await eventsOf(deps, owner, "feature.revoked")).toEqual([]);
    // Another owner's revoke (404) writes nothing.
    const stranger: { status?: number | string } = {};
    expect(await revokeAnswer(deps, Keypair.generate().publicKey.toBase58(), done.accessToken, stranger)).toMatchObject({ success: false, code: "NOT_FOUND" });
    expect(stranger.status).toBe(404);
    expect(await eventsOf(deps, owner, "feature.revoked")).toEqual([]);

    clock.advance(3_600_000); // revoked an hour after the purchase: the event carries the revocation's time
    const revokedAt = new Date(clock.now()).toISOString();
    // revokeAnswer is what /public/feature/revoke and /dashboard/api/tokens/revoke both answer with.
    const set: { status?: number | string } = {};
    expect(await revokeAnswer(deps, owner, done.accessToken, set)).toEqual({ success: true, message: "Token revoked" });
    expect(set.status).toBeUndefined();
    const events = await eventsOf(deps, owner, "feature.revoked");
    expect(events).toHaveLength(1);
    // { id, type, productId, productTitle, accessToken, featureIds, walletAddress, txHash, timestamp, network }
    expect(Object.keys(events[0]!).sort()).toEqual(["accessToken", "featureIds", "id", "network", "productId", "productTitle", "timestamp", "txHash", "type", "walletAddress"]);
    expect(events[0]).toEqual({
      id: expect.stringMatching(/^evt_/),
      type: "feature.revoked",
      productId,
      productTitle: "Pro plan",
      accessToken: done.accessToken,
      featureIds: ["export", "api"],
      walletAddress: wallet,
      txHash: paid.txHash,
      timestamp: revokedAt,
      network: "localnet",
    });
    expect(revokedAt).toMatch(ISO_MS);
    expect((await listFeatureTokens(deps, owner, { status: "revoked" })).tokens.map((t) => t.revokedAt)).toEqual([revokedAt]);

    // Revoking again (by either route, later) succeeds and writes no second event.
    clock.advance(60_000);
    expect(await revokeAnswer(deps, owner, done.accessToken, {})).toEqual({ success: true, message: "Token was already revoked" });
    expect(await revokeFeatureToken(deps, owner, done.accessToken)).toEqual({ success: true, message: "Token was already revoked" });
    expect(await eventsOf(deps, owner, "feature.revoked")).toEqual(events);
  });
});

// On a file database the access checks are answered from memory between commits (Db.cache): expiries must
// still end access with no commit in between.
const onFile = tempDir();
afterAll(() => {
  for (const db of opened) db.close();
  rmSync(onFile, { recursive: true, force: true });
});
let files = 0;

const databases: [string, () => string | undefined][] = [
  ["in memory", () => undefined],
  ["on a file", () => join(onFile, `${++files}.db`)],
];
describe.each(databases)("access and tokens over time (database %s)", (_, dbPath) => {
  test("buying again while access lasts extends it from the current expiry; then it runs out", async () => {
    const { deps, clock, owner, productId, buyer, wallet } = await setup({ title: "Day pass", type: "access", price: "1", accessDays: 1 }, dbPath());
    const start = deps.clock.now();
    expect((await checkAccess(deps, owner, productId, wallet)).hasAccess).toBe(false);
    const first = await pay(deps, productId, buyer);
    await confirmCheckout(deps, productId, first.checkout.checkoutId);
    expect(await checkAccess(deps, owner, productId, wallet)).toMatchObject({ hasAccess: true, txHash: first.txHash });
    clock.advance(DAY_MS - 1);
    expect(await checkAccess(deps, owner, productId, wallet)).toMatchObject({ hasAccess: true, txHash: first.txHash });
    clock.advance(1);
    expect((await checkAccess(deps, owner, productId, wallet)).hasAccess).toBe(false); // expired, nothing committed
    clock.advance(-DAY_MS + 3_600_000); // (a clock set back: the answer is read again, not kept)
    expect((await checkAccess(deps, owner, productId, wallet)).hasAccess).toBe(true);
    const second = await pay(deps, productId, buyer);
    await confirmCheckout(deps, productId, second.checkout.checkoutId);
    expect(await checkAccess(deps, owner, productId, wallet)).toEqual({
      hasAccess: true,
      txHash: second.txHash,
      purchasedAt: new Date(start + 3_600_000).toISOString(),
      expiresAt: new Date(start + 2 * DAY_MS).toISOString(),
    });
    clock.advance(2 * DAY_MS);
    expect(await checkAccess(deps, owner, productId, wallet)).toEqual({ hasAccess: false, paymentUrl: `http://walletgate.test/pay/${productId}?wallet=${wallet}` });
  });

  test("a revoked feature token takes back the time it passed on: the later tokens run as if it had not been bought", async () => {
    const { deps, clock, owner, productId, buyer, wallet } = await setup({ title: "Pro", type: "feature_unlock", price: "1", featureIds: ["export"], accessDays: 30 }, dbPath());
    const start = clock.now();
    const { buy, expiryOf } = tokenBuyer(deps, owner, productId, buyer);
    const at = (days: number) => new Date(start + days * DAY_MS).toISOString();
    const t1 = await buy(); // days 0-30
    clock.advance(DAY_MS);
    const t2 = await buy(); // carried from t1: days 30-60
    clock.advance(DAY_MS);
    const t3 = await buy(); // carried from t2: days 60-90
    expect([await expiryOf(t1), await expiryOf(t2), await expiryOf(t3)]).toEqual([at(30), at(60), at(90)]);
    // The second purchase refunded: its 30 days go, the third's own 30 follow the first's.
    await revokeFeatureToken(deps, owner, t2);
    expect([await expiryOf(t1), await expiryOf(t3)]).toEqual([at(30), at(60)]);
    expect(await verifyFeatureToken(deps, owner, t2)).toMatchObject({ valid: false });
    expect(await checkAccess(deps, owner, productId, wallet)).toMatchObject({ hasAccess: true, expiresAt: at(60) });
    const purchases = (await listPurchases(deps, owner, { productId })).purchases as { expiresAt?: string }[];
    expect(purchases.map((p) => p.expiresAt).sort()).toEqual([at(30), at(60), at(60)]); // the purchase shows its token's time
    // Revoking again changes nothing; revoking the last one shortens none before it.
    expect(await revokeFeatureToken(deps, owner, t2)).toMatchObject({ message: "Token was already revoked" });
    await revokeFeatureToken(deps, owner, t3);
    expect(await expiryOf(t1)).toBe(at(30));
    // The first one revoked too: nothing is left.
    await revokeFeatureToken(deps, owner, t1);
    expect((await checkAccess(deps, owner, productId, wallet)).hasAccess).toBe(false);
    // A token bought once the others ended carried nothing, and loses nothing.
    clock.set(start + 100 * DAY_MS);
    const t4 = await buy();
    expect(await expiryOf(t4)).toBe(at(130));
    // A refund of a token that has ended takes back what it passed on all the same.
    clock.advance(DAY_MS);
    const t5 = await buy(); // day 101, carried from t4 (day 130): ends day 160
    expect(await expiryOf(t5)).toBe(at(160));
    clock.set(start + 130.5 * DAY_MS); // t4 has ended; t5 runs
    await revokeFeatureToken(deps, owner, t4);
    expect(await expiryOf(t5)).toBe(at(131)); // its own 30 days from day 101
  });

  test("tokens are laid again in the order they were bought, even after the clock stepped back between two purchases", async () => {
    const { deps, clock, owner, productId, buyer } = await setup({ title: "Pro", type: "feature_unlock", price: "1", featureIds: ["export"], accessDays: 30 }, dbPath());
    const start = clock.now();
    const { buy, expiryOf } = tokenBuyer(deps, owner, productId, buyer);
    await buy(); // t1: 30 days from start
    clock.advance(-10 * 60_000); // an NTP step back
    const t2 = await buy(); // extended from t1: to start + 60 days
    const t2End = await expiryOf(t2);
    expect(t2End).toBe(new Date(start + 60 * DAY_MS).toISOString());
    clock.advance(60_000);
    const t3 = await buy();
    await revokeFeatureToken(deps, owner, t3); // only the last is refunded
    expect(await expiryOf(t2)).toBe(t2End); // t2 keeps what it was extended by
  });

  // Two processes' view of one database file: there is none to share in memory.
  test.skipIf(dbPath() === undefined)("only a purchase paid on the server's network grants access (a database served on another before migration 35)", async () => {
    const path = dbPath()!;
    const { deps, owner, productId, buyer, wallet } = await setup({ title: "Pro", type: "feature_unlock", price: "2", featureIds: ["a"], accessDays: 1 }, path);
    const paid = await pay(deps, productId, buyer);
    const done = await confirmCheckout(deps, productId, paid.checkout.checkoutId);
    if (done.status !== "completed" || done.accessToken === undefined) throw new Error("a feature unlock issues a token");
    const pass = await createProduct(deps, owner, { title: "Day pass", type: "access", price: "1", accessDays: 1 });
    const passPaid = await pay(deps, pass.productId, buyer);
    expect(await confirmCheckout(deps, pass.productId, passPaid.checkout.checkoutId)).toMatchObject({ status: "completed" });
    for (const id of [productId, pass.productId]) expect((await checkAccess(deps, owner, id, wallet)).hasAccess).toBe(true);
    // The same database under NETWORK=devnet: play money buys nothing there.
    const { deps: onDevnet, db } = await testDeps({ NETWORK: "devnet", SOLANA_RPC_URL: "http://127.0.0.1:9/" }, { dbPath: path });
    opened.push(db);
    for (const id of [productId, pass.productId]) expect((await checkAccess(onDevnet, owner, id, wallet)).hasAccess).toBe(false);
    expect(await verifyFeatureToken(onDevnet, owner, done.accessToken)).toEqual({ valid: false, error: "token paid on localnet, not devnet" });
    expect(await verifyFeatureToken(deps, owner, done.accessToken)).toMatchObject({ valid: true });
    // Nor does play money extend what is paid on devnet: a devnet pass runs from now, not from the localnet pass's end.
    const another = await startCheckout(deps, pass.productId, wallet); // its row stands for a devnet checkout
    const row = (await paygateStore.findCheckout(onDevnet.db, another.checkoutId))!;
    const now = onDevnet.clock.now();
    const outcome = await paygateStore.completeCheckout(onDevnet.db, {
      checkout: row,
      productType: "access",
      accessMs: DAY_MS,
      purchase: { id: "pur_devnet", txHash: "sig_devnet", amount: 1_000_000n, network: "devnet", purchasedAt: now },
      token: null,
    });
    expect(outcome).toMatchObject({ kind: "created", purchase: { network: "devnet", expiresAt: now + DAY_MS } });
    expect(await checkAccess(onDevnet, owner, pass.productId, wallet)).toMatchObject({ hasAccess: true, txHash: "sig_devnet" });
  });

  test("a feature token expires with its access; revoking ends access at once", async () => {
    const { deps, clock, owner, productId, buyer, wallet } = await setup({ title: "Pro", type: "feature_unlock", price: "2", featureIds: ["a", "b"], accessDays: 1 }, dbPath());
    const first = await pay(deps, productId, buyer);
    const done = await confirmCheckout(deps, productId, first.checkout.checkoutId);
    if (done.status !== "completed" || done.accessToken === undefined) throw new Error("a feature unlock issues a token");
    clock.advance(DAY_MS - 1);
    expect((await checkAccess(deps, owner, productId, wallet)).hasAccess).toBe(true);
    clock.advance(-(DAY_MS - 1));
    expect(done.accessToken).toMatch(/^ft_[1-9A-HJ-NP-Za-km-z]{40,44}$/);
    expect(await verifyFeatureToken(deps, owner, done.accessToken)).toMatchObject({ valid: true, features: ["a", "b"], walletAddress: wallet });
    expect(await verifyFeatureToken(deps, Keypair.generate().publicKey.toBase58(), done.accessToken)).toEqual({ valid: false, error: "token not found" });
    clock.advance(DAY_MS);
    expect(await verifyFeatureToken(deps, owner, done.accessToken)).toEqual({ valid: false, error: "token expired" });
    expect((await checkAccess(deps, owner, productId, wallet)).hasAccess).toBe(false);
    expect((await listFeatureTokens(deps, owner, { status: "expired" })).tokens.map((t) => t.accessToken)).toEqual([done.accessToken]);

    const again = await pay(deps, productId, buyer);
    const renewed = await confirmCheckout(deps, productId, again.checkout.checkoutId);
    if (renewed.status !== "completed") throw new Error("paid");
    expect((await checkAccess(deps, owner, productId, wallet)).hasAccess).toBe(true);
    expect(await revokeFeatureToken(deps, owner, renewed.accessToken!)).toEqual({ success: true, message: "Token revoked" });
    expect((await checkAccess(deps, owner, productId, wallet)).hasAccess).toBe(false);
    expect(await verifyFeatureToken(deps, owner, renewed.accessToken!)).toEqual({ valid: false, error: "token revoked" });
    expect(await codeOf(revokeFeatureToken(deps, Keypair.generate().publicKey.toBase58(), renewed.accessToken!))).toBe("NOT_FOUND");
  });

  test("the watcher completes paid checkouts, closes unpaid ones after the grace period, in bounded rounds", async () => {
    const { deps, clock, owner, productId, buyer, wallet } = await setup(undefined, dbPath());
    const paid = await pay(deps, productId, buyer);
    const paid2 = await pay(deps, productId, buyer);
    const unpaid = await startCheckout(deps, productId, wallet);
    const watcher = createCheckoutWatcher(deps, { batchSize: 2 });
    let changed = 0;
    for (let round = 0; round < 3; round++) changed += await watcher.runOnce();
    expect(changed).toBe(2);
    expect((await listPurchases(deps, owner, {})).purchases.map((p) => p.txHash).sort()).toEqual([paid.txHash, paid2.txHash].sort());
    clock.advance(CHECKOUT_TTL_MS + EXPIRY_GRACE_MS - 1);
    expect((await watcher.runOnce()) + (await watcher.runOnce())).toBe(0); // within the grace period
    clock.advance(2);
    expect((await watcher.runOnce()) + (await watcher.runOnce())).toBe(1);
    expect(await codeOf(confirmCheckout(deps, productId, unpaid.checkoutId))).toBe("INVALID_STATE");
    expect(await watcher.runOnce()).toBe(0);
  });

  test("a round of the watcher looks at WATCH_BATCH open checkouts (each a ledger listing): more open ones wait their turn", async () => {
    const { deps, productId, wallet } = await setup(undefined, dbPath());
    for (let i = 0; i < WATCH_BATCH + 5; i++) await startCheckout(deps, productId, wallet);
    const looked: string[] = [];
    const counting: Deps = { ...deps, ledger: { ...deps.ledger, signatures: (reference, query) => (looked.push(reference), deps.ledger.signatures(reference, query)) } };
    const watcher = createCheckoutWatcher(counting);
    await watcher.runOnce();
    expect(looked.length).toBe(WATCH_BATCH);
    await watcher.runOnce();
    expect([looked.length, new Set(looked).size]).toEqual([WATCH_BATCH + 5, WATCH_BATCH + 5]); // the rest, then from the start again
  });

  test("daily statistics: one entry per UTC day, today last", async () => {
    const { deps, clock, owner, productId, buyer } = await setup(undefined, dbPath());
    const a = await pay(deps, productId, buyer);
    await confirmCheckout(deps, productId, a.checkout.checkoutId);
    clock.advance(DAY_MS);
    const b = await pay(deps, productId, buyer);
    await confirmCheckout(deps, productId, b.checkout.checkoutId);
    const stats = await ownerStatsWithDaily(deps, owner, 3);
    expect(stats).toMatchObject({ totalRevenue: 4, totalTransactions: 2, productCount: 1, revenueByCurrency: { USDC: "4", WGT: "0" } });
    expect(stats.daily.map((d) => [d.revenue, d.transactions])).toEqual([["0", 0], ["2", 1], ["2", 1]]);
    expect(stats.daily[2]!.date).toBe(new Date(deps.clock.now()).toISOString().slice(0, 10));
    expect(await codeOf(ownerStatsWithDaily(deps, owner, 0))).toBe("VALIDATION_ERROR");
  });
});

describe("the lease on a wallet's payments of a product (one /submit at a time across processes)", () => {
  test("held until it runs out; a submission is recorded only while its lease holds, not once another took it", async () => {
    const { deps, clock, productId, wallet } = await setup();
    const checkout = await startCheckout(deps, productId, wallet);
    const mine = { wallet, productId, holder: "lease_mine" };
    const theirs = { wallet, productId, holder: "lease_theirs" };
    const now = clock.now();
    expect(await paygateStore.takeSubmitLease(deps.db, mine, now, now + SUBMIT_LEASE_MS)).toBe(true);
    expect(await paygateStore.takeSubmitLease(deps.db, theirs, now + SUBMIT_LEASE_MS - 1, now + 2 * SUBMIT_LEASE_MS)).toBe(false);
    const sent = (signature: string) => paygateStore.recordSubmission(deps.db, checkout.checkoutId, { signature, blockhash: "b", validHeight: null }, clock.now(), 8, mine);
    expect(await sent("sig-held")).toBe(true);
    // Run out (its process stopped answering), taken by another: what the first would record now is refused.
    clock.advance(SUBMIT_LEASE_MS);
    expect(await paygateStore.takeSubmitLease(deps.db, theirs, clock.now(), clock.now() + SUBMIT_LEASE_MS)).toBe(true);
    expect(await sent("sig-late")).toBe("lease lost");
    await paygateStore.dropSubmitLease(deps.db, mine); // not its own any more: left alone
    expect(await paygateStore.takeSubmitLease(deps.db, mine, clock.now(), clock.now() + SUBMIT_LEASE_MS)).toBe(false);
    expect((await paygateStore.listSubmissions(deps.db, checkout.checkoutId)).map((s) => s.signature)).toEqual(["sig-held"]);
    // One never given back goes with the purge, a day after it ran out.
    const leases = () => deps.db.sqlite.query("SELECT holder FROM checkout_submit_leases").all();
    clock.advance(SUBMIT_LEASE_MS + DAY_MS - 1);
    await purgeCheckouts(deps);
    expect(leases()).toEqual([{ holder: "lease_theirs" }]);
    clock.advance(2);
    await purgeCheckouts(deps);
    expect(leases()).toEqual([]);
  });
});

describe("purge of expired checkouts", () => {
  test("a checkout that expired unpaid goes a week after its expiry, with its kept transactions; open and paid ones stay", async () => {
    const { deps, clock, productId, buyer, wallet } = await setup();
    const unpaid = await startCheckout(deps, productId, wallet);
    const paid = await pay(deps, productId, buyer);
    expect(await confirmCheckout(deps, productId, paid.checkout.checkoutId)).toMatchObject({ status: "completed" });
    clock.advance(CHECKOUT_TTL_MS + EXPIRY_GRACE_MS + 1);
    expect(await createCheckoutWatcher(deps).runOnce()).toBe(1); // the unpaid one expires
    await paygateStore.recordSubmission(deps.db, unpaid.checkoutId, { signature: "never-landed", blockhash: "old", validHeight: null }, clock.now(), 10);
    const late = await startCheckout(deps, productId, wallet); // open, never looked at since
    clock.advance(EXPIRED_CHECKOUT_KEPT_MS - CHECKOUT_TTL_MS);
    expect(await purgeCheckouts(deps)).toEqual({ checkouts: 0 }); // the unpaid one expired just under a week ago
    clock.advance(CHECKOUT_TTL_MS + EXPIRY_GRACE_MS);
    expect(await purgeCheckouts(deps)).toEqual({ checkouts: 1 });
    expect(await paygateStore.findCheckout(deps.db, unpaid.checkoutId)).toBeNull();
    expect(await paygateStore.listSubmissions(deps.db, unpaid.checkoutId)).toEqual([]);
    expect(await codeOf(confirmCheckout(deps, productId, unpaid.checkoutId))).toBe("NOT_FOUND");
    expect((await paygateStore.findCheckout(deps.db, paid.checkout.checkoutId))?.status).toBe("completed");
    expect((await paygateStore.findCheckout(deps.db, late.checkoutId))?.status).toBe("open");
  });
});

describe("purge of expired checkouts in steps", () => {
  test("more than a step's worth, all expiring in the same millisecond, go with their submissions", async () => {
    const { deps, clock, owner, productId, wallet } = await setup();
    const count = (table: string) => (deps.db.sqlite.query(`SELECT COUNT(*) AS n FROM ${table}`).get() as { n: number }).n;
    const expiresAt = clock.now() - 1;
    deps.db.sqlite.run("BEGIN");
    for (let i = 0; i < 2 * STEP_ROWS + 17; i++) {
      const id = `co_${String(i).padStart(4, "0")}`;
      deps.db.sqlite
        .query(
          `INSERT INTO checkouts (id, product_id, owner, wallet, reference, pay_to, amount, token, created_at, expires_at, status)
           VALUES (?, ?, ?, ?, ?, 'to', 1, 'usdc', ?, ?, 'expired')`,
        )
        .run(id, productId, owner, wallet, `ref-${i}`, expiresAt, expiresAt);
      deps.db.sqlite.query("INSERT INTO checkout_submissions (checkout_id, signature, blockhash, submitted_at) VALUES (?, ?, 'b', ?)").run(id, `sig-${i}`, expiresAt);
    }
    deps.db.sqlite.run("COMMIT");
    clock.advance(EXPIRED_CHECKOUT_KEPT_MS + 1);
    expect(await purgeCheckouts(deps)).toEqual({ checkouts: 2 * STEP_ROWS + 17 });
    expect([count("checkouts"), count("checkout_submissions")]).toEqual([0, 0]);
  });
});

describe("what a checkout sells is fixed when it opens, as its price is", () => {
  test("an access pass shortened while its buyer pays still grants the days shown when the checkout opened", async () => {
    const { deps, clock, owner, productId, buyer, wallet } = await setup({ title: "Year pass", type: "access", price: "10", accessDays: 365 });
    const paid = await pay(deps, productId, buyer);
    await updateProduct(deps, owner, productId, { accessDays: 1 });
    expect(await confirmCheckout(deps, productId, paid.checkout.checkoutId)).toMatchObject({ status: "completed" });
    expect(await checkAccess(deps, owner, productId, wallet)).toMatchObject({ hasAccess: true, expiresAt: new Date(clock.now() + 365 * DAY_MS).toISOString() });
    // A checkout opened after the change sells the new length.
    const again = await pay(deps, productId, buyer);
    await confirmCheckout(deps, productId, again.checkout.checkoutId);
    expect(await checkAccess(deps, owner, productId, wallet)).toMatchObject({ hasAccess: true, expiresAt: new Date(clock.now() + 366 * DAY_MS).toISOString() });
  });

  test("a feature unlock's token names the features of the checkout, not those the product was changed to meanwhile", async () => {
    const { deps, owner, productId, buyer } = await setup({ title: "Pro", type: "feature_unlock", price: "2", featureIds: ["a", "b"], accessDays: null });
    const paid = await pay(deps, productId, buyer);
    await updateProduct(deps, owner, productId, { featureIds: ["c"], accessDays: 1 });
    const done = await confirmCheckout(deps, productId, paid.checkout.checkoutId);
    if (done.status !== "completed" || done.accessToken === undefined) throw new Error("a feature unlock issues a token");
    const verified = await verifyFeatureToken(deps, owner, done.accessToken);
    expect(verified).toMatchObject({ valid: true, features: ["a", "b"] });
    expect(verified).not.toHaveProperty("expiresAt"); // no expiry, as when the checkout opened
    expect((await eventsOf(deps, owner, "feature.unlocked")).map((e) => e.featureIds)).toEqual([["a", "b"]]);
  });

  test("passes bought one after another add up to 9999-12-31 at the latest, a time ISO 8601 can still write", async () => {
    const { deps, owner, productId, buyer, wallet } = await setup({ title: "Century", type: "access", price: "1", accessDays: 36_500 });
    await confirmCheckout(deps, productId, (await pay(deps, productId, buyer)).checkout.checkoutId);
    // As if bought some eighty times already.
    await deps.db.write(() => deps.db.sqlite.run("UPDATE purchases SET expires_at = ? WHERE wallet = ?", [Date.parse("9990-01-01T00:00:00.000Z"), wallet]));
    await confirmCheckout(deps, productId, (await pay(deps, productId, buyer)).checkout.checkoutId);
    expect(await checkAccess(deps, owner, productId, wallet)).toMatchObject({ hasAccess: true, expiresAt: "9999-12-31T23:59:59.999Z" });
  });
});

describe("payments refused before anything is sent", () => {
  /** `instructions` compiled with the buyer as fee payer and signed by it and `cosigners`, base64. */
  async function signedBy(deps: Deps, buyer: Keypair, instructions: TransactionInstruction[], cosigners: Keypair[] = []): Promise<string> {
    const tx = VersionedTransaction.deserialize(compileTransaction(instructions, buyer.publicKey.toBase58(), (await deps.ledger.latestBlockhash()).blockhash));
    tx.sign([buyer, ...cosigners]);
    return Buffer.from(tx.serialize()).toString("base64");
  }

  test("tokens of a co-signing stranger, with the buyer paying the fee: refused, and the stranger keeps them", async () => {
    const { deps, owner, productId, buyer, wallet } = await setup();
    const stranger = Keypair.generate();
    await deps.ledger.airdrop(stranger.publicKey.toBase58(), { sol: SOL, usdc: 50n * USDC });
    const checkout = await startCheckout(deps, productId, wallet);
    const usdc = await usdcToken(deps);
    const fromStranger = transferToPayTo(stranger, owner, usdc, 2n * USDC, [checkout.reference]);
    const signed = await signedBy(deps, buyer, [createPayToAccount(buyer, owner, usdc.mint), fromStranger], [stranger]);
    expect(await reasonOf(submitCheckout(deps, productId, checkout.checkoutId, signed))).toBe("PAYMENT_MISMATCH:payer");
    expect((await deps.ledger.getBalances(stranger.publicKey.toBase58())).usdc).toBe(50n * USDC);
    await expectNothingBought(deps, owner, checkout.checkoutId);
  });

  test("a stranger paying the fee for the buyer's own tokens, the buyer co-signing: refused before it is sent, and the buyer keeps them", async () => {
    const { deps, owner, productId, buyer, wallet } = await setup();
    const stranger = Keypair.generate();
    await deps.ledger.airdrop(stranger.publicKey.toBase58(), { sol: SOL });
    const checkout = await startCheckout(deps, productId, wallet);
    const usdc = await usdcToken(deps);
    const fromBuyer = transferToPayTo(buyer, owner, usdc, 2n * USDC, [checkout.reference]);
    const signed = await signedBy(deps, stranger, [createPayToAccount(stranger, owner, usdc.mint), fromBuyer], [buyer]);
    expect(await reasonOf(submitCheckout(deps, productId, checkout.checkoutId, signed))).toBe("PAYMENT_MISMATCH:payer");
    expect((await deps.ledger.getBalances(wallet)).usdc).toBe(50n * USDC); // never sent: nothing was paid
    expect(await deps.ledger.transactionStatus(signatureOf(signed))).toBeNull();
    await expectNothingBought(deps, owner, checkout.checkoutId);
  });

  test("the reference elsewhere than on the transfer, or writable on it: refused at /submit, and when sent by the buyer, at confirm", async () => {
    const { deps, owner, productId, buyer, wallet } = await setup();
    const usdc = await usdcToken(deps);
    const variants: [string, (reference: string) => TransactionInstruction[]][] = [
      [
        "on an instruction of its own",
        (reference) => {
          const marker = SystemProgram.transfer({ fromPubkey: buyer.publicKey, toPubkey: buyer.publicKey, lamports: 0 });
          marker.keys.push({ pubkey: new PublicKey(reference), isSigner: false, isWritable: false });
          return [createPayToAccount(buyer, owner, usdc.mint), transferToPayTo(buyer, owner, usdc, 2n * USDC, []), marker];
        },
      ],
      [
        "writable on the transfer",
        (reference) => {
          const transfer = transferToPayTo(buyer, owner, usdc, 2n * USDC, []);
          transfer.keys.push({ pubkey: new PublicKey(reference), isSigner: false, isWritable: true });
          return [createPayToAccount(buyer, owner, usdc.mint), transfer];
        },
      ],
    ];
    for (const [how, instructions] of variants) {
      const checkout = await startCheckout(deps, productId, wallet);
      const signed = await buyerTransaction(deps, buyer, instructions(checkout.reference));
      expect([how, await reasonOf(submitCheckout(deps, productId, checkout.checkoutId, signed))]).toEqual([how, "PAYMENT_MISMATCH:reference"]);
      await expectNothingBought(deps, owner, checkout.checkoutId);
      await deps.ledger.submit(Buffer.from(signed, "base64")); // sent by the buyer itself: it lands, and is no checkout payment
      expect([how, await reasonOf(confirmCheckout(deps, productId, checkout.checkoutId, signatureOf(signed)))]).toEqual([how, "PAYMENT_MISMATCH:reference"]);
      await expectNothingBought(deps, owner, checkout.checkoutId);
    }
  });

  test("checkout_pay's maxAmount is held to the base unit", async () => {
    const { deps, productId, wallet } = await setup({ title: "Pro", type: "feature_unlock", price: "2.5", featureIds: ["export"], accessDays: 30 });
    expect(await reasonOf(startCheckout(deps, productId, wallet, undefined, { maxAmount: "2.499999", currency: "USDC" }))).toBe("PAYMENT_MISMATCH:amount");
    expect(await startCheckout(deps, productId, wallet, undefined, { maxAmount: "2.5", currency: "usdc" })).toMatchObject({ amount: "2.5" });
  });
});

test("the feature-token list comes in pages of at most ~1 MB of JSON: tokens of a product at its limits take several", async () => {
  const product: ProductInput = { title: "T".repeat(200), type: "feature_unlock", price: "0.01", featureIds: Array.from({ length: 50 }, (_, i) => `${i}`.padEnd(64, "f")) };
  const { deps, owner, productId, buyer, wallet } = await setup(product);
  const bought = 300;
  for (let i = 0; i < bought; i++) {
    const checkout = await startCheckout(deps, productId, wallet);
    expect(await submitCheckout(deps, productId, checkout.checkoutId, signCheckout(checkout.transaction, buyer), { answerRecentPurchase: false })).toMatchObject({ status: "completed" });
  }
  const seen = new Set<string>();
  let pages = 0;
  for (;;) {
    const page = await listFeatureTokens(deps, owner, { limit: 1000, offset: seen.size });
    pages++;
    expect([page.total, page.limit, page.offset]).toEqual([bought, 1000, seen.size]); // paygate.md's shape; the client pages on by what it got
    expect(JSON.stringify(page.tokens).length).toBeLessThanOrEqual(PAGE_MAX_CHARS + 2);
    if (page.tokens.length === 0) break;
    for (const t of page.tokens) seen.add(t.accessToken);
  }
  expect(pages).toBeGreaterThan(2); // two pages cut short, then the empty one
  expect(seen.size).toBe(bought); // each token once
}, 60_000);

describe("a landed transaction judged as a checkout's payment (checkLandedPayment, on its own)", () => {
  // The signed transaction is checked before it is sent as well; this is the rule for one found on chain,
  // which the buyer may have built and sent itself, so each of its checks must stand alone.
  const wallet = Keypair.generate().publicKey.toBase58();
  const payTo = Keypair.generate().publicKey.toBase58();
  const mint = Keypair.generate().publicKey.toBase58();
  const token = { key: "usdc", kind: "spl", mint, decimals: 6 } as unknown as Parameters<typeof checkLandedPayment>[1];
  const checkout = { id: "chk_1", wallet, payTo, amount: 2_000_000n, token: "usdc", createdAt: 1_000, expiresAt: 900_000, chainExpiresAt: null } as paygateStore.CheckoutRow;
  const pays = { token: "usdc", mint, from: wallet, to: payTo, amount: 2_000_000n, decimals: 6 };
  const landed = (transfers: object[], more: object = {}) =>
    ({ signature: "s", slot: 1, timestamp: 2_000, status: "confirmed", error: null, fee: 5_000n, feePayer: wallet, transfers, memo: null, wire: new Uint8Array(), loadedAddresses: null, ...more }) as unknown as Parameters<typeof checkLandedPayment>[2];
  const reason = (tx: Parameters<typeof checkLandedPayment>[2]) => {
    try {
      checkLandedPayment(checkout, token, tx);
      return "paid";
    } catch (err) {
      return `${(err as AppError).code}:${((err as AppError).extra.details as { reason?: string } | undefined)?.reason ?? ""}`;
    }
  };

  test("the payment, and every way a landed transaction is not it", () => {
    expect(reason(landed([pays]))).toBe("paid");
    expect(reason(landed([{ ...pays, amount: 2_500_000n }]))).toBe("paid"); // more than the price is a payment
    expect(reason(landed([pays], { status: "failed", error: "x" }))).toBe("PAYMENT_MISMATCH:failed");
    expect(reason(landed([pays], { feePayer: payTo }))).toBe("PAYMENT_MISMATCH:payer");
    expect(reason(landed([{ ...pays, amount: 1_999_999n }]))).toBe("PAYMENT_MISMATCH:amount");
    expect(reason(landed([{ ...pays, from: Keypair.generate().publicKey.toBase58() }]))).toBe("PAYMENT_MISMATCH:payer");
    expect(reason(landed([{ ...pays, mint: Keypair.generate().publicKey.toBase58(), token: "other" }]))).toBe("PAYMENT_MISMATCH:mint");
    expect(reason(landed([{ ...pays, to: Keypair.generate().publicKey.toBase58() }]))).toBe("PAYMENT_MISMATCH:recipient");
    expect(reason(landed([pays, pays]))).toBe("PAYMENT_MISMATCH:recipient");
    // A transfer of the mint elsewhere beside the payment does not hide it; one landed after the expiry is late.
    expect(reason(landed([pays, { ...pays, to: Keypair.generate().publicKey.toBase58() }]))).toBe("paid");
    expect(reason(landed([pays], { timestamp: 900_001 }))).toBe("INVALID_STATE:");
    expect(reason(landed([pays], { timestamp: 0 }))).toBe("CHAIN_UNAVAILABLE:");
  });
});
