// payment_create's x402 payments judged by the real packages: headers decoded and schema-checked with @x402/core,
// verified (and settled) by @x402/svm's exact-scheme facilitators over LiteSVM with signatures checked; and its errors.
import { beforeAll, describe, expect, test } from "bun:test";
import { FailedTransactionMetadata, LiteSVM } from "litesvm";
import { ComputeBudgetProgram, Keypair, MessageV0, PublicKey, SystemProgram, Transaction, TransactionInstruction, TransactionMessage, VersionedTransaction } from "@solana/web3.js";
import { createTransferCheckedInstruction, createTransferInstruction } from "@solana/spl-token";
import { address } from "@solana/kit";
import { decodePaymentSignatureHeader } from "@x402/core/http";
import { PaymentPayloadV1Schema, PaymentPayloadV2Schema, PaymentRequirementsV1Schema, PaymentRequirementsV2Schema } from "@x402/core/schemas";
import type { PaymentPayload, PaymentRequirements } from "@x402/core/types";
import type { FacilitatorSvmSigner } from "@x402/svm";
import { ExactSvmScheme } from "@x402/svm/exact/facilitator";
import { ExactSvmSchemeV1 } from "@x402/svm/exact/v1/facilitator";
import type { Deps } from "../deps.ts";
import { AppError } from "../errors.ts";
import { decodeAddress, encodeBase58 } from "../lib/encoding.ts";
import { createCustodialWallet } from "../wallets/custody.ts";
import { signerFor } from "../wallets/signer.ts";
import { testDeps } from "../../test/helpers/deps.ts";
import { setMint, setSystemAccount, setTokenAccount } from "../../test/helpers/litesvm-accounts.ts";
import { MAX_AMOUNT_BASE_UNITS, type Ledger } from "./ledger.ts";
import { listAudit } from "./store.ts";
import { MEMO_PROGRAM, MEMO_V1_PROGRAM, TOKEN_PROGRAM, associatedTokenAddress, parseTransaction } from "./transactions.ts";
import { createPayment, type PaymentHeaderResult, type PaymentParams, type PaymentResult, type UnsignedPaymentResult, type X402Payload } from "./x402.ts";

const SOL = 1_000_000_000n;
const USDC = 1_000_000n;
const PRICE = 10_000n; // 0.01 USDC
const DEVNET_CAIP2 = "solana:EtWTRABZaYq6iMfeYKouRu166VU2xqa1";

type World = {
  deps: Deps;
  /** A custodial wallet with 1 SOL and 10 USDC. */
  payer: string;
  /** A connected (non-custodial) wallet with 10 USDC; its key stays with the test. */
  user: Keypair;
  /** Holds a USDC token account, as x402 requires. */
  recipient: string;
  mint: string;
};

/** The embedded ledger (localnet) with a custodial payer, a connected user and a recipient. */
async function ledgerWorld(deps?: Deps): Promise<World> {
  deps ??= (await testDeps()).deps;
  const payer = (await createCustodialWallet(deps)).address;
  await deps.ledger.airdrop(payer, { sol: SOL, usdc: 10n * USDC });
  const user = Keypair.generate();
  await deps.ledger.airdrop(user.publicKey.toBase58(), { usdc: 10n * USDC });
  const recipient = Keypair.generate().publicKey.toBase58();
  await deps.ledger.airdrop(recipient, { usdc: USDC });
  const mint = (await deps.ledger.tokens()).find((t) => t.key === "usdc")!.mint!;
  return { deps, payer, user, recipient, mint };
}

/** Outcome of a call that should fail: its code, the fields it names and the reason the catalogue promises. */
async function failure(p: Promise<unknown>): Promise<{ code: string; fields?: string[]; reason?: string }> {
  try {
    await p;
  } catch (err) {
    if (!(err instanceof AppError)) throw err;
    const details = (err.extra.details ?? {}) as { fields?: { field: string; message: string }[]; reason?: string };
    for (const f of details.fields ?? []) expect(f.message.length).toBeGreaterThan(0); // each named field says what is wrong
    const fields = details.fields?.map((f) => f.field);
    return { code: err.code, ...(fields ? { fields } : {}), ...(details.reason ? { reason: details.reason } : {}) };
  }
  return { code: "OK" };
}

function headerOf(result: PaymentResult): PaymentHeaderResult {
  if (!("header" in result)) throw new Error("expected a header result");
  return result;
}

function unsignedOf(result: PaymentResult): UnsignedPaymentResult {
  if (!("unsignedTransaction" in result)) throw new Error("expected an unsigned transaction");
  return result;
}

const b64 = (bytes: Uint8Array) => Buffer.from(bytes).toString("base64");
const fromB64 = (text: string) => new Uint8Array(Buffer.from(text, "base64"));

/** The same payload around other transaction bytes (what a tampering client would send). */
function withTransaction<P extends X402Payload>(payload: P, wire: Uint8Array): P {
  return { ...payload, payload: { transaction: b64(wire) } };
}

const v1Requirements = (world: World, feePayer: string, overrides: Record<string, unknown> = {}) => ({
  scheme: "exact",
  network: "solana-localnet",
  maxAmountRequired: PRICE.toString(),
  resource: "https://api.example.test/report",
  description: "one report",
  mimeType: "application/json",
  payTo: world.recipient,
  maxTimeoutSeconds: 60,
  asset: world.mint,
  extra: { feePayer },
  ...overrides,
});

const v2Requirements = (world: World, feePayer: string, overrides: Record<string, unknown> = {}) => ({
  scheme: "exact",
  network: "solana:localnet",
  amount: PRICE.toString(),
  asset: world.mint,
  payTo: world.recipient,
  maxTimeoutSeconds: 60,
  extra: { feePayer },
  ...overrides,
});

