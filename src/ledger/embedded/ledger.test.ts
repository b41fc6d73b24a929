// The embedded ledger's own rules, in-process with an injected clock: airdrops, transfers, every
// rejection reason, failed execution, history, restarts and ten transfers racing from one wallet.
import { describe, expect, test } from "bun:test";
import { Keypair, SystemProgram, Transaction, VersionedTransaction } from "@solana/web3.js";
import { rmSync } from "node:fs";
import { join } from "node:path";
import { openDatabase } from "../../db/open.ts";
import { migrate } from "../../db/migrate.ts";
import { AppError } from "../../errors.ts";
import { manualClock } from "../../lib/clock.ts";
import { cryptoRandom } from "../../lib/ids.ts";
import { inlineVerifier } from "../../lib/verifier.ts";
import { testDeps } from "../../../test/helpers/deps.ts";
import { codeOf } from "../../../test/helpers/errors.ts";
import { tempDir } from "../../../test/helpers/server.ts";
import { compileTransaction, memoInstruction, parseTransaction } from "../transactions.ts";
import { createEmbeddedLedger, embeddedLedgerTotals, type EmbeddedLedger } from "./ledger.ts";
import { SLOT_MS } from "./blockhash.ts";
import { hashes as ed25519Hashes, Point, utils as ed25519Utils, verify as ed25519Verify } from "@noble/ed25519";
import { sha512 } from "@noble/hashes/sha2.js";

const SOL = 1_000_000_000n;
const USDC = 1_000_000n;

async function setup() {
  const t = await testDeps();
  const ledger = await createEmbeddedLedger(t.deps);
  return { ...t, ledger };
}

function signWire(wire: Uint8Array, ...signers: Keypair[]): Uint8Array {
  const tx = VersionedTransaction.deserialize(wire);
  tx.sign(signers);
  return tx.serialize();
}

ed25519Hashes.sha512 ??= sha512; // @noble/ed25519 signs synchronously only with this set
const ORDER_L = 2n ** 252n + 27742317777372353535851937790883648493n;
const leToBig = (b: Uint8Array) => b.reduceRight((n, byte) => (n << 8n) | BigInt(byte), 0n);
const bigToLe = (n: bigint) => Uint8Array.from({ length: 32 }, (_, i) => Number((n >> BigInt(8 * i)) & 0xffn));

/** A valid, strict Ed25519 signature of `message` by `signer` with the nonce `r` (not RFC 8032's derived one). */
function signWithNonce(signer: Keypair, message: Uint8Array, r: bigint): Uint8Array {
  const { scalar, pointBytes } = ed25519Utils.getExtendedPublicKey(signer.secretKey.subarray(0, 32));
  const R = Point.BASE.multiply(r % ORDER_L).toBytes();
  const k = leToBig(sha512(new Uint8Array([...R, ...pointBytes, ...message]))) % ORDER_L;
  const signature = new Uint8Array([...R, ...bigToLe((r + k * scalar) % ORDER_L)]);
  if (!ed25519Verify(signature, message, pointBytes)) throw new Error("not a valid signature");
  return signature;
}

async function transfer(ledger: EmbeddedLedger, from: Keypair, to: string, token: string, amount: bigint, memo?: string) {
  const wire = await ledger.buildTransfer({ from: from.publicKey.toBase58(), to, token, amount, memo });
  return ledger.submit(signWire(wire, from));
}

async function reasonOf(promise: Promise<unknown>): Promise<string> {
  try {
    await promise;
  } catch (err) {
    if (err instanceof AppError) return `${err.code}:${(err.extra.details as { reason?: string } | undefined)?.reason ?? ""}`;
    throw err;
  }
  throw new Error("expected a rejection");
}

async function expectConserved(t: Awaited<ReturnType<typeof setup>>) {
  const totals = await embeddedLedgerTotals(t.db);
  expect(totals.lamports + totals.fees).toBe(totals.genesisLamports);
  for (const [mint, supply] of totals.supplies) expect(totals.tokenAmounts.get(mint)).toBe(supply);
}

