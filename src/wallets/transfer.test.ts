// Transfers from custodial wallets (signed here) and connected ones (handed back unsigned), on the embedded
// ledger; a custodial transfer under an idempotency key, made once whatever the retries.
import { describe, expect, test } from "bun:test";
import { Keypair, VersionedTransaction } from "@solana/web3.js";
import { testDeps } from "../../test/helpers/deps.ts";
import { codeOf } from "../../test/helpers/errors.ts";
import { AppError } from "../errors.ts";
import { createCustodialWallet } from "./custody.ts";
import { transferFromWallet } from "./transfer.ts";
import { associatedTokenAddress, parseTransaction } from "../ledger/transactions.ts";
import { purgeTransferKeys } from "./purge.ts";
import { recordUnsentTransfer } from "../../test/helpers/transfer-keys.ts";
import { signerFor } from "./signer.ts";
import * as store from "./store.ts";

const SOL = 1_000_000_000n;
const USDC = 1_000_000n;

/**
 * A custodial wallet `a` with 1 SOL and a recipient `b`, on a ledger whose next `draws` compute-unit limits (drawn
 * from 3 random bytes) are all equal (all-zero bytes), counted from after the airdrop, which draws limits too.
 */
async function equalLimits(draws: number) {
  let equalDraws = 0;
  const random = (n: number) => (n === 3 && equalDraws-- > 0 ? new Uint8Array(3) : crypto.getRandomValues(new Uint8Array(n)));
  const { deps } = await testDeps({}, { random });
  const a = (await createCustodialWallet(deps)).address;
  const b = Keypair.generate().publicKey.toBase58();
  await deps.ledger.airdrop(a, { sol: SOL });
  equalDraws = draws;
  return { deps, a, b };
}