describe("the transaction", () => {
  test("v0, fee payer first with its slot empty, exactly limit / price / TransferChecked / memo, signed by the payer", async () => {
    const world = await ledgerWorld();
    const feePayer = Keypair.generate().publicKey.toBase58();
    const result = headerOf(await createPayment(world.deps, world.payer, { to: world.recipient, amount: PRICE, token: "usdc", feePayer }));
    expect(result.header).toBe("X-PAYMENT");
    expect(result.network).toBe("solana-localnet");
    expect(result.expiresAt).toBe(new Date(world.deps.clock.now() + 60_000).toISOString());
    expect(result).toMatchObject({ x402Version: 1, from: world.payer, to: world.recipient, token: "usdc", amount: "0.01", feePayer });
    expect(Object.keys(result.payload)).toEqual(["x402Version", "scheme", "network", "payload"]);

    const tx = parseTransaction(fromB64((result.payload.payload as { transaction: string }).transaction));
    expect(tx.version).toBe(0);
    expect(tx.recentBlockhash).toBe((await world.deps.ledger.latestBlockhash()).blockhash);
    expect(tx.accountKeys.slice(0, 2)).toEqual([feePayer, world.payer]);
    expect(tx.numRequiredSignatures).toBe(2);
    const key = (i: number) => tx.accountKeys[i];
    const [limit, price, transfer, memo] = tx.instructions;
    expect(tx.instructions).toHaveLength(4);
    expect(limit).toEqual({ program: "computeBudget", type: "setComputeUnitLimit", units: 20_000 });
    expect(price).toEqual({ program: "computeBudget", type: "setComputeUnitPrice", microLamports: 1n });
    if (transfer?.program !== "token" || transfer.type !== "transferChecked") throw new Error("third instruction is TransferChecked");
    expect([key(transfer.source), key(transfer.mint), key(transfer.destination), key(transfer.owner)]).toEqual([
      associatedTokenAddress(world.payer, world.mint),
      world.mint,
      associatedTokenAddress(world.recipient, world.mint),
      world.payer,
    ]);
    expect([transfer.amount, transfer.decimals]).toEqual([PRICE, 6]);
    expect(tx.invokedPrograms).toContain(TOKEN_PROGRAM);
    expect(tx.invokedPrograms).toContain(MEMO_PROGRAM);
    if (memo?.program !== "memo") throw new Error("fourth instruction is a memo");
    expect(memo.accounts).toEqual([]);
    expect(memo.text).toMatch(/^[0-9a-f]{32}$/); // none asked for: 16 random bytes in hex
    expect(result.memo).toBe(memo.text!);
    // No ATA creation, nothing else: the fee payer's slot stays empty for the facilitator.
    expect(tx.signatures[0]!.every((b) => b === 0)).toBe(true);
    expect(await world.deps.verifier.verify(decodeAddress(world.payer)!, tx.messageBytes, tx.signatures[1]!)).toBe(true);
    // Never submitted.
    expect((await world.deps.ledger.getBalances(world.recipient)).usdc).toBe(USDC);
  });

  test("a given memo is the memo; the random one comes from deps.random; X402_FEE_PAYER is the default fee payer", async () => {
    const configured = Keypair.generate().publicKey.toBase58();
    const { deps } = await testDeps({ X402_FEE_PAYER: configured }, { random: (n) => new Uint8Array(n).fill(0xab) });
    const world = await ledgerWorld(deps);
    const withMemo = headerOf(await createPayment(deps, world.payer, { to: world.recipient, amount: PRICE, token: "usdc", memo: "order 42" }));
    expect(withMemo.memo).toBe("order 42");
    expect(withMemo.feePayer).toBe(configured);
    const random = headerOf(await createPayment(deps, world.payer, { to: world.recipient, amount: PRICE, token: "usdc" }));
    expect(random.memo).toBe("ab".repeat(16));
    const tx = parseTransaction(fromB64((random.payload.payload as { transaction: string }).transaction));
    expect(tx.accountKeys[0]).toBe(configured);
    // The token named in any case, as wallet_transfer takes it.
    expect(headerOf(await createPayment(deps, world.payer, { to: world.recipient, amount: PRICE, token: "USDC" })).token).toBe("usdc");
  });
});

test("on mainnet every payment handed out is in the audit table (as unknown: the facilitator sends it); elsewhere none is", async () => {
  const world = await ledgerWorld();
  const feePayer = Keypair.generate().publicKey.toBase58();
  const onMainnet: Deps = { ...world.deps, config: { ...world.deps.config, network: "mainnet" } };
  // Rows name the payer's signature: the transaction's own id is the fee payer's, which the facilitator adds.
  const signatureOf = (r: PaymentHeaderResult) => encodeBase58(parseTransaction(fromB64((r.payload.payload as { transaction: string }).transaction)).signatures[1]!);
  // The custodial wallet's payment, signed here...
  const custodial = headerOf(await createPayment(onMainnet, world.payer, { to: world.recipient, amount: PRICE, token: "usdc", feePayer }));
  const [row] = await listAudit(world.deps.db, signatureOf(custodial));
  expect(row).toMatchObject({ network: "mainnet", outcome: "unknown", errorCode: null, feePayer: custodial.feePayer });
  // Between the two wallets (the payment's token accounts are known), of the token the service names.
  const usdc = (await world.deps.ledger.tokens()).find((t) => t.key === "usdc")!;
  expect(JSON.parse(row!.transfers)).toEqual([{ token: "usdc", mint: usdc.mint, from: world.payer, to: world.recipient, amount: PRICE.toString(), decimals: usdc.decimals }]);
  // ...and a connected wallet's, signed by its owner and passed on as the header.
  const userAddress = world.user.publicKey.toBase58();
  const unsigned = unsignedOf(await createPayment(onMainnet, userAddress, { to: world.recipient, amount: PRICE, token: "usdc", feePayer }));
  const tx = VersionedTransaction.deserialize(fromB64(unsigned.unsignedTransaction));
  tx.sign([world.user]);
  const passed = headerOf(await createPayment(onMainnet, userAddress, { to: world.recipient, amount: PRICE, token: "usdc", feePayer, signedTransaction: Buffer.from(tx.serialize()).toString("base64") }));
  expect(await listAudit(world.deps.db, signatureOf(passed))).toMatchObject([{ outcome: "unknown", network: "mainnet" }]);
  // Off mainnet nothing is logged.
  const local = headerOf(await createPayment(world.deps, world.payer, { to: world.recipient, amount: PRICE, token: "usdc", feePayer }));
  expect(await listAudit(world.deps.db, signatureOf(local))).toEqual([]);
});