describe("embedded ledger", () => {
  test("genesis: sol, usdc and the service token; the faucet holds the supply", async () => {
    const t = await setup();
    const tokens = await t.ledger.tokens();
    expect(tokens.map((x) => [x.key, x.kind, x.decimals])).toEqual([
      ["sol", "native", 9],
      ["usdc", "spl", 6],
      ["wgt", "spl", 6],
    ]);
    expect(tokens[1]!.mint).not.toBe(tokens[2]!.mint);
    const faucet = await t.ledger.getBalances(t.ledger.faucetAddress);
    expect(faucet.sol).toBeGreaterThan(1_000_000n * SOL);
    await expectConserved(t);
  });

  test("airdrops SOL, usdc and the service token, one signature each, with limits", async () => {
    const t = await setup();
    const who = Keypair.generate().publicKey.toBase58();
    const signatures = await t.ledger.airdrop(who, { sol: 2n * SOL, usdc: 50n * USDC, token: 7n * USDC });
    expect(signatures).toHaveLength(3);
    expect(await t.ledger.getBalances(who)).toEqual({ sol: 2n * SOL, usdc: 50n * USDC, wgt: 7n * USDC });
    const drop = await t.ledger.getTransaction(signatures[1]!);
    expect(drop?.transfers).toEqual([
      { token: "usdc", mint: (await t.ledger.tokens())[1]!.mint, from: t.ledger.faucetAddress, to: who, amount: 50n * USDC, decimals: 6 },
    ]);
    expect(await reasonOf(t.ledger.airdrop(who, { sol: 2n * SOL + 1n }))).toBe("VALIDATION_ERROR:");
    expect(await reasonOf(t.ledger.airdrop(Keypair.generate().publicKey.toBase58(), { sol: 1000n }))).toBe("VALIDATION_ERROR:");
    expect(await reasonOf(t.ledger.airdrop(who, { usdc: 1_000_001n * USDC }))).toBe("VALIDATION_ERROR:");
    expect(await reasonOf(t.ledger.airdrop("nope", { sol: SOL }))).toBe("INVALID_ADDRESS:");
    expect(await t.ledger.airdrop(who, {})).toEqual([]);
    await expectConserved(t);
  });

  test("a service token with 9 decimals: genesis supply capped inside 64 bits, transfers work", async () => {
    const t = await testDeps({ SERVICE_TOKEN_DECIMALS: "9", SERVICE_TOKEN_SYMBOL: "pts" });
    const ledger = await createEmbeddedLedger(t.deps);
    expect((await ledger.tokens())[2]).toMatchObject({ key: "pts", decimals: 9 });
    expect((await ledger.getBalances(ledger.faucetAddress)).pts).toBe(10n ** 18n);
    const who = Keypair.generate();
    await ledger.airdrop(who.publicKey.toBase58(), { sol: SOL, token: 1_000_000n * SOL });
    expect((await ledger.getBalances(who.publicKey.toBase58())).pts).toBe(1_000_000n * SOL);
    await transfer(ledger, who, Keypair.generate().publicKey.toBase58(), "pts", 5n * SOL);
    await expectConserved({ ...t, ledger });
  });

  test("amounts: zero, negative and above 2^63-1 base units are VALIDATION_ERROR", async () => {
    const t = await setup();
    const [a, b] = [Keypair.generate().publicKey.toBase58(), Keypair.generate().publicKey.toBase58()];
    for (const amount of [0n, -1n, 2n ** 63n]) {
      expect(await reasonOf(t.ledger.buildTransfer({ from: a, to: b, token: "sol", amount }))).toBe("VALIDATION_ERROR:");
    }
  });

  test("a SOL transfer: balances, fee, parsed transaction, memo and history both ways", async () => {
    const t = await setup();
    const alice = Keypair.generate();
    const bob = Keypair.generate().publicKey.toBase58();
    await t.ledger.airdrop(alice.publicKey.toBase58(), { sol: SOL });
    t.clock.advance(SLOT_MS * 3);
    const result = await transfer(t.ledger, alice, bob, "sol", SOL / 4n, "rent for May");
    expect(result.fee).toBe(5000n);
    expect(result.slot).toBe(t.ledger.currentSlot());
    expect(result.confirmedAt).toBe(t.clock.now());
    expect((await t.ledger.getBalances(alice.publicKey.toBase58())).sol).toBe(SOL - SOL / 4n - 5000n);
    expect((await t.ledger.getBalances(bob)).sol).toBe(SOL / 4n);
    const tx = await t.ledger.getTransaction(result.signature);
    expect(tx).toMatchObject({ status: "confirmed", error: null, fee: 5000n, feePayer: alice.publicKey.toBase58(), memo: "rent for May" });
    expect(tx?.transfers).toEqual([{ token: "sol", mint: null, from: alice.publicKey.toBase58(), to: bob, amount: SOL / 4n }]);
    const [newest] = await t.ledger.history(bob, { limit: 10 });
    expect(newest?.signature).toBe(result.signature);
    expect((await t.ledger.history(alice.publicKey.toBase58(), { limit: 10 })).map((x) => x.signature)[0]).toBe(result.signature);
    expect(await t.ledger.getTransaction("1".repeat(64))).toBeNull();
  });

  test("an SPL transfer creates the recipient's token account once, paid by the sender", async () => {
    const t = await setup();
    const alice = Keypair.generate();
    const bob = Keypair.generate().publicKey.toBase58();
    await t.ledger.airdrop(alice.publicKey.toBase58(), { sol: SOL, usdc: 10n * USDC });
    const first = await transfer(t.ledger, alice, bob, "usdc", 3n * USDC);
    const again = { from: alice.publicKey.toBase58(), to: bob, token: "usdc", amount: 1n };
    const [one, two] = [parseTransaction(await t.ledger.buildTransfer(again)), parseTransaction(await t.ledger.buildTransfer(again))];
    expect(one.instructions.map((i) => i.type)).toEqual(["setComputeUnitLimit", "transferChecked"]); // no second account creation
    // The same request twice within one blockhash builds two distinct transactions, not a duplicate.
    expect(one.recentBlockhash).toBe(two.recentBlockhash);
    expect(one.computeUnitLimit).not.toBe(two.computeUnitLimit);
    const second = await transfer(t.ledger, alice, bob, "usdc", 2n * USDC);
    expect([first.fee, second.fee]).toEqual([5000n, 5000n]);
    expect(await t.ledger.getBalances(alice.publicKey.toBase58())).toEqual({ sol: SOL - 10_000n - 2_039_280n, usdc: 5n * USDC, wgt: 0n });
    expect(await t.ledger.getBalances(bob)).toEqual({ sol: 0n, usdc: 5n * USDC, wgt: 0n });
    // The recipient's history holds the incoming token transfers though its wallet signed nothing.
    expect((await t.ledger.history(bob, { limit: 5 })).map((x) => x.signature)).toEqual([second.signature, first.signature]);
    await expectConserved(t);
  });

  test("history pages newest first with limit and before", async () => {
    const t = await setup();
    const alice = Keypair.generate();
    await t.ledger.airdrop(alice.publicKey.toBase58(), { sol: SOL });
    const sent: string[] = [];
    for (let i = 0; i < 5; i++) sent.push((await transfer(t.ledger, alice, Keypair.generate().publicKey.toBase58(), "sol", SOL / 100n)).signature);
    const page1 = await t.ledger.history(alice.publicKey.toBase58(), { limit: 2 });
    const page2 = await t.ledger.history(alice.publicKey.toBase58(), { limit: 2, before: page1[1]!.signature });
    expect([...page1, ...page2].map((x) => x.signature)).toEqual([sent[4]!, sent[3]!, sent[2]!, sent[1]!]);
    // signatures: the same pages, without reading the transactions.
    expect(await t.ledger.signatures(alice.publicKey.toBase58(), { limit: 3, before: sent[4]! })).toEqual([sent[3]!, sent[2]!, sent[1]!]);
    expect(await reasonOf(t.ledger.signatures(alice.publicKey.toBase58(), { limit: 2, before: "1".repeat(64) }))).toBe("VALIDATION_ERROR:");
    expect(await reasonOf(t.ledger.signatures(alice.publicKey.toBase58(), { limit: 1001 }))).toBe("VALIDATION_ERROR:");
    expect(await reasonOf(t.ledger.signatures("nope", { limit: 1 }))).toBe("INVALID_ADDRESS:");
    expect(await reasonOf(t.ledger.history(alice.publicKey.toBase58(), { limit: 2, before: "1".repeat(64) }))).toBe("VALIDATION_ERROR:");
    for (const limit of [0, -1, 1.5, 1001, Number.NaN]) {
      expect(await reasonOf(t.ledger.history(alice.publicKey.toBase58(), { limit }))).toBe("VALIDATION_ERROR:");
    }
  });

  test("every rejection reason; a rejected transaction changes nothing", async () => {
    const t = await setup();
    const alice = Keypair.generate();
    const a = alice.publicKey.toBase58();
    const bob = Keypair.generate();
    await t.ledger.airdrop(a, { sol: SOL });
    const wire = await t.ledger.buildTransfer({ from: a, to: bob.publicKey.toBase58(), token: "sol", amount: 1000n * 1000n });
    const before = await embeddedLedgerTotals(t.db);

    expect(await reasonOf(t.ledger.submit(wire))).toBe("TRANSACTION_REJECTED:missing_signature");
    // Bob's signature in Alice's slot.
    const impostor = VersionedTransaction.deserialize(wire);
    impostor.signatures[0] = signWire(compileTransaction([memoInstruction("x")], bob.publicKey.toBase58(), (await t.ledger.latestBlockhash()).blockhash), bob).subarray(1, 65);
    expect(await reasonOf(t.ledger.submit(impostor.serialize()))).toBe("TRANSACTION_REJECTED:invalid_signature");
    const forged = signWire(wire, alice);
    forged[forged.length - 1]! ^= 1; // the signed message changed after signing
    expect(await reasonOf(t.ledger.submit(forged))).toBe("TRANSACTION_REJECTED:invalid_signature");
    expect(await reasonOf(t.ledger.submit(new Uint8Array([1, 2, 3])))).toBe("TRANSACTION_REJECTED:malformed");
    expect(await reasonOf(t.ledger.submit(new Uint8Array([...signWire(wire, alice), 0])))).toBe("TRANSACTION_REJECTED:malformed");

    const unknown = compileTransaction(
      [SystemProgram.transfer({ fromPubkey: alice.publicKey, toPubkey: bob.publicKey, lamports: 1_000_000n })],
      a,
      Keypair.generate().publicKey.toBase58(),
    );
    expect(await reasonOf(t.ledger.submit(signWire(unknown, alice)))).toBe("TRANSACTION_REJECTED:blockhash_not_found");

    const unsupported = compileTransaction(
      [SystemProgram.createAccount({ fromPubkey: alice.publicKey, newAccountPubkey: bob.publicKey, lamports: 1_000_000, space: 0, programId: SystemProgram.programId })],
      a,
      (await t.ledger.latestBlockhash()).blockhash,
    );
    expect(await reasonOf(t.ledger.submit(signWire(unsupported, alice, bob)))).toBe("TRANSACTION_REJECTED:unsupported_instruction");

    const poor = Keypair.generate();
    const fromPoor = await t.ledger.buildTransfer({ from: poor.publicKey.toBase58(), to: a, token: "sol", amount: 1n });
    expect(await reasonOf(t.ledger.submit(signWire(fromPoor, poor)))).toBe("TRANSACTION_REJECTED:account_not_found");

    const stale = signWire(wire, alice);
    const blockhash = parseTransaction(stale).recentBlockhash;
    expect(await t.ledger.blockhashValid(blockhash)).toBe(true);
    t.clock.advance(SLOT_MS * 151);
    expect(await t.ledger.blockhashValid(blockhash)).toBe(false); // a transaction on it can no longer land
    expect(await t.ledger.blockhashValid("1".repeat(44))).toBe(false);
    expect(await reasonOf(t.ledger.submit(stale))).toBe("TRANSACTION_REJECTED:blockhash_expired");
    expect(await embeddedLedgerTotals(t.db)).toEqual(before);
  });

  test("the same transaction twice is CONFLICT; the first stays", async () => {
    const t = await setup();
    const alice = Keypair.generate();
    await t.ledger.airdrop(alice.publicKey.toBase58(), { sol: SOL });
    const signed = signWire(await t.ledger.buildTransfer({ from: alice.publicKey.toBase58(), to: Keypair.generate().publicKey.toBase58(), token: "sol", amount: SOL / 2n }), alice);
    const outcomes = await Promise.allSettled([t.ledger.submit(signed), t.ledger.submit(signed)]);
    expect(outcomes.map((o) => o.status).sort()).toEqual(["fulfilled", "rejected"]);
    expect(await codeOf(Promise.reject((outcomes.find((o) => o.status === "rejected") as PromiseRejectedResult).reason))).toBe("CONFLICT");
    expect((await t.ledger.getBalances(alice.publicKey.toBase58())).sol).toBe(SOL / 2n - 5000n);
    // Sent again after its blockhash expired (its first answer lost, say): still a duplicate, not "unknown".
    t.clock.advance(SLOT_MS * 151);
    expect(await codeOf(t.ledger.submit(signed))).toBe("CONFLICT");
  });

  test("a message already recorded is CONFLICT under other signatures too: a fee payer cannot replay a co-signer's transfer", async () => {
    const t = await setup();
    const [alice, payer] = [Keypair.generate(), Keypair.generate()];
    await t.ledger.airdrop(alice.publicKey.toBase58(), { usdc: 10n * USDC });
    await t.ledger.airdrop(payer.publicKey.toBase58(), { sol: SOL });
    const to = Keypair.generate().publicKey.toBase58();
    await t.ledger.airdrop(to, { sol: SOL });
    const wire = await t.ledger.buildTransfer({ from: alice.publicKey.toBase58(), to, token: "usdc", amount: USDC, feePayer: payer.publicKey.toBase58() });
    const tx = VersionedTransaction.deserialize(wire);
    tx.sign([alice]); // alice signs once
    const message = tx.message.serialize();
    const payerIndex = tx.message.staticAccountKeys.findIndex((k) => k.equals(payer.publicKey));
    const withPayerNonce = (r: bigint) => {
      tx.signatures[payerIndex] = signWithNonce(payer, message, r);
      return tx.serialize();
    };
    await t.ledger.submit(withPayerNonce(12345n));
    const again = withPayerNonce(67890n); // a different, valid signature over the same message: another txHash
    expect(parseTransaction(again).signature).not.toBe(parseTransaction(withPayerNonce(12345n)).signature);
    expect(await codeOf(t.ledger.submit(again))).toBe("CONFLICT");
    expect((await t.ledger.getBalances(alice.publicKey.toBase58())).usdc).toBe(9n * USDC); // paid once
  });

  test("a failed execution is recorded and charged its fee; an own transfer's shortfall is INSUFFICIENT_FUNDS and free", async () => {
    const t = await setup();
    const alice = Keypair.generate();
    const a = alice.publicKey.toBase58();
    await t.ledger.airdrop(a, { sol: SOL, usdc: USDC });
    const tooMuch = signWire(await t.ledger.buildTransfer({ from: a, to: Keypair.generate().publicKey.toBase58(), token: "usdc", amount: 2n * USDC }), alice);
    let failure: AppError | null = null;
    try {
      await t.ledger.submit(tooMuch);
    } catch (err) {
      failure = err as AppError;
    }
    expect(failure?.code).toBe("TRANSACTION_REJECTED");
    const details = failure?.extra.details as { reason: string; signature: string };
    expect(details.reason).toBe("execution_failed");
    const recorded = await t.ledger.getTransaction(details.signature);
    expect(recorded?.status).toBe("failed");
    expect(recorded?.error).toContain("holds");
    expect((await t.ledger.getBalances(a)).sol).toBe(SOL - 5000n); // the fee; the token account was not created

    const own = signWire(await t.ledger.buildTransfer({ from: a, to: Keypair.generate().publicKey.toBase58(), token: "sol", amount: SOL }), alice);
    expect(await reasonOf(t.ledger.submit(own, { ownTransfer: true }))).toBe("INSUFFICIENT_FUNDS:");
    expect((await t.ledger.getBalances(a)).sol).toBe(SOL - 5000n);
    expect(await t.ledger.getTransaction(parseTransaction(own).signature)).toBeNull();
    await expectConserved(t);
  });

  test("an own transfer leaving its recipient below the rent is VALIDATION_ERROR on amount, free; leaving the sender below it is INSUFFICIENT_FUNDS", async () => {
    const t = await setup();
    const alice = Keypair.generate();
    const a = alice.publicKey.toBase58();
    await t.ledger.airdrop(a, { sol: SOL });
    const fresh = Keypair.generate().publicKey.toBase58();
    const tooLittle = signWire(await t.ledger.buildTransfer({ from: a, to: fresh, token: "sol", amount: 100_000n }), alice);
    const refused = await t.ledger.submit(tooLittle, { ownTransfer: true }).catch((err: unknown) => err as AppError);
    expect(refused).toBeInstanceOf(AppError);
    expect((refused as AppError).code).toBe("VALIDATION_ERROR");
    expect((refused as AppError).extra.details).toMatchObject({ fields: [{ field: "amount" }] });
    expect(await t.ledger.getTransaction(parseTransaction(tooLittle).signature)).toBeNull();
    // Submitted by anyone else, the same transaction executes and fails, fee charged.
    expect(await reasonOf(t.ledger.submit(tooLittle))).toBe("TRANSACTION_REJECTED:execution_failed");
    const drain = signWire(await t.ledger.buildTransfer({ from: a, to: fresh, token: "sol", amount: SOL - 10_000n - 100_000n }), alice);
    expect(await reasonOf(t.ledger.submit(drain, { ownTransfer: true }))).toBe("INSUFFICIENT_FUNDS:");
    expect((await t.ledger.getBalances(a)).sol).toBe(SOL - 5000n);
    await expectConserved(t);
  });

  test("an own transfer that would fail for another reason is preflight_failed: not recorded, not charged", async () => {
    const t = await setup();
    const alice = Keypair.generate();
    const a = alice.publicKey.toBase58();
    await t.ledger.airdrop(a, { sol: SOL });
    // The System Program's account is read-only to every transaction.
    const toSystem = signWire(await t.ledger.buildTransfer({ from: a, to: "11111111111111111111111111111111", token: "sol", amount: SOL / 10n }), alice);
    expect(await reasonOf(t.ledger.submit(toSystem, { ownTransfer: true }))).toBe("TRANSACTION_REJECTED:preflight_failed");
    expect(await t.ledger.getTransaction(parseTransaction(toSystem).signature)).toBeNull();
    expect((await t.ledger.getBalances(a)).sol).toBe(SOL);
    // Anyone else's is executed: recorded as failed, its fee charged, its signature given.
    const failure = await t.ledger.submit(toSystem).catch((err: unknown) => err as AppError);
    expect((failure as AppError).extra.details).toEqual({ reason: "execution_failed", signature: parseTransaction(toSystem).signature });
    expect((await t.ledger.getBalances(a)).sol).toBe(SOL - 5000n);
    await expectConserved(t);
  });

  test("legacy Transaction objects and v0 messages are both accepted", async () => {
    const t = await setup();
    const alice = Keypair.generate();
    await t.ledger.airdrop(alice.publicKey.toBase58(), { sol: SOL });
    const { blockhash } = await t.ledger.latestBlockhash();
    const legacy = new Transaction({ feePayer: alice.publicKey, recentBlockhash: blockhash }).add(memoInstruction("legacy"));
    legacy.sign(alice);
    await t.ledger.submit(legacy.serialize());
    const v0 = compileTransaction([memoInstruction("v0")], alice.publicKey.toBase58(), blockhash, 0);
    const result = await t.ledger.submit(signWire(v0, alice));
    expect((await t.ledger.getTransaction(result.signature))?.memo).toBe("v0");
  });

  test("ten transfers racing from one wallet never overdraw it", async () => {
    const t = await setup();
    const alice = Keypair.generate();
    const a = alice.publicKey.toBase58();
    await t.ledger.airdrop(a, { sol: SOL, usdc: 35n * USDC });
    const recipient = Keypair.generate().publicKey.toBase58();
    await transfer(t.ledger, alice, recipient, "usdc", 1n); // the recipient's token account exists
    const results = await Promise.allSettled(
      Array.from({ length: 10 }, async (_, i) => {
        const wire = await t.ledger.buildTransfer({ from: a, to: recipient, token: "usdc", amount: 10n * USDC, memo: `race ${i}` });
        return t.ledger.submit(signWire(wire, alice), { ownTransfer: true });
      }),
    );
    const won = results.filter((r) => r.status === "fulfilled").length;
    expect(won).toBe(3); // 35 - 0.000001 USDC pays three transfers of 10
    for (const r of results) if (r.status === "rejected") expect(await codeOf(Promise.reject(r.reason))).toBe("INSUFFICIENT_FUNDS");
    expect((await t.ledger.getBalances(a)).usdc).toBe(35n * USDC - 1n - 30n * USDC);
    await expectConserved(t);
  });

  test("state, genesis and blockhashes survive a restart on the same database file", async () => {
    const dir = tempDir();
    try {
      const clock = manualClock();
      const open = async () => {
        const db = openDatabase(join(dir, "ledger.db"));
        migrate(db.sqlite, clock.now());
        const ledger = await createEmbeddedLedger({
          config: { serviceToken: { symbol: "wgt", decimals: 6, mint: null } },
          db,
          clock,
          random: cryptoRandom,
          verifier: inlineVerifier,
        });
        return { db, ledger };
      };
      const first = await open();
      const alice = Keypair.generate();
      await first.ledger.airdrop(alice.publicKey.toBase58(), { sol: SOL, usdc: USDC });
      const tokens = await first.ledger.tokens();
      const signedEarlier = signWire(
        await first.ledger.buildTransfer({ from: alice.publicKey.toBase58(), to: Keypair.generate().publicKey.toBase58(), token: "sol", amount: SOL / 2n }),
        alice,
      );
      first.db.close();

      const second = await open();
      expect(await second.ledger.tokens()).toEqual(tokens);
      expect(second.ledger.faucetAddress).toBe(first.ledger.faucetAddress);
      expect(await second.ledger.getBalances(alice.publicKey.toBase58())).toEqual({ sol: SOL, usdc: USDC, wgt: 0n });
      await second.ledger.submit(signedEarlier); // the blockhash issued before the restart is still valid
      second.db.close();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