describe("transferFromWallet", () => {
  test("between two custodial wallets: signed here, confirmed, exact balances", async () => {
    const { deps } = await testDeps();
    const a = (await createCustodialWallet(deps)).address;
    const b = (await createCustodialWallet(deps)).address;
    await deps.ledger.airdrop(a, { sol: SOL, usdc: 10n * USDC });
    const usdc = await transferFromWallet(deps, { from: a, to: b, token: "usdc", amount: 4n * USDC, memo: "invoice 7" });
    const sol = await transferFromWallet(deps, { from: a, to: b, token: "sol", amount: SOL / 10n });
    if (usdc.kind !== "submitted" || sol.kind !== "submitted") throw new Error("custodial transfers are submitted");
    expect(await deps.ledger.getBalances(a)).toEqual({ sol: SOL - SOL / 10n - 10_000n - 2_039_280n, usdc: 6n * USDC, wgt: 0n });
    expect(await deps.ledger.getBalances(b)).toEqual({ sol: SOL / 10n, usdc: 4n * USDC, wgt: 0n });
    expect((await deps.ledger.getTransaction(usdc.result.signature))?.memo).toBe("invoice 7");
  });

  test("lamports sent to a recipient's token account address before it exists do not block transfers to it", async () => {
    const { deps } = await testDeps();
    const a = (await createCustodialWallet(deps)).address;
    const griefer = (await createCustodialWallet(deps)).address;
    const b = Keypair.generate().publicKey.toBase58();
    await deps.ledger.airdrop(a, { sol: SOL, usdc: 10n * USDC });
    await deps.ledger.airdrop(griefer, { sol: SOL });
    const usdcMint = (await deps.ledger.tokens()).find((t) => t.key === "usdc")!.mint!;
    const ata = associatedTokenAddress(b, usdcMint);
    // The rent-exempt minimum sent to the address where b's USDC account will be: an account, not a token account.
    const grief = await transferFromWallet(deps, { from: griefer, to: ata, token: "sol", amount: 890_880n });
    expect(grief.kind).toBe("submitted");
    expect([await deps.ledger.accountExists(ata), await deps.ledger.tokenAccountExists(ata)]).toEqual([true, false]);
    const sent = await transferFromWallet(deps, { from: a, to: b, token: "usdc", amount: 1n * USDC });
    expect(sent.kind).toBe("submitted");
    expect((await deps.ledger.getBalances(b)).usdc).toBe(1n * USDC);
    expect(await deps.ledger.tokenAccountExists(ata)).toBe(true);
  });

  test("a connected wallet gets the unsigned transaction, signs it itself and it goes through", async () => {
    const { deps } = await testDeps();
    const user = Keypair.generate();
    const to = (await createCustodialWallet(deps)).address;
    await deps.ledger.airdrop(user.publicKey.toBase58(), { sol: SOL });
    const outcome = await transferFromWallet(deps, { from: user.publicKey.toBase58(), to, token: "sol", amount: SOL / 2n });
    if (outcome.kind !== "unsigned") throw new Error("a connected wallet signs for itself");
    const tx = VersionedTransaction.deserialize(Buffer.from(outcome.transaction, "base64"));
    expect(tx.signatures.every((s) => s.every((b) => b === 0))).toBe(true);
    expect((await deps.ledger.getBalances(to)).sol).toBe(0n); // nothing moved yet
    tx.sign([user]);
    await deps.ledger.submit(tx.serialize());
    expect((await deps.ledger.getBalances(to)).sol).toBe(SOL / 2n);
  });

  test("a connected wallet short of the amount, the fee or a new token account's rent is INSUFFICIENT_FUNDS before it signs", async () => {
    const { deps } = await testDeps();
    const user = Keypair.generate().publicKey.toBase58();
    const to = Keypair.generate().publicKey.toBase58(); // no USDC account yet: the transfer creates it
    const transfer = (token: string, amount: bigint) => codeOf(transferFromWallet(deps, { from: user, to, token, amount }));
    await deps.ledger.airdrop(user, { sol: 10_000_000n, usdc: 3n * USDC });
    expect(await transfer("usdc", 5n * USDC)).toBe("INSUFFICIENT_FUNDS"); // more USDC than it holds
    expect(await transfer("usdc", 3n * USDC)).toBe("OK"); // 0.01 SOL pays the fee and the new account's rent
    expect(await transfer("sol", 10_000_000n)).toBe("INSUFFICIENT_FUNDS"); // all of it leaves nothing for the fee
    expect(await transfer("sol", 10_000_000n - 5_000n)).toBe("OK"); // all but the fee: the wallet ends at 0
    expect(await transfer("sol", 10_000_000n - 5_000n - 1_000n)).toBe("INSUFFICIENT_FUNDS"); // 1,000 lamports left: below rent
    const poor = Keypair.generate().publicKey.toBase58();
    await deps.ledger.airdrop(poor, { sol: 2_000_000n, usdc: USDC });
    // 0.002 SOL pays the fee but not the 0.00203928 SOL of the recipient's new token account.
    expect(await codeOf(transferFromWallet(deps, { from: poor, to, token: "usdc", amount: USDC }))).toBe("INSUFFICIENT_FUNDS");
    const known = (await createCustodialWallet(deps)).address;
    await deps.ledger.airdrop(known, { usdc: 1n }); // its USDC account exists: no rent to pay
    expect(await codeOf(transferFromWallet(deps, { from: poor, to: known, token: "usdc", amount: USDC }))).toBe("OK");
    expect(await deps.ledger.getBalances(user)).toEqual({ sol: 10_000_000n, usdc: 3n * USDC, wgt: 0n }); // nothing was charged
  });

  test("ten custodial transfers at once from one wallet: no overdraw, the rest INSUFFICIENT_FUNDS and free", async () => {
    const { deps } = await testDeps();
    const a = (await createCustodialWallet(deps)).address;
    const b = Keypair.generate().publicKey.toBase58();
    await deps.ledger.airdrop(a, { sol: SOL / 2n });
    // 0.5 SOL pays four transfers of 0.1 SOL plus fees; a fifth would leave the sender below rent.
    const outcomes = await Promise.all(
      Array.from({ length: 10 }, () => codeOf(transferFromWallet(deps, { from: a, to: b, token: "sol", amount: SOL / 10n }))),
    );
    expect(outcomes.filter((o) => o === "OK")).toHaveLength(4);
    expect(outcomes.filter((o) => o === "INSUFFICIENT_FUNDS")).toHaveLength(6);
    expect((await deps.ledger.getBalances(a)).sol).toBe(SOL / 2n - 4n * (SOL / 10n) - 4n * 5000n);
    expect((await deps.ledger.getBalances(b)).sol).toBe(4n * (SOL / 10n));
  });

  test("a custodial wallet's shortfall is said in tokens, not in the ledger's words of token accounts and fee payers", async () => {
    const { deps } = await testDeps();
    const a = (await createCustodialWallet(deps)).address;
    const empty = (await createCustodialWallet(deps)).address;
    const b = Keypair.generate().publicKey.toBase58();
    await deps.ledger.airdrop(a, { sol: SOL / 100n, usdc: 2n * USDC });
    const refusal = async (from: string, token: string, amount: bigint) => {
      try {
        await transferFromWallet(deps, { from, to: b, token, amount });
        return null;
      } catch (err) {
        return { code: (err as { code?: string }).code, message: (err as Error).message };
      }
    };
    expect(await refusal(a, "wgt", USDC)).toEqual({ code: "INSUFFICIENT_FUNDS", message: `${a} holds 0 WGT; this transfer needs 1 WGT` });
    expect(await refusal(a, "usdc", 3n * USDC)).toEqual({ code: "INSUFFICIENT_FUNDS", message: `${a} holds 2 USDC; this transfer needs 3 USDC` });
    expect(await refusal(empty, "sol", SOL / 1000n)).toEqual({
      code: "INSUFFICIENT_FUNDS",
      message: `${empty} holds 0 SOL; this transfer needs 0.001005 SOL with its fee`,
    });
    expect((await deps.ledger.getBalances(a)).usdc).toBe(2n * USDC); // nothing moved
    // Balances that cannot be read to word it leave the ledger's refusal as it was (not "try again").
    const blind: typeof deps = { ...deps, ledger: { ...deps.ledger, getBalances: () => Promise.reject(new AppError("CHAIN_UNAVAILABLE", "no answer")) } };
    await expect(transferFromWallet(blind, { from: a, to: b, token: "wgt", amount: USDC })).rejects.toMatchObject({ code: "INSUFFICIENT_FUNDS" });
  });

  test("two identical requests that draw the same compute-unit limit are still two transfers", async () => {
    // The first two limits drawn are equal (all-zero random bytes), so the second transaction is
    // byte-for-byte the first: the ledger says CONFLICT and the transfer is built again.
    const { deps, a, b } = await equalLimits(2);
    const both = await Promise.all([0, 1].map(() => transferFromWallet(deps, { from: a, to: b, token: "sol", amount: SOL / 10n })));
    const signatures = both.map((o) => (o.kind === "submitted" ? o.result.signature : ""));
    expect(new Set(signatures).size).toBe(2);
    expect((await deps.ledger.getBalances(b)).sol).toBe(2n * (SOL / 10n));
  });

  test("SOL too little for a new account is VALIDATION_ERROR on amount, for a connected wallet before it signs anything", async () => {
    const { deps } = await testDeps();
    const user = Keypair.generate().publicKey.toBase58();
    await deps.ledger.airdrop(user, { sol: SOL });
    const fresh = Keypair.generate().publicKey.toBase58();
    expect(await codeOf(transferFromWallet(deps, { from: user, to: fresh, token: "sol", amount: 890_879n }))).toBe("VALIDATION_ERROR");
    expect((await transferFromWallet(deps, { from: user, to: fresh, token: "sol", amount: 890_880n })).kind).toBe("unsigned");
    expect((await transferFromWallet(deps, { from: user, to: user, token: "sol", amount: 1n })).kind).toBe("unsigned"); // an account that exists
  });

  test("a recipient that is a program, sysvar, mint or token account is VALIDATION_ERROR on to, custodial or connected, nothing charged", async () => {
    const { deps } = await testDeps();
    const custodial = (await createCustodialWallet(deps)).address;
    const connected = Keypair.generate().publicKey.toBase58();
    const holder = (await createCustodialWallet(deps)).address;
    await deps.ledger.airdrop(holder, { sol: SOL, usdc: USDC });
    const usdcMint = (await deps.ledger.tokens()).find((t) => t.key === "usdc")!.mint!;
    const tokenAccount = associatedTokenAddress(holder, usdcMint);
    for (const from of [custodial, connected]) {
      await deps.ledger.airdrop(from, { sol: SOL, usdc: USDC });
      for (const to of ["11111111111111111111111111111111", "SysvarRent111111111111111111111111111111111", "TokenkegQfeZyiNwAJbNbGKPFXCWuBvf9Ss623VQ5DA", usdcMint, tokenAccount]) {
        for (const token of ["sol", "usdc"]) {
          const refused = await transferFromWallet(deps, { from, to, token, amount: SOL / 10n }).catch((err: unknown) => err);
          expect([to, token, (refused as { code?: string }).code, ((refused as { extra?: { details?: { fields?: { field: string }[] } } }).extra?.details?.fields ?? [])[0]?.field]).toEqual([to, token, "VALIDATION_ERROR", "to"]);
        }
      }
      expect(await deps.ledger.getBalances(from)).toEqual({ sol: SOL, usdc: USDC, wgt: 0n });
    }
  });

  test("errors: unknown token, bad address, zero amount", async () => {
    const { deps } = await testDeps();
    const a = (await createCustodialWallet(deps)).address;
    expect(await codeOf(transferFromWallet(deps, { from: a, to: a, token: "doge", amount: 1n }))).toBe("VALIDATION_ERROR");
    expect(await codeOf(transferFromWallet(deps, { from: a, to: "nope", token: "sol", amount: 1n }))).toBe("INVALID_ADDRESS");
    expect(await codeOf(transferFromWallet(deps, { from: "nope", to: a, token: "sol", amount: 1n }))).toBe("INVALID_ADDRESS");
    expect(await codeOf(transferFromWallet(deps, { from: a, to: a, token: "sol", amount: 0n }))).toBe("VALIDATION_ERROR");
  });
});