describe("compatibility with @x402/core and @x402/svm (facilitator verify over LiteSVM, signatures on)", () => {
  let world: World;
  let svm: LiteSVM;
  const feePayer = Keypair.generate();
  const feePayerAddress = feePayer.publicKey.toBase58();
  let signer: FacilitatorSvmSigner;

  /** Puts a token account's balance into LiteSVM, as the embedded ledger has it (or as told). */
  function loadTokenAccount(owner: string, amount: bigint): void {
    setTokenAccount(svm, new PublicKey(associatedTokenAddress(owner, world.mint)), { mint: new PublicKey(world.mint), owner: new PublicKey(owner), amount });
  }

  /** Signs the fee payer's slot with the real fee payer key, as the facilitator does when it settles. */
  function signAsFeePayer(transaction: string): VersionedTransaction {
    const tx = VersionedTransaction.deserialize(fromB64(transaction));
    tx.sign([feePayer]);
    return tx;
  }

  beforeAll(async () => {
    svm = new LiteSVM(); // signature verification and blockhash checks on
    const base = await ledgerWorld();
    // The payment must name a blockhash LiteSVM knows; everything else is the embedded ledger's.
    const ledger: Ledger = {
      ...base.deps.ledger,
      latestBlockhash: async () => ({ blockhash: svm.latestBlockhash(), lastValidBlockHeight: 0 }),
      blockhashValid: async (blockhash) => blockhash === svm.latestBlockhash(),
    };
    world = { ...base, deps: { ...base.deps, ledger } };
    setMint(svm, new PublicKey(world.mint), { decimals: 6, supply: 1_000_000n * USDC, authority: Keypair.generate().publicKey });
    for (const owner of [world.payer, world.user.publicKey.toBase58(), world.recipient]) {
      loadTokenAccount(owner, (await base.deps.ledger.getBalances(owner)).usdc!);
    }
    setSystemAccount(svm, feePayer.publicKey, SOL);
    signer = {
      getAddresses: () => [address(feePayerAddress)],
      async signTransaction(transaction, payer) {
        if (payer !== feePayerAddress) throw new Error(`no key for ${payer}`);
        return b64(signAsFeePayer(transaction).serialize());
      },
      // Every signature is checked by the runtime: the payer's as sent, the fee payer's as settle would add it.
      async simulateTransaction(transaction) {
        const result = svm.simulateTransaction(signAsFeePayer(transaction));
        if (result instanceof FailedTransactionMetadata) throw new Error(`simulation failed: ${result.toString()}`);
      },
      async sendTransaction(transaction) {
        const result = svm.sendTransaction(VersionedTransaction.deserialize(fromB64(transaction)));
        if (result instanceof FailedTransactionMetadata) throw new Error(`send failed: ${result.toString()}`);
        return encodeBase58(result.signature());
      },
      async confirmTransaction() {},
    };
  });

  const asPayload = (payload: unknown) => payload as PaymentPayload;
  const asRequirements = (requirements: unknown) => requirements as PaymentRequirements;

  test("v1: X-PAYMENT decodes, passes the v1 schema, and ExactSvmSchemeV1.verify accepts it", async () => {
    const requirements = v1Requirements(world, feePayerAddress);
    PaymentRequirementsV1Schema.parse(requirements);
    const result = headerOf(await createPayment(world.deps, world.payer, { requirements }));
    expect(result.header).toBe("X-PAYMENT");
    const decoded = decodePaymentSignatureHeader(result.value);
    expect(decoded).toEqual(result.payload as PaymentPayload);
    expect(PaymentPayloadV1Schema.parse(decoded)).toEqual(result.payload as never);
    const facilitator = new ExactSvmSchemeV1(signer);
    expect(await facilitator.verify(decoded, asRequirements(requirements))).toEqual({ isValid: true, invalidReason: undefined, payer: world.payer });
  });

  test("v1: verify rejects other amount, recipient or mint, and a forged or tampered signature", async () => {
    const requirements = v1Requirements(world, feePayerAddress);
    const result = headerOf(await createPayment(world.deps, world.payer, { requirements }));
    const facilitator = new ExactSvmSchemeV1(signer);
    const verify = async (payload: unknown, req: unknown) => (await facilitator.verify(asPayload(payload), asRequirements(req))).invalidReason;
    expect(await verify(result.payload, { ...requirements, maxAmountRequired: (PRICE + 1n).toString() })).toBe("invalid_exact_svm_payload_amount_mismatch");
    expect(await verify(result.payload, { ...requirements, payTo: Keypair.generate().publicKey.toBase58() })).toBe("invalid_exact_svm_payload_recipient_mismatch");
    expect(await verify(result.payload, { ...requirements, asset: Keypair.generate().publicKey.toBase58() })).toBe("invalid_exact_svm_payload_mint_mismatch");
    const wire = fromB64((result.payload.payload as { transaction: string }).transaction);
    const forged = VersionedTransaction.deserialize(wire);
    forged.signatures[1]![0]! ^= 1;
    expect(await verify(withTransaction(result.payload, forged.serialize()), requirements)).toBe("invalid_exact_svm_payload_signature_invalid");
  });

  test("v2: PAYMENT-SIGNATURE decodes, passes the v2 schema with `accepted` as given, and ExactSvmScheme.verify accepts it", async () => {
    const requirements = v2Requirements(world, feePayerAddress);
    PaymentRequirementsV2Schema.parse(requirements);
    const result = headerOf(await createPayment(world.deps, world.payer, { requirements, x402Version: 2 }));
    expect(result.header).toBe("PAYMENT-SIGNATURE");
    expect(result.network).toBe("solana:localnet");
    const decoded = decodePaymentSignatureHeader(result.value);
    expect(decoded).toEqual(result.payload as PaymentPayload);
    expect(decoded.accepted).toEqual(requirements as PaymentRequirements);
    PaymentPayloadV2Schema.parse(decoded);
    const facilitator = new ExactSvmScheme(signer);
    expect(await facilitator.verify(decoded, asRequirements(requirements))).toEqual({ isValid: true, invalidReason: undefined, payer: world.payer });
  });

  test("v2: verify rejects other amount, recipient or mint, a tampered amount (re-signed or not) and a forged signature", async () => {
    const requirements = v2Requirements(world, feePayerAddress);
    const result = headerOf(await createPayment(world.deps, world.payer, { requirements }));
    const facilitator = new ExactSvmScheme(signer);
    const verify = async (payload: unknown, req: unknown) => (await facilitator.verify(asPayload(payload), asRequirements(req))).invalidReason;
    expect(await verify(result.payload, { ...requirements, amount: (PRICE * 2n).toString() })).toBe("invalid_exact_svm_payload_amount_mismatch");
    expect(await verify(result.payload, { ...requirements, payTo: Keypair.generate().publicKey.toBase58() })).toBe("invalid_exact_svm_payload_recipient_mismatch");
    expect(await verify(result.payload, { ...requirements, asset: Keypair.generate().publicKey.toBase58() })).toBe("invalid_exact_svm_payload_mint_mismatch");

    const wire = fromB64((result.payload.payload as { transaction: string }).transaction);
    const cheaper = VersionedTransaction.deserialize(wire);
    cheaper.message.compiledInstructions[2]!.data[1] = 0x01; // TransferChecked's amount, little-endian: 10,000 → 9,985
    const cheaperWire = cheaper.serialize();
    // The old signature no longer covers the message...
    expect(await verify(withTransaction(result.payload, cheaperWire), requirements)).toBe("invalid_exact_svm_payload_signature_invalid");
    // ...and signed again by the payer's own key, it is still the wrong amount.
    const custodian = await signerFor(world.deps, world.payer);
    if (custodian.kind !== "custodial") throw new Error("the payer is custodial");
    expect(await verify(withTransaction(result.payload, await custodian.sign(cheaperWire)), requirements)).toBe("invalid_exact_svm_payload_amount_mismatch");

    const forged = VersionedTransaction.deserialize(wire);
    forged.signatures[1] = new Uint8Array(64).fill(7);
    expect(await verify(withTransaction(result.payload, forged.serialize()), requirements)).toBe("invalid_exact_svm_payload_signature_invalid");
  });

  test("v2 without requirements: `accepted` is written here and verify accepts the payment against it", async () => {
    const result = headerOf(
      await createPayment(world.deps, world.payer, { to: world.recipient, amount: PRICE, token: "usdc", feePayer: feePayerAddress, x402Version: 2 }),
    );
    const decoded = PaymentPayloadV2Schema.parse(decodePaymentSignatureHeader(result.value));
    expect(decoded.accepted).toEqual({
      scheme: "exact",
      network: "solana:localnet",
      amount: "10000",
      asset: world.mint,
      payTo: world.recipient,
      maxTimeoutSeconds: 60,
      extra: { feePayer: feePayerAddress },
    });
    const facilitator = new ExactSvmScheme(signer);
    expect((await facilitator.verify(decodePaymentSignatureHeader(result.value), decoded.accepted as PaymentRequirements)).isValid).toBe(true);
  });

  test("the test signer is no stub: simulation checks signatures and balances in the runtime", async () => {
    const requirements = v2Requirements(world, feePayerAddress);
    const result = headerOf(await createPayment(world.deps, world.payer, { requirements }));
    const transaction = (result.payload.payload as { transaction: string }).transaction;
    await signer.simulateTransaction(transaction, "solana:localnet");
    // Straight to the runtime, past the facilitator's own signature check: a forged payer signature fails there.
    const forged = VersionedTransaction.deserialize(fromB64(transaction));
    forged.signatures[1]![5]! ^= 0x10;
    await expect(signer.simulateTransaction(b64(forged.serialize()), "solana:localnet")).rejects.toThrow(/SignatureFailure/);
    // A payer who no longer holds the amount (LiteSVM's copy drained) fails the facilitator's simulation.
    loadTokenAccount(world.payer, PRICE - 1n);
    try {
      const verdict = await new ExactSvmScheme(signer).verify(result.payload as PaymentPayload, asRequirements(requirements));
      expect(verdict.invalidReason).toBe("invalid_exact_svm_transaction_simulation_failed");
    } finally {
      loadTokenAccount(world.payer, (await world.deps.ledger.getBalances(world.payer)).usdc!);
    }
  });

  test("v2 settles through the facilitator: the fee payer signs, LiteSVM executes, the recipient is paid", async () => {
    const requirements = v2Requirements(world, feePayerAddress, { amount: "25000" });
    const result = headerOf(await createPayment(world.deps, world.payer, { requirements }));
    const destination = new PublicKey(associatedTokenAddress(world.recipient, world.mint));
    const before = svm.getAccount(destination)!.data;
    const settled = await new ExactSvmScheme(signer).settle(result.payload as PaymentPayload, asRequirements(requirements));
    expect(settled).toMatchObject({ success: true, network: "solana:localnet", payer: world.payer });
    const amountOf = (data: Uint8Array) => Buffer.from(data).readBigUInt64LE(64);
    expect(amountOf(svm.getAccount(destination)!.data) - amountOf(before)).toBe(25_000n);
  });

  test("a connected wallet: unsigned transaction, its own signature, then a header the facilitator accepts", async () => {
    const requirements = v2Requirements(world, feePayerAddress);
    const params: PaymentParams = { requirements };
    const user = world.user.publicKey.toBase58();
    const first = unsignedOf(await createPayment(world.deps, user, params));
    expect("header" in first).toBe(false);
    expect(first).toMatchObject({ x402Version: 2, network: "solana:localnet", from: user, amount: "0.01", feePayer: feePayerAddress });
    const tx = VersionedTransaction.deserialize(fromB64(first.unsignedTransaction));
    expect(tx.signatures.every((s) => s.every((b) => b === 0))).toBe(true);
    tx.sign([world.user]);
    const signedTransaction = b64(tx.serialize());
    const result = headerOf(await createPayment(world.deps, user, { ...params, signedTransaction }));
    expect(result.header).toBe("PAYMENT-SIGNATURE");
    expect((result.payload.payload as { transaction: string }).transaction).toBe(signedTransaction);
    expect(result.memo).toBe(first.memo);
    const verdict = await new ExactSvmScheme(signer).verify(decodePaymentSignatureHeader(result.value), asRequirements(requirements));
    expect(verdict).toEqual({ isValid: true, invalidReason: undefined, payer: user });
  });
});

describe("errors", () => {
  let world: World;
  const feePayer = Keypair.generate().publicKey.toBase58();
  beforeAll(async () => {
    world = await ledgerWorld();
  });
  const pay = (params: PaymentParams, payer = world.payer) => failure(createPayment(world.deps, payer, params));
  const usdcParams = (): PaymentParams => ({ to: world.recipient, amount: PRICE, token: "usdc", feePayer });

  test("sol is NOT_SUPPORTED (the exact scheme moves SPL tokens); an unknown token is VALIDATION_ERROR", async () => {
    expect(await pay({ ...usdcParams(), token: "sol" })).toEqual({ code: "NOT_SUPPORTED" });
    expect(await pay({ ...usdcParams(), token: "doge" })).toEqual({ code: "VALIDATION_ERROR", fields: ["token"] });
  });

  test("a service token without a mint is NOT_SUPPORTED", async () => {
    const ledger: Ledger = {
      ...world.deps.ledger,
      tokens: async () => [...(await world.deps.ledger.tokens()).filter((t) => t.key !== "wgt"), { key: "wgt", kind: "spl", decimals: 6, mint: null }],
    };
    expect(await failure(createPayment({ ...world.deps, ledger }, world.payer, { ...usdcParams(), token: "wgt" }))).toEqual({ code: "NOT_SUPPORTED" });
  });

  test("an amount in whole tokens is read with the decimals of token, or of the requirements' asset when token is absent", async () => {
    const requirements = v1Requirements(world, feePayer); // 0.01 USDC
    for (const amount of ["0.01", 0.01, PRICE]) expect(await pay({ requirements, amount })).toEqual({ code: "OK" });
    expect(await pay({ requirements, amount: "0.02" })).toEqual({ code: "VALIDATION_ERROR", fields: ["amount"] }); // disagrees
    expect(await pay({ requirements, amount: "0.0100001" })).toEqual({ code: "VALIDATION_ERROR", fields: ["amount"] }); // 7 decimals
    expect(await pay({ ...usdcParams(), amount: "0.01" })).toEqual({ code: "OK" });
    expect(await pay({ ...usdcParams(), amount: "1e-2" })).toEqual({ code: "VALIDATION_ERROR", fields: ["amount"] });
  });

  test("a memo the transaction could carry only altered (a lone surrogate has no UTF-8 form) is VALIDATION_ERROR; an emoji is fine", async () => {
    expect(await pay({ ...usdcParams(), memo: "inv-\udc00" })).toEqual({ code: "VALIDATION_ERROR", fields: ["memo"] });
    expect(await pay({ ...usdcParams(), memo: "inv-\ud83d\ude00" })).toEqual({ code: "OK" });
  });

  test("without requirements, feePayer is required (no X402_FEE_PAYER here)", async () => {
    expect(await pay({ to: world.recipient, amount: PRICE, token: "usdc" })).toEqual({ code: "VALIDATION_ERROR", fields: ["feePayer"] });
  });

  test("requirements that disagree with a param name the param", async () => {
    const requirements = v1Requirements(world, feePayer, { extra: { feePayer, memo: "inv-1" } });
    expect(await pay({ requirements })).toEqual({ code: "OK" });
    const other = Keypair.generate().publicKey.toBase58();
    expect(await pay({ requirements, to: other })).toEqual({ code: "VALIDATION_ERROR", fields: ["to"] });
    expect(await pay({ requirements, amount: PRICE + 1n })).toEqual({ code: "VALIDATION_ERROR", fields: ["amount"] });
    expect(await pay({ requirements, token: "wgt" })).toEqual({ code: "VALIDATION_ERROR", fields: ["token"] });
    expect(await pay({ requirements, feePayer: other })).toEqual({ code: "VALIDATION_ERROR", fields: ["feePayer"] });
    expect(await pay({ requirements, memo: "inv-2" })).toEqual({ code: "VALIDATION_ERROR", fields: ["memo"] });
    expect(await pay({ requirements, x402Version: 2 })).toEqual({ code: "VALIDATION_ERROR", fields: ["x402Version"] });
    // Agreeing params are fine.
    expect(await pay({ requirements, to: world.recipient, amount: PRICE, token: "usdc", feePayer, memo: "inv-1", x402Version: 1 })).toEqual({ code: "OK" });
  });

  test("requirements of another network, or malformed, are VALIDATION_ERROR; another scheme is NOT_SUPPORTED", async () => {
    const field = ["requirements.network"];
    expect(await pay({ requirements: v1Requirements(world, feePayer, { network: "solana-devnet" }) })).toEqual({ code: "VALIDATION_ERROR", fields: field });
    expect(await pay({ requirements: v1Requirements(world, feePayer, { network: "solana" }) })).toEqual({ code: "VALIDATION_ERROR", fields: field });
    expect(await pay({ requirements: v2Requirements(world, feePayer, { network: DEVNET_CAIP2 }) })).toEqual({ code: "VALIDATION_ERROR", fields: field });
    expect(await pay({ requirements: v2Requirements(world, feePayer, { network: "solana-localnet" }) })).toEqual({ code: "VALIDATION_ERROR", fields: field });
    expect(await pay({ requirements: v2Requirements(world, feePayer, { amount: "0.01" }) })).toEqual({ code: "VALIDATION_ERROR", fields: ["requirements.amount"] });
    // What was sent is quoted cut by characters: never half an emoji's pair.
    const quoted = await createPayment(world.deps, world.payer, { requirements: v2Requirements(world, feePayer, { amount: `${"1".repeat(39)}\u{1F600}x` }) }).catch((err: AppError) => err.message);
    expect(quoted).toContain(`got "${"1".repeat(39)}\u{1F600}"`);
    expect(await pay({ requirements: { x402Version: 2, accepts: [v2Requirements(world, feePayer)] } })).toEqual({ code: "VALIDATION_ERROR", fields: ["requirements"] });
    expect(await pay({ requirements: v2Requirements(world, feePayer, { scheme: "upto" }) })).toEqual({ code: "NOT_SUPPORTED" });
  });

  test("a recipient without a token account, a payer short of funds, the payer as fee payer", async () => {
    expect(await pay({ ...usdcParams(), to: Keypair.generate().publicKey.toBase58() })).toEqual({ code: "VALIDATION_ERROR", fields: ["to"] });
    expect(await pay({ ...usdcParams(), amount: 11n * USDC })).toEqual({ code: "INSUFFICIENT_FUNDS" });
    expect(await pay({ ...usdcParams(), feePayer: world.payer })).toEqual({ code: "VALIDATION_ERROR", fields: ["feePayer"] });
    expect(await pay({ ...usdcParams(), to: "not-an-address" })).toEqual({ code: "INVALID_ADDRESS", fields: ["to"] });
  });

  test("a payer holding exactly the amount can pay it: the facilitator pays the fee, so one base unit more is INSUFFICIENT_FUNDS", async () => {
    const exact = (await createCustodialWallet(world.deps)).address;
    await world.deps.ledger.airdrop(exact, { usdc: PRICE });
    expect(await pay(usdcParams(), exact)).toEqual({ code: "OK" });
    expect(await pay({ ...usdcParams(), amount: PRICE + 1n }, exact)).toEqual({ code: "INSUFFICIENT_FUNDS" });
  });

  test("without a token param, the requirements' asset decides the token: another known mint pays in it, an unknown one is NOT_SUPPORTED", async () => {
    const wgt = (await world.deps.ledger.tokens()).find((t) => t.key === "wgt")!;
    const holder = (await createCustodialWallet(world.deps)).address;
    await world.deps.ledger.airdrop(holder, { token: 10n * USDC });
    await world.deps.ledger.airdrop(world.recipient, { token: 1n });
    const paid = headerOf(await createPayment(world.deps, holder, { requirements: v1Requirements(world, feePayer, { asset: wgt.mint }) }));
    expect([paid.token, paid.amount]).toEqual(["wgt", "0.01"]);
    // A mint this service does not pay with is never read as one it does (its amount in another token's units).
    const unknownMint = Keypair.generate().publicKey.toBase58();
    expect(await pay({ requirements: v1Requirements(world, feePayer, { asset: unknownMint, maxAmountRequired: "1000000000" }) })).toEqual({ code: "NOT_SUPPORTED" });
  });

  test("a requirements.asset or payTo that is not an address is INVALID_ADDRESS naming it, with or without a token param", async () => {
    expect(await pay({ requirements: v1Requirements(world, feePayer, { asset: "not-an-address" }) })).toEqual({ code: "INVALID_ADDRESS", fields: ["requirements.asset"] });
    expect(await pay({ requirements: v1Requirements(world, feePayer, { asset: "not-an-address" }), token: "usdc" })).toEqual({ code: "INVALID_ADDRESS", fields: ["requirements.asset"] });
    expect(await pay({ requirements: v2Requirements(world, feePayer, { payTo: "not-an-address" }) })).toEqual({ code: "INVALID_ADDRESS", fields: ["requirements.payTo"] });
  });

  test("a recipient that is no wallet (a token account, a mint), even with a token account of its own, is VALIDATION_ERROR on to or requirements.payTo", async () => {
    const tokenAccount = associatedTokenAddress(world.recipient, world.mint);
    // What a pasted token-account or mint address would pay into: a token account derived for it, which nobody can sign for.
    for (const to of [tokenAccount, world.mint]) await world.deps.ledger.airdrop(to, { usdc: USDC });
    for (const to of [tokenAccount, world.mint]) {
      expect(await pay({ ...usdcParams(), to })).toEqual({ code: "VALIDATION_ERROR", fields: ["to"] });
      expect(await pay({ requirements: v1Requirements(world, feePayer, { payTo: to }) })).toEqual({ code: "VALIDATION_ERROR", fields: ["requirements.payTo"] });
    }
  });

  test("a connected wallet's signedTransaction must be the same payment (PAYMENT_MISMATCH) and carry its valid signature (INVALID_SIGNATURE)", async () => {
    const user = world.user.publicKey.toBase58();
    const params: PaymentParams = { to: world.recipient, amount: PRICE, token: "usdc", feePayer };
    const sign = async (p: PaymentParams) => {
      const tx = VersionedTransaction.deserialize(fromB64(unsignedOf(await createPayment(world.deps, user, p)).unsignedTransaction));
      tx.sign([world.user]);
      return tx;
    };
    const good = await sign(params);
    expect(await pay({ ...params, signedTransaction: b64(good.serialize()) }, user)).toEqual({ code: "OK" });

    const signedFor = async (p: PaymentParams) => b64((await sign(p)).serialize());
    expect(await pay({ ...params, signedTransaction: await signedFor({ ...params, amount: PRICE + 1n }) }, user)).toEqual({
      code: "PAYMENT_MISMATCH",
      fields: ["signedTransaction"],
      reason: "amount",
    });
    const elsewhere = Keypair.generate().publicKey.toBase58();
    await world.deps.ledger.airdrop(elsewhere, { usdc: USDC });
    expect(await pay({ ...params, signedTransaction: await signedFor({ ...params, to: elsewhere }) }, user)).toEqual({
      code: "PAYMENT_MISMATCH",
      fields: ["signedTransaction"],
      reason: "to",
    });
    expect(await pay({ ...params, signedTransaction: await signedFor({ ...params, feePayer: elsewhere }) }, user)).toEqual({
      code: "PAYMENT_MISMATCH",
      fields: ["signedTransaction"],
      reason: "feePayer",
    });
    expect(await pay({ ...params, memo: "asked", signedTransaction: await signedFor({ ...params, memo: "other" }) }, user)).toEqual({
      code: "PAYMENT_MISMATCH",
      fields: ["signedTransaction"],
      reason: "memo",
    });
    expect(await pay({ ...params, signedTransaction: "not base64!" }, user)).toEqual({ code: "VALIDATION_ERROR", fields: ["signedTransaction"] });

    const flipped = VersionedTransaction.deserialize(good.serialize());
    flipped.signatures[1]![0]! ^= 1;
    expect(await pay({ ...params, signedTransaction: b64(flipped.serialize()) }, user)).toEqual({ code: "INVALID_SIGNATURE" });
    // Something in the fee payer's slot (the facilitator's to sign): refused, not passed on.
    const filled = VersionedTransaction.deserialize(good.serialize());
    filled.signatures[0] = new Uint8Array(64).fill(7);
    expect(await pay({ ...params, signedTransaction: b64(filled.serialize()) }, user)).toEqual({ code: "VALIDATION_ERROR", fields: ["signedTransaction"], reason: "fee_payer_signature" });
    const unsigned = unsignedOf(await createPayment(world.deps, user, params)).unsignedTransaction;
    expect(await pay({ ...params, signedTransaction: unsigned }, user)).toEqual({ code: "INVALID_SIGNATURE" });
    // Signed by the payer, but on a blockhash the ledger does not know: it could never settle.
    const stale = VersionedTransaction.deserialize(fromB64(unsigned));
    stale.message.recentBlockhash = Keypair.generate().publicKey.toBase58();
    stale.sign([world.user]);
    expect(await pay({ ...params, signedTransaction: b64(stale.serialize()) }, user)).toEqual({ code: "TRANSACTION_REJECTED", reason: "blockhash_expired" });
  });

  // The params and the requirements' shape.

  test("without requirements, to, amount and token are each required", async () => {
    expect(await pay({ amount: PRICE, token: "usdc", feePayer })).toEqual({ code: "VALIDATION_ERROR", fields: ["to"] });
    expect(await pay({ to: world.recipient, token: "usdc", feePayer })).toEqual({ code: "VALIDATION_ERROR", fields: ["amount"] });
    expect(await pay({ to: world.recipient, amount: PRICE, feePayer })).toEqual({ code: "VALIDATION_ERROR", fields: ["token"] });
  });

  test("an amount of 0 (or past 2^63-1 base units) is VALIDATION_ERROR, in the requirements and in the params", async () => {
    expect(await pay({ requirements: v2Requirements(world, feePayer, { amount: "0" }) })).toEqual({ code: "VALIDATION_ERROR", fields: ["requirements.amount"] });
    expect(await pay({ requirements: v1Requirements(world, feePayer, { maxAmountRequired: "0" }) })).toEqual({
      code: "VALIDATION_ERROR",
      fields: ["requirements.maxAmountRequired"],
    });
    expect(await pay({ requirements: v2Requirements(world, feePayer, { amount: (MAX_AMOUNT_BASE_UNITS + 1n).toString() }) })).toEqual({
      code: "VALIDATION_ERROR",
      fields: ["requirements.amount"],
    });
    // A bigint is taken as base units as it is, so only the transfer-amount check stands between 0 and a payment of nothing.
    expect(await pay({ ...usdcParams(), amount: 0n })).toEqual({ code: "VALIDATION_ERROR", fields: ["amount"] });
    expect(await pay({ ...usdcParams(), amount: "0" })).toEqual({ code: "VALIDATION_ERROR", fields: ["amount"] });
    expect(await pay({ ...usdcParams(), amount: 1n })).toEqual({ code: "OK" });
  });

  test("a memo is at most 256 bytes (x402's limit), counted in UTF-8 bytes, from the params or the requirements", async () => {
    expect(await pay({ ...usdcParams(), memo: "\u00e9".repeat(128) })).toEqual({ code: "OK" }); // 256 bytes
    expect(await pay({ ...usdcParams(), memo: "\u00e9".repeat(129) })).toEqual({ code: "VALIDATION_ERROR", fields: ["memo"] }); // 129 characters, 258 bytes
    expect(await pay({ ...usdcParams(), memo: "x".repeat(257) })).toEqual({ code: "VALIDATION_ERROR", fields: ["memo"] });
    expect(await pay({ requirements: v1Requirements(world, feePayer, { extra: { feePayer, memo: "x".repeat(257) } }) })).toEqual({
      code: "VALIDATION_ERROR",
      fields: ["requirements.extra.memo"], // named where it came from
    });
    expect(await pay({ requirements: v1Requirements(world, feePayer, { extra: { feePayer: "not-an-address" } }) })).toEqual({
      code: "INVALID_ADDRESS",
      fields: ["requirements.extra.feePayer"],
    });
  });

  test("requirements that are not one entry of accepts, or not JSON, or carry no amount field, are VALIDATION_ERROR on requirements", async () => {
    expect(await pay({ requirements: "accepts[0]" })).toEqual({ code: "VALIDATION_ERROR", fields: ["requirements"] });
    expect(await pay({ requirements: null })).toEqual({ code: "VALIDATION_ERROR", fields: ["requirements"] });
    // The whole 402 answer is told apart from an entry (the other checks would only say no amount is there).
    const answer = createPayment(world.deps, world.payer, { requirements: { x402Version: 1, accepts: [v1Requirements(world, feePayer)] } });
    expect(await answer.catch((err: AppError) => err.message)).toContain("not the whole 402 answer");
    expect(await pay({ requirements: v2Requirements(world, feePayer, { extra: { feePayer, nonce: 1n } }) })).toEqual({ code: "VALIDATION_ERROR", fields: ["requirements"] });
    const { maxAmountRequired: _, ...noAmount } = v1Requirements(world, feePayer);
    expect(await pay({ requirements: noAmount })).toEqual({ code: "VALIDATION_ERROR", fields: ["requirements"] });
  });

  test("each required field of the requirements must be a non-empty string; v2's maxTimeoutSeconds a positive number", async () => {
    const { scheme: _, ...noScheme } = v1Requirements(world, feePayer);
    expect(await pay({ requirements: noScheme })).toEqual({ code: "VALIDATION_ERROR", fields: ["requirements.scheme"] });
    expect(await pay({ requirements: v1Requirements(world, feePayer, { maxAmountRequired: Number(PRICE) }) })).toEqual({
      code: "VALIDATION_ERROR",
      fields: ["requirements.maxAmountRequired"],
    });
    expect(await pay({ requirements: v2Requirements(world, feePayer, { amount: Number(PRICE) }) })).toEqual({ code: "VALIDATION_ERROR", fields: ["requirements.amount"] });
    expect(await pay({ requirements: v1Requirements(world, feePayer, { payTo: 42 }) })).toEqual({ code: "VALIDATION_ERROR", fields: ["requirements.payTo"] });
    expect(await pay({ requirements: v2Requirements(world, feePayer, { asset: "" }) })).toEqual({ code: "VALIDATION_ERROR", fields: ["requirements.asset"] });
    expect(await pay({ requirements: v2Requirements(world, feePayer, { network: null }) })).toEqual({ code: "VALIDATION_ERROR", fields: ["requirements.network"] });
    for (const maxTimeoutSeconds of [undefined, 0, -1, "60"]) {
      expect(await pay({ requirements: v2Requirements(world, feePayer, { maxTimeoutSeconds }) })).toEqual({
        code: "VALIDATION_ERROR",
        fields: ["requirements.maxTimeoutSeconds"],
      });
    }
  });

  test("requirements.extra must be an object, its feePayer an address string and its memo a string; an empty memo is no memo", async () => {
    // feePayer is given as a param too, so only the extra's shape is in question.
    for (const extra of ["fee", [], 7]) {
      expect(await pay({ requirements: v1Requirements(world, feePayer, { extra }), feePayer })).toEqual({ code: "VALIDATION_ERROR", fields: ["requirements.extra"] });
    }
    expect(await pay({ requirements: v1Requirements(world, feePayer, { extra: null }), feePayer })).toEqual({ code: "OK" });
    expect(await pay({ requirements: v1Requirements(world, feePayer, { extra: { feePayer: 42 } }), feePayer })).toEqual({
      code: "VALIDATION_ERROR",
      fields: ["requirements.extra.feePayer"],
    });
    expect(await pay({ requirements: v1Requirements(world, feePayer, { extra: { feePayer, memo: 42 } }) })).toEqual({
      code: "VALIDATION_ERROR",
      fields: ["requirements.extra.memo"],
    });
    const noMemo = headerOf(await createPayment(world.deps, world.payer, { requirements: v1Requirements(world, feePayer, { extra: { feePayer, memo: "" } }) }));
    expect(noMemo.memo).toMatch(/^[0-9a-f]{32}$/);
    const mine = headerOf(await createPayment(world.deps, world.payer, { requirements: v1Requirements(world, feePayer, { extra: { feePayer, memo: "" } }), memo: "mine" }));
    expect(mine.memo).toBe("mine");
  });
});