describe("transferFromWallet with an idempotencyKey", () => {
  const signatureOf = (o: Awaited<ReturnType<typeof transferFromWallet>>) => (o.kind === "submitted" ? o.result.signature : "unsigned");
  const keyRows = (deps: Awaited<ReturnType<typeof testDeps>>["deps"]) => (deps.db.sqlite.query("SELECT COUNT(*) AS n FROM transfer_keys").get() as { n: number }).n;

  async function funded() {
    const t = await testDeps();
    const a = (await createCustodialWallet(t.deps)).address;
    const b = Keypair.generate().publicKey.toBase58();
    await t.deps.ledger.airdrop(a, { sol: SOL, usdc: 10n * USDC });
    return { ...t, a, b };
  }

  test("a retry with the key answers the first transfer; another transfer under the key is VALIDATION_ERROR", async () => {
    const { deps, a, b } = await funded();
    const intent = { from: a, to: b, token: "usdc", amount: 2n * USDC, memo: "order 9" };
    const first = await transferFromWallet(deps, intent, { idempotencyKey: "k-1" });
    const again = await transferFromWallet(deps, { ...intent }, { idempotencyKey: "k-1" });
    expect(signatureOf(again)).toBe(signatureOf(first));
    if (first.kind !== "submitted" || again.kind !== "submitted") throw new Error("custodial transfers are submitted");
    expect(again.result).toEqual({ ...first.result, confirmedAt: again.result.confirmedAt });
    expect((await deps.ledger.getBalances(b)).usdc).toBe(2n * USDC); // sent once
    for (const other of [{ amount: 3n * USDC }, { to: a }, { token: "sol" }, { memo: "order 10" }, { memo: undefined }]) {
      const refused = await transferFromWallet(deps, { ...intent, ...other }, { idempotencyKey: "k-1" }).catch((e: unknown) => e);
      expect(refused).toBeInstanceOf(AppError);
      expect([(refused as AppError).code, JSON.stringify((refused as AppError).extra.details)]).toEqual(["VALIDATION_ERROR", expect.stringContaining('"field":"idempotencyKey"')]);
    }
    // Another key is another transfer; keys are the wallet's own: another wallet's "k-1" is its own.
    expect(signatureOf(await transferFromWallet(deps, intent, { idempotencyKey: "k-2" }))).not.toBe(signatureOf(first));
    const c = (await createCustodialWallet(deps)).address;
    await deps.ledger.airdrop(c, { sol: SOL, usdc: 10n * USDC });
    expect(signatureOf(await transferFromWallet(deps, { ...intent, from: c }, { idempotencyKey: "k-1" }))).not.toBe(signatureOf(first));
    expect((await deps.ledger.getBalances(b)).usdc).toBe(6n * USDC);
  });

  test("ten calls at once with one key send one transfer, and each answers it", async () => {
    const { deps, a, b } = await funded();
    const intent = { from: a, to: b, token: "sol", amount: SOL / 10n };
    const outcomes = await Promise.all(Array.from({ length: 10 }, () => transferFromWallet(deps, intent, { idempotencyKey: "race" }).then(signatureOf, (e: AppError) => e.code)));
    expect(new Set(outcomes).size).toBe(1);
    expect(outcomes[0]).toMatch(/^[1-9A-HJ-NP-Za-km-z]{64,88}$/);
    expect((await deps.ledger.getBalances(b)).sol).toBe(SOL / 10n);
    expect(keyRows(deps)).toBe(1);
  });

  /** A key of `a`'s whose transaction (0.1 SOL to `b`) was recorded but never sent, as a crash between the two leaves it. */
  const recordUnsent = (t: Awaited<ReturnType<typeof funded>>, key: string) => recordUnsentTransfer(t.deps, t.a, t.b, key);

  test("a key whose transaction was recorded but never sent (a crash between): sent as it is while it can land, else signed anew, never twice", async () => {
    const t = await funded();
    const { deps, clock, a, b } = t;
    const intent = { from: a, to: b, token: "sol", amount: SOL / 10n };
    const record = (key: string) => recordUnsent(t, key);
    // Its blockhash still lives: the recorded transaction itself is sent.
    const live = await record("live");
    expect(signatureOf(await transferFromWallet(deps, intent, { idempotencyKey: "live" }))).toBe(live.signature);
    expect((await deps.ledger.getBalances(b)).sol).toBe(SOL / 10n);
    // Its blockhash has lapsed, but the chain is not yet past its landing limit (150 blocks more: a node
    // behind, or a copy another process is sending): CONFLICT, nothing sent.
    const dead = await record("dead");
    clock.advance(90_000);
    const early = await transferFromWallet(deps, intent, { idempotencyKey: "dead" }).catch((e: unknown) => e);
    expect([(early as AppError).code, (early as AppError).extra.details]).toEqual(["CONFLICT", { signature: dead.signature }]);
    // Past it, it can never land: a new transaction is signed under the key, and sent once.
    clock.advance(31_000);
    const anew = signatureOf(await transferFromWallet(deps, intent, { idempotencyKey: "dead" }));
    expect(anew).not.toBe(dead.signature);
    expect(signatureOf(await transferFromWallet(deps, intent, { idempotencyKey: "dead" }))).toBe(anew);
    expect(await codeOf(deps.ledger.submit(dead.wire))).toBe("TRANSACTION_REJECTED"); // the first can never land now
    expect((await deps.ledger.getBalances(b)).sol).toBe(2n * (SOL / 10n));
  });

  test("six calls at once finding a key's transaction dead sign one new one: the others answer it, the money goes once", async () => {
    const t = await funded();
    const { deps, clock, b } = t;
    const { intent, signature } = await recordUnsent(t, "dead");
    clock.advance(121_000); // past its landing limit: it never left, and never will
    const outcomes = await Promise.all(Array.from({ length: 6 }, () => transferFromWallet(deps, intent, { idempotencyKey: "dead" }).then(signatureOf, (e: AppError) => e.code)));
    const signatures = outcomes.filter((o) => o !== "CONFLICT");
    expect(signatures.length).toBeGreaterThan(0);
    expect(new Set(signatures).size).toBe(1);
    expect(signatures[0]).not.toBe(signature);
    expect((await deps.ledger.getBalances(b)).sol).toBe(SOL / 10n);
    expect(signatureOf(await transferFromWallet(deps, intent, { idempotencyKey: "dead" }))).toBe(signatures[0]!);
    expect((await deps.ledger.getBalances(b)).sol).toBe(SOL / 10n);
  });

  test("past its landing limit, a transaction the history has as processed or failed is never signed again", async () => {
    for (const [status, code] of [["processed", "CONFLICT"], ["failed", "TRANSACTION_REJECTED"]] as const) {
      const t = await funded();
      const { deps, clock, b } = t;
      const { intent, signature } = await recordUnsent(t, "k");
      clock.advance(121_000);
      // A node that cannot show it, and a history that says it was processed (not yet confirmed), or failed.
      const node: typeof deps = { ...deps, ledger: { ...deps.ledger, getTransaction: async () => null, transactionStatus: async () => status } };
      const answer = await transferFromWallet(node, intent, { idempotencyKey: "k" }).catch((e: unknown) => e);
      expect([status, (answer as AppError).code, ((answer as AppError).extra.details as { signature?: string }).signature]).toEqual([status, code, signature]);
      expect((await deps.ledger.getBalances(b)).sol).toBe(0n);
    }
  });

  test("a transaction the node cannot show, but the whole history knows, is never signed again", async () => {
    const { deps, clock, a, b } = await funded();
    const intent = { from: a, to: b, token: "sol", amount: SOL / 10n };
    const first = signatureOf(await transferFromWallet(deps, intent, { idempotencyKey: "pruned" }));
    clock.advance(121_000); // past its landing limit
    // A node that pruned it (or one behind another) says "not found"; the history's status is confirmed.
    const pruned: typeof deps = { ...deps, ledger: { ...deps.ledger, getTransaction: async () => null } };
    const answer = await transferFromWallet(pruned, intent, { idempotencyKey: "pruned" }).catch((e: unknown) => e);
    expect([(answer as AppError).code, (answer as AppError).extra.details]).toEqual(["CONFLICT", { signature: first }]);
    expect((answer as AppError).message).toContain("was made");
    expect((await deps.ledger.getBalances(b)).sol).toBe(SOL / 10n);
  });

  test("two keys asking the same transfer in one blockhash's life are two transfers, even with equal compute-unit limits", async () => {
    // The first limits drawn are equal (all-zero random bytes): only each key's own reference tells them apart.
    const { deps, a, b } = await equalLimits(3);
    const intent = { from: a, to: b, token: "sol", amount: SOL / 10n };
    const one = signatureOf(await transferFromWallet(deps, intent, { idempotencyKey: "invoice-1" }));
    const two = signatureOf(await transferFromWallet(deps, intent, { idempotencyKey: "invoice-2" }));
    const keyless = await transferFromWallet(deps, intent);
    expect(new Set([one, two, signatureOf(keyless)]).size).toBe(3);
    expect((await deps.ledger.getBalances(b)).sol).toBe(3n * (SOL / 10n));
  });

  test("a refusal before sending (funds) keeps the key: funded, a retry sends its transaction once, as another call at once would", async () => {
    const { deps, clock, a, b } = await funded();
    const intent = { from: a, to: b, token: "usdc", amount: 20n * USDC };
    const refused = await transferFromWallet(deps, intent, { idempotencyKey: "later" }).catch((e: unknown) => e);
    expect([(refused as AppError).code, (refused as AppError).message]).toEqual(["INSUFFICIENT_FUNDS", `${a} holds 10 USDC; this transfer needs 20 USDC`]);
    expect(keyRows(deps)).toBe(1);
    const again = await transferFromWallet(deps, intent, { idempotencyKey: "later" }).catch((e: unknown) => e);
    expect((again as AppError).message).toBe(`${a} holds 10 USDC; this transfer needs 20 USDC`); // worded from the balances again
    await deps.ledger.airdrop(a, { usdc: 10n * USDC });
    const recorded = (await store.findTransferKey(deps.db, a, "later"))!.signature;
    const sent = await Promise.all([0, 1].map(() => transferFromWallet(deps, intent, { idempotencyKey: "later" }).then(signatureOf)));
    expect(sent).toEqual([recorded, recorded]);
    expect((await deps.ledger.getBalances(b)).usdc).toBe(20n * USDC);
    // Refused again once its blockhash has lapsed: then a new transaction, when the money is there.
    const later = { ...intent, amount: 30n * USDC };
    expect(await codeOf(transferFromWallet(deps, later, { idempotencyKey: "later-2" }))).toBe("INSUFFICIENT_FUNDS");
    const refusedOne = (await store.findTransferKey(deps.db, a, "later-2"))!.signature;
    clock.advance(121_000);
    await deps.ledger.airdrop(a, { usdc: 30n * USDC });
    expect(signatureOf(await transferFromWallet(deps, later, { idempotencyKey: "later-2" }))).not.toBe(refusedOne);
    expect((await deps.ledger.getBalances(b)).usdc).toBe(50n * USDC);
  });

  test("a key whose transaction failed on chain answers that failure, its fee charged once", async () => {
    const { deps, clock, a, b } = await funded();
    const intent = { from: a, to: b, token: "sol", amount: SOL - 5_000n - 1_000n }; // leaves 1,000 lamports: below rent
    const signer = await signerFor(deps, a);
    if (signer.kind !== "custodial") throw new Error("custodial");
    const wire = await signer.sign(await deps.ledger.buildTransfer(intent));
    const tx = parseTransaction(wire);
    const request = JSON.stringify({ to: b, token: "sol", amount: intent.amount.toString(), memo: null });
    await store.insertTransferKey(deps.db, { wallet: a, key: "failed", request, reference: Keypair.generate().publicKey.toBase58(), signature: tx.signature, blockhash: tx.recentBlockhash, wire, validHeight: 0, createdAt: clock.now() });
    expect(await codeOf(deps.ledger.submit(wire))).toBe("TRANSACTION_REJECTED"); // sent (not as the service's own transfer), failed, charged
    const solAfter = (await deps.ledger.getBalances(a)).sol;
    for (let i = 0; i < 2; i++) {
      const answer = await transferFromWallet(deps, intent, { idempotencyKey: "failed" }).catch((e: unknown) => e);
      expect([(answer as AppError).code, (answer as AppError).extra.details]).toEqual(["TRANSACTION_REJECTED", { reason: "execution_failed", signature: tx.signature }]);
    }
    expect((await deps.ledger.getBalances(a)).sol).toBe(solAfter);
  });

  test("a connected wallet's key is VALIDATION_ERROR: it sends its transfer itself", async () => {
    const { deps } = await testDeps();
    const user = Keypair.generate().publicKey.toBase58();
    await deps.ledger.airdrop(user, { sol: SOL });
    const refused = await transferFromWallet(deps, { from: user, to: user, token: "sol", amount: 1n }, { idempotencyKey: "k" }).catch((e: unknown) => e);
    expect((refused as AppError).code).toBe("VALIDATION_ERROR");
    expect((refused as AppError).message).toContain("idempotencyKey is for custodial wallets");
  });

  test("keys are kept a day: the purge deletes older ones, and the key then names a new transfer", async () => {
    const { deps, clock, a, b } = await funded();
    const intent = { from: a, to: b, token: "sol", amount: SOL / 10n };
    const first = signatureOf(await transferFromWallet(deps, intent, { idempotencyKey: "day" }));
    clock.advance(23 * 3_600_000);
    expect(await purgeTransferKeys(deps)).toEqual({ transferKeys: 0 });
    expect(signatureOf(await transferFromWallet(deps, intent, { idempotencyKey: "day" }))).toBe(first);
    clock.advance(3_600_000 + 1);
    expect(await purgeTransferKeys(deps)).toEqual({ transferKeys: 1 });
    expect(signatureOf(await transferFromWallet(deps, intent, { idempotencyKey: "day" }))).not.toBe(first);
    expect((await deps.ledger.getBalances(b)).sol).toBe(2n * (SOL / 10n));
  });
});