describe("a connected wallet's signedTransaction: each difference named by details.reason, and the bytes compared", () => {
  let world: World;
  const feePayer = Keypair.generate().publicKey.toBase58();
  const MEMO = "inv-9";
  // No memo asked for: any memo the wallet signed is taken, so only the part a test changes differs.
  let params: PaymentParams;
  beforeAll(async () => {
    world = await ledgerWorld();
    params = { to: world.recipient, amount: PRICE, token: "usdc", feePayer };
  });
  const key = (text: string) => new PublicKey(text);
  const userAddress = () => world.user.publicKey.toBase58();
  const memoIx = (text = MEMO, programId = MEMO_PROGRAM) => new TransactionInstruction({ programId: key(programId), keys: [], data: Buffer.from(text, "utf8") });

  /** The payment's four instructions as payment_create builds them, with what `change` names changed. */
  function paymentIxs(change: { units?: number; microLamports?: bigint; mint?: string; source?: string; decimals?: number; fourth?: TransactionInstruction } = {}): TransactionInstruction[] {
    return [
      ComputeBudgetProgram.setComputeUnitLimit({ units: change.units ?? 20_000 }),
      ComputeBudgetProgram.setComputeUnitPrice({ microLamports: change.microLamports ?? 1n }),
      createTransferCheckedInstruction(
        key(change.source ?? associatedTokenAddress(userAddress(), world.mint)),
        key(change.mint ?? world.mint),
        key(associatedTokenAddress(world.recipient, world.mint)),
        world.user.publicKey,
        PRICE,
        change.decimals ?? 6,
      ),
      change.fourth ?? memoIx(),
    ];
  }

  /** A v0 message of `ixs` paid by the fee payer on the ledger's blockhash, optionally rewritten, signed by the user only. */
  async function signedV0(ixs: TransactionInstruction[], rewrite: (message: MessageV0) => MessageV0 = (m) => m): Promise<string> {
    const { blockhash } = await world.deps.ledger.latestBlockhash();
    const tx = new VersionedTransaction(rewrite(new TransactionMessage({ payerKey: key(feePayer), recentBlockhash: blockhash, instructions: ixs }).compileToV0Message()));
    tx.sign([world.user]);
    return b64(tx.serialize());
  }

  const submitted = (signedTransaction: string) => failure(createPayment(world.deps, userAddress(), { ...params, signedTransaction }));
  const mismatch = (reason: string) => ({ code: "PAYMENT_MISMATCH", fields: ["signedTransaction"], reason });

  test("the fixture is the payment itself: signed as built here, it is taken", async () => {
    expect(await submitted(await signedV0(paymentIxs()))).toEqual({ code: "OK" });
  });

  test("a legacy message is reason version", async () => {
    const { blockhash } = await world.deps.ledger.latestBlockhash();
    const legacy = new Transaction({ feePayer: key(feePayer), recentBlockhash: blockhash }).add(...paymentIxs());
    legacy.partialSign(world.user);
    expect(await submitted(b64(legacy.serialize({ requireAllSignatures: false })))).toEqual(mismatch("version"));
  });

  test("a third signer is reason signers", async () => {
    const third = Keypair.generate().publicKey;
    const memo = new TransactionInstruction({ programId: key(MEMO_PROGRAM), keys: [{ pubkey: third, isSigner: true, isWritable: false }], data: Buffer.from(MEMO) });
    expect(await submitted(await signedV0(paymentIxs({ fourth: memo })))).toEqual(mismatch("signers"));
  });

  test("a fifth instruction, or a plain Transfer in TransferChecked's place, is reason instructions", async () => {
    expect(await submitted(await signedV0([...paymentIxs(), memoIx("again")]))).toEqual(mismatch("instructions"));
    const ixs = paymentIxs();
    ixs[2] = createTransferInstruction(key(associatedTokenAddress(userAddress(), world.mint)), key(associatedTokenAddress(world.recipient, world.mint)), world.user.publicKey, PRICE);
    expect(await submitted(await signedV0(ixs))).toEqual(mismatch("instructions"));
  });

  test("another compute unit limit or price is reason computeUnitLimit or computeUnitPrice", async () => {
    expect(await submitted(await signedV0(paymentIxs({ units: 30_000 })))).toEqual(mismatch("computeUnitLimit"));
    expect(await submitted(await signedV0(paymentIxs({ microLamports: 2n })))).toEqual(mismatch("computeUnitPrice"));
  });

  test("another mint, source account or decimals is reason mint, from or decimals", async () => {
    expect(await submitted(await signedV0(paymentIxs({ mint: Keypair.generate().publicKey.toBase58() })))).toEqual(mismatch("mint"));
    const elsewhere = associatedTokenAddress(Keypair.generate().publicKey.toBase58(), world.mint);
    expect(await submitted(await signedV0(paymentIxs({ source: elsewhere })))).toEqual(mismatch("from"));
    // The payer's own token account, but owned (on paper) by a multisig the user merely signs for: still not the payer's transfer.
    const ixs = paymentIxs();
    ixs[2] = createTransferCheckedInstruction(
      key(associatedTokenAddress(userAddress(), world.mint)),
      key(world.mint),
      key(associatedTokenAddress(world.recipient, world.mint)),
      Keypair.generate().publicKey,
      PRICE,
      6,
      [world.user.publicKey],
    );
    expect(await submitted(await signedV0(ixs))).toEqual(mismatch("from"));
    expect(await submitted(await signedV0(paymentIxs({ decimals: 9 })))).toEqual(mismatch("decimals"));
  });

  test("a fourth instruction that is not a memo, or a memo naming accounts, is reason memo (even with no memo asked for)", async () => {
    const system = SystemProgram.transfer({ fromPubkey: world.user.publicKey, toPubkey: key(world.recipient), lamports: 1 });
    expect(await submitted(await signedV0(paymentIxs({ fourth: system })))).toEqual(mismatch("memo"));
    const withAccount = new TransactionInstruction({ programId: key(MEMO_PROGRAM), keys: [{ pubkey: key(world.recipient), isSigner: false, isWritable: false }], data: Buffer.from(MEMO) });
    expect(await submitted(await signedV0(paymentIxs({ fourth: withAccount })))).toEqual(mismatch("memo"));
  });

  test("the same decoded fields in other bytes (the v1 memo program, a writable mint, accounts reordered) are reason message", async () => {
    // Memo1Uhk… decodes as a memo with the same text; only the program id differs.
    const v1Memo = await submitted(await signedV0(paymentIxs({ fourth: memoIx(MEMO, MEMO_V1_PROGRAM) })));
    // The mint marked writable: the same accounts and instructions, another header.
    const writableMint = paymentIxs();
    writableMint[2]!.keys[1]!.isWritable = true;
    const mintWritable = await submitted(await signedV0(writableMint));
    // The source and destination token accounts swapped in the account list (both writable, not signers), the indexes following them.
    const swapped = (message: MessageV0): MessageV0 => {
      const keys = [...message.staticAccountKeys];
      const at = (address: string) => keys.findIndex((k) => k.toBase58() === address);
      const [i, j] = [at(associatedTokenAddress(userAddress(), world.mint)), at(associatedTokenAddress(world.recipient, world.mint))];
      [keys[i], keys[j]] = [keys[j]!, keys[i]!];
      const moved = (n: number) => (n === i ? j : n === j ? i : n);
      return new MessageV0({
        header: message.header,
        staticAccountKeys: keys,
        recentBlockhash: message.recentBlockhash,
        compiledInstructions: message.compiledInstructions.map((ix) => ({ programIdIndex: moved(ix.programIdIndex), accountKeyIndexes: ix.accountKeyIndexes.map(moved), data: ix.data })),
        addressTableLookups: [],
      });
    };
    const reordered = await signedV0(paymentIxs(), swapped);
    const tx = parseTransaction(fromB64(reordered));
    const transfer = tx.instructions[2];
    if (transfer?.type !== "transferChecked") throw new Error("third instruction is TransferChecked");
    // Still the same transfer when decoded: only the bytes tell it apart.
    expect([tx.accountKeys[transfer.source], tx.accountKeys[transfer.destination]]).toEqual([associatedTokenAddress(userAddress(), world.mint), associatedTokenAddress(world.recipient, world.mint)]);
    expect([v1Memo, mintWritable, await submitted(reordered)]).toEqual([mismatch("message"), mismatch("message"), mismatch("message")]);
  });
});
