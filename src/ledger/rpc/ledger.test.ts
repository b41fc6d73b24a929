// The RPC ledger's real @solana/web3.js code against a LiteSVM-backed JSON-RPC server on 127.0.0.1: balances,
// airdrops, transfers, parsing, history, every rejection reason, and an RPC that is down, failing or slow.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { AddressLookupTableAccount, Keypair, PublicKey, SystemProgram, Transaction, TransactionInstruction, TransactionMessage, VersionedTransaction } from "@solana/web3.js";
import {
  ACCOUNT_SIZE,
  AccountLayout,
  AccountType,
  ExtensionType,
  MINT_SIZE,
  MintLayout,
  TOKEN_2022_PROGRAM_ID,
  createApproveInstruction,
  createAssociatedTokenAccountIdempotentInstruction,
  createTransferCheckedInstruction,
  getAccountLen,
  getMintLen,
} from "@solana/spl-token";
import { AppError } from "../../errors.ts";
import { manualClock } from "../../lib/clock.ts";
import { decodeBase58 } from "../../lib/encoding.ts";
import type { Ledger, SubmitOptions, SubmitResult } from "../ledger.ts";
import { associatedTokenAddress, compileTransaction, parseTransaction } from "../transactions.ts";
import { FINALITY_SLOTS, startLiteSvmRpc, type LiteSvmRpc } from "../../../test/helpers/litesvm-rpc.ts";
import { until } from "../../../test/helpers/until.ts";
import { USDC_MINTS, createRpcLedger, rpcTokens, type RpcLedgerOptions } from "./ledger.ts";

const SOL = 1_000_000_000n;
const USDC = 1_000_000n;
const FEE = 5000n;
const TOKEN_ACCOUNT_RENT = 2_039_280n;
// API keys live in query strings; none may ever reach an error message.
const SECRET = "SECRET";

const clock = manualClock();
let rpc: LiteSvmRpc;
let ledger: Ledger;

function makeLedger(url: string, overrides: Partial<RpcLedgerOptions> = {}): Ledger {
  return createRpcLedger({
    network: "devnet",
    rpcUrl: `${url}?api-key=${SECRET}`,
    tokens: rpcTokens("devnet", { symbol: "wgt", decimals: 6, mint: null }),
    clock,
    pollIntervalMs: 20,
    requestTimeoutMs: 2000,
    ...overrides,
  });
}

beforeAll(async () => {
  rpc = await startLiteSvmRpc();
  ledger = makeLedger(rpc.url);
});

afterAll(async () => {
  await ledger.stop();
  await rpc.stop();
});

const addr = (kp: Keypair) => kp.publicKey.toBase58();

function wallet(lamports = 0n): Keypair {
  const kp = Keypair.generate();
  if (lamports > 0n) rpc.setLamports(addr(kp), lamports);
  return kp;
}

function sign(wire: Uint8Array, ...signers: Keypair[]): Uint8Array {
  const tx = VersionedTransaction.deserialize(wire);
  tx.sign(signers);
  return tx.serialize();
}

async function signedTransfer(from: Keypair, to: string, token: string, amount: bigint, memo?: string): Promise<Uint8Array> {
  return sign(await ledger.buildTransfer({ from: addr(from), to, token, amount, memo }), from);
}

async function transfer(from: Keypair, to: string, token: string, amount: bigint, memo?: string, options?: SubmitOptions): Promise<SubmitResult> {
  return ledger.submit(await signedTransfer(from, to, token, amount, memo), options);
}

async function failure(promise: Promise<unknown>): Promise<AppError> {
  try {
    await promise;
  } catch (e) {
    if (e instanceof AppError) return e;
    throw e;
  }
  throw new Error("expected an AppError");
}

const reasonOf = (e: AppError) => (e.extra.details as { reason?: string } | undefined)?.reason;

function expectNoSecret(e: AppError): void {
  const text = `${e.message} ${JSON.stringify(e.extra)}`;
  expect(text).not.toContain(SECRET);
  expect(text).not.toContain("api-key");
}

describe("tokens and balances", () => {
  test("rpcTokens lists sol, usdc (per network) and the service token", async () => {
    expect(await ledger.tokens()).toEqual([
      { key: "sol", kind: "native", decimals: 9, mint: null },
      { key: "usdc", kind: "spl", decimals: 6, mint: "4zMMC9srt5Ri5X14GAgXhaHii3GnPAEERYPJgZJDncDU" },
      { key: "wgt", kind: "spl", decimals: 6, mint: null },
    ]);
    expect(rpcTokens("mainnet", { symbol: "abc", decimals: 2, mint: null })[1]!.mint).toBe("EPjFWdd5AufqSSqeM2qN1xzybapC8G4wEGGkZwyTDt1v");
    expect(USDC_MINTS.devnet).toBe(rpc.usdcMint);
  });

  test("SOL from the account, usdc from the owner's ATA, 0 when missing, 0 for a token without a mint", async () => {
    const empty = wallet();
    expect(await ledger.getBalances(addr(empty))).toEqual({ sol: 0n, usdc: 0n, wgt: 0n });
    const rich = wallet(3n * SOL);
    const ata = rpc.mintUsdc(addr(rich), 5n * USDC);
    expect(ata).toBe(associatedTokenAddress(addr(rich), rpc.usdcMint));
    expect(await ledger.getBalances(addr(rich))).toEqual({ sol: 3n * SOL, usdc: 5n * USDC, wgt: 0n });
    expect(await ledger.accountExists(ata)).toBe(true);
    expect(await ledger.accountExists(associatedTokenAddress(addr(empty), rpc.usdcMint))).toBe(false);
    expect((await failure(ledger.getBalances("not-an-address"))).code).toBe("INVALID_ADDRESS");
  });

  test("programAccount: null for a wallet or no account, token, mint, program", async () => {
    const rich = wallet(SOL);
    const ata = rpc.mintUsdc(addr(rich), USDC);
    expect(await ledger.programAccount(addr(rich))).toBeNull();
    expect(await ledger.programAccount(addr(wallet()))).toBeNull(); // no account at all
    expect(await ledger.programAccount(ata)).toBe("token");
    expect(await ledger.programAccount(rpc.usdcMint)).toBe("mint");
    expect(await ledger.programAccount("TokenkegQfeZyiNwAJbNbGKPFXCWuBvf9Ss623VQ5DA")).toBe("program");
    expect((await failure(ledger.programAccount("not-an-address"))).code).toBe("INVALID_ADDRESS");
  });

  test("programAccount: a Token-2022 mint or token account with extensions is told by its account-type byte, not its length", async () => {
    // Past its base layout a Token-2022 account with extensions is padded to 165 bytes, then its AccountType
    // (1 a mint, 2 a token account), then the extensions: both are longer than a plain token account.
    const extended = (length: number, type: AccountType) => {
      const data = new Uint8Array(length);
      data[ACCOUNT_SIZE] = type;
      return data;
    };
    const mint = Keypair.generate().publicKey;
    const account = Keypair.generate().publicKey;
    const mintLength = getMintLen([ExtensionType.MintCloseAuthority]);
    const accountLength = getAccountLen([ExtensionType.ImmutableOwner]);
    rpc.svm.setAccount(mint, { lamports: 10_000_000, data: extended(mintLength, AccountType.Mint), owner: TOKEN_2022_PROGRAM_ID, executable: false });
    rpc.svm.setAccount(account, { lamports: 10_000_000, data: extended(accountLength, AccountType.Account), owner: TOKEN_2022_PROGRAM_ID, executable: false });
    expect([mintLength, accountLength].every((n) => n > ACCOUNT_SIZE)).toBe(true);
    expect(await ledger.programAccount(mint.toBase58())).toBe("mint");
    expect(await ledger.programAccount(account.toBase58())).toBe("token");
  });

  test("a service token with a mint is read from its ATA under its symbol", async () => {
    const mint = rpc.createMint(6);
    const withMint = makeLedger(rpc.url, { tokens: rpcTokens("devnet", { symbol: "wgt", decimals: 6, mint }) });
    const owner = wallet(SOL);
    rpc.mintTokens(mint, addr(owner), 42n * USDC);
    expect(await withMint.getBalances(addr(owner))).toEqual({ sol: SOL, usdc: 0n, wgt: 42n * USDC });
    await withMint.stop();
  });

  test("a service token mint that is not what the configuration says is refused on its first transfer, naming the variable", async () => {
    const owner = wallet(SOL);
    const token2022 = Keypair.generate().publicKey;
    const mintData = (decimals: number) => {
      const data = new Uint8Array(MINT_SIZE);
      MintLayout.encode({ mintAuthorityOption: 0, mintAuthority: PublicKey.default, supply: 0n, decimals, isInitialized: true, freezeAuthorityOption: 0, freezeAuthority: PublicKey.default }, data);
      return data;
    };
    rpc.svm.setAccount(token2022, { lamports: 1_461_600, data: mintData(6), owner: TOKEN_2022_PROGRAM_ID, executable: false });
    const cases: [string, string][] = [
      [rpc.createMint(9), "has 9 decimals, but SERVICE_TOKEN_DECIMALS is 6: set SERVICE_TOKEN_DECIMALS=9"],
      [token2022.toBase58(), "is a Token-2022 mint; only SPL Token mints are supported"],
      [addr(wallet(SOL)), "is not an SPL Token mint"],
      [Keypair.generate().publicKey.toBase58(), "has no account on devnet"],
    ];
    for (const [mint, said] of cases) {
      const misconfigured = makeLedger(rpc.url, { tokens: rpcTokens("devnet", { symbol: "wgt", decimals: 6, mint }) });
      try {
        const e = await failure(misconfigured.buildTransfer({ from: addr(owner), to: addr(wallet()), token: "wgt", amount: 1n }));
        expect([mint, e.code, e.message]).toEqual([mint, "NOT_SUPPORTED", `SERVICE_TOKEN_MINT (${mint}, the wgt token) ${said}`]);
        // SOL and USDC transfers and balances do not depend on it.
        expect((await misconfigured.buildTransfer({ from: addr(owner), to: addr(wallet()), token: "sol", amount: 1n })).length).toBeGreaterThan(0);
        expect((await misconfigured.buildTransfer({ from: addr(owner), to: addr(wallet()), token: "usdc", amount: 1n })).length).toBeGreaterThan(0);
        expect((await misconfigured.getBalances(addr(owner))).sol).toBe(SOL);
      } finally {
        await misconfigured.stop();
      }
    }
  });

  test("latestBlockhash is the cluster's, with its last valid block height", async () => {
    const { blockhash, lastValidBlockHeight } = await ledger.latestBlockhash();
    expect(blockhash).toBe(rpc.svm.latestBlockhash());
    expect(lastValidBlockHeight).toBeGreaterThan(rpc.blockHeight());
    expect(await ledger.blockhashValid(blockhash)).toBe(true);
    expect(await ledger.blockhashValid("1".repeat(44))).toBe(false);
    expect(await ledger.ping()).toBe(true);
  });
});

describe("airdrop", () => {
  test("devnet SOL: one confirmed faucet transfer, readable like any transaction", async () => {
    const who = wallet();
    const signatures = await ledger.airdrop(addr(who), { sol: 3n * SOL / 2n });
    expect(signatures).toHaveLength(1);
    expect((await ledger.getBalances(addr(who))).sol).toBe(3n * SOL / 2n);
    const tx = await ledger.getTransaction(signatures[0]!);
    expect(tx?.status).toBe("confirmed");
    expect(tx?.transfers).toEqual([{ token: "sol", mint: null, from: rpc.faucet, to: addr(who), amount: 3n * SOL / 2n }]);
    expect(await ledger.airdrop(addr(who), {})).toEqual([]);
    expect(await ledger.airdrop(addr(who), { sol: 0n, usdc: 0n })).toEqual([]);
  });

  test("limits: at most 2 SOL, no tokens on devnet, nothing on mainnet", async () => {
    const who = addr(wallet());
    expect((await failure(ledger.airdrop(who, { sol: 2n * SOL + 1n }))).code).toBe("VALIDATION_ERROR");
    expect((await failure(ledger.airdrop(who, { sol: -1n }))).code).toBe("VALIDATION_ERROR");
    expect((await failure(ledger.airdrop(who, { usdc: USDC }))).code).toBe("NOT_SUPPORTED");
    expect((await failure(ledger.airdrop(who, { token: USDC }))).code).toBe("NOT_SUPPORTED");
    expect((await failure(ledger.airdrop("nope", { sol: SOL }))).code).toBe("INVALID_ADDRESS");
    const mainnet = makeLedger(rpc.url, { network: "mainnet", tokens: rpcTokens("mainnet", { symbol: "wgt", decimals: 6, mint: null }) });
    expect((await failure(mainnet.airdrop(who, { sol: SOL }))).code).toBe("NOT_SUPPORTED");
    expect((await failure(mainnet.airdrop(who, { usdc: USDC }))).code).toBe("NOT_SUPPORTED");
    await mainnet.stop();
    expect((await ledger.getBalances(who)).sol).toBe(0n);
  });
});

describe("transfers", () => {
  test("SOL: exact balances and fee, parsed transfer and memo", async () => {
    const alice = wallet(2n * SOL);
    const bob = addr(wallet());
    const result = await transfer(alice, bob, "sol", SOL / 2n, "rent for May");
    expect(result.fee).toBe(FEE);
    expect(result.confirmedAt).toBe(clock.now());
    expect(result.slot).toBeGreaterThan(0);
    expect(decodeBase58(result.signature)?.length).toBe(64); // base58 of the first signature: the txHash
    expect((await ledger.getBalances(addr(alice))).sol).toBe(2n * SOL - SOL / 2n - FEE);
    expect((await ledger.getBalances(bob)).sol).toBe(SOL / 2n);
    const tx = await ledger.getTransaction(result.signature);
    expect(tx).toMatchObject({ signature: result.signature, slot: result.slot, status: "confirmed", error: null, fee: FEE, feePayer: addr(alice), memo: "rent for May" });
    expect(tx?.transfers).toEqual([{ token: "sol", mint: null, from: addr(alice), to: bob, amount: SOL / 2n }]);
    expect(tx!.timestamp).toBeGreaterThan(Date.UTC(2024, 0, 1));
  });

  test("usdc to a wallet without an ATA creates it (fee payer pays rent), then to the existing ATA", async () => {
    const alice = wallet(SOL);
    rpc.mintUsdc(addr(alice), 10n * USDC);
    const carol = addr(wallet());
    const first = await ledger.buildTransfer({ from: addr(alice), to: carol, token: "usdc", amount: 3n * USDC });
    expect(parseTransaction(first).instructions.map((ix) => `${ix.program}:${ix.type}`)).toEqual([
      "computeBudget:setComputeUnitLimit",
      "ata:createIdempotent",
      "token:transferChecked",
    ]);
    const created = await ledger.submit(sign(first, alice));
    expect(created.fee).toBe(FEE);
    expect(await ledger.getBalances(addr(alice))).toEqual({ sol: SOL - FEE - TOKEN_ACCOUNT_RENT, usdc: 7n * USDC, wgt: 0n });
    expect(await ledger.getBalances(carol)).toEqual({ sol: 0n, usdc: 3n * USDC, wgt: 0n });

    const second = await ledger.buildTransfer({ from: addr(alice), to: carol, token: "usdc", amount: 2n * USDC, memo: "invoice 7" });
    expect(parseTransaction(second).instructions.map((ix) => ix.program)).toEqual(["computeBudget", "token", "memo"]);
    const existing = await ledger.submit(sign(second, alice));
    expect(await ledger.getBalances(addr(alice))).toEqual({ sol: SOL - 2n * FEE - TOKEN_ACCOUNT_RENT, usdc: 5n * USDC, wgt: 0n });
    expect((await ledger.getBalances(carol)).usdc).toBe(5n * USDC);

    // Owners, not token accounts, both when the ATA was created by the transaction and when it existed.
    for (const [signature, amount, memo] of [[created.signature, 3n * USDC, null], [existing.signature, 2n * USDC, "invoice 7"]] as const) {
      const tx = await ledger.getTransaction(signature);
      expect(tx?.transfers).toEqual([{ token: "usdc", mint: rpc.usdcMint, from: addr(alice), to: carol, amount, decimals: 6 }]);
      expect(tx?.memo).toBe(memo);
      expect(tx?.fee).toBe(FEE);
    }
  });

  test("a fee payer other than the sender pays the fee and the new ATA", async () => {
    const sender = wallet();
    rpc.mintUsdc(addr(sender), 4n * USDC);
    const payer = wallet(SOL);
    const to = addr(wallet());
    const wire = await ledger.buildTransfer({ from: addr(sender), to, token: "usdc", amount: USDC, feePayer: addr(payer) });
    const result = await ledger.submit(sign(wire, payer, sender));
    expect(result.fee).toBe(2n * FEE);
    expect((await ledger.getBalances(addr(payer))).sol).toBe(SOL - 2n * FEE - TOKEN_ACCOUNT_RENT);
    expect(await ledger.getBalances(addr(sender))).toEqual({ sol: 0n, usdc: 3n * USDC, wgt: 0n });
    expect((await ledger.getTransaction(result.signature))?.feePayer).toBe(addr(payer));
  });

  test("a token transfer signed by the source account's delegate is read as from the account's owner", async () => {
    const owner = wallet(SOL);
    const delegate = wallet(SOL);
    const bob = addr(wallet());
    const source = rpc.mintUsdc(addr(owner), 5n * USDC);
    // The owner approved the delegate for 2 USDC (an Approve, run straight in the runtime: the ledger sends only transfers).
    const approve = new Transaction({ feePayer: owner.publicKey, recentBlockhash: rpc.svm.latestBlockhash() }).add(
      createApproveInstruction(new PublicKey(source), delegate.publicKey, owner.publicKey, 2n * USDC),
    );
    approve.sign(owner);
    rpc.svm.sendTransaction(approve);
    expect(AccountLayout.decode(rpc.svm.getAccount(new PublicKey(source))!.data).delegate.toBase58()).toBe(addr(delegate));
    const mint = new PublicKey(rpc.usdcMint);
    const destination = new PublicKey(associatedTokenAddress(bob, rpc.usdcMint));
    const { blockhash } = await ledger.latestBlockhash();
    const wire = compileTransaction(
      [
        createAssociatedTokenAccountIdempotentInstruction(delegate.publicKey, destination, new PublicKey(bob), mint),
        createTransferCheckedInstruction(new PublicKey(source), mint, destination, delegate.publicKey, USDC, 6),
      ],
      addr(delegate),
      blockhash,
    );
    const result = await ledger.submit(sign(wire, delegate));
    expect(await ledger.getBalances(addr(owner))).toEqual({ sol: SOL - FEE, usdc: 4n * USDC, wgt: 0n }); // the Approve's fee
    const tx = await ledger.getTransaction(result.signature);
    expect(tx?.transfers).toEqual([{ token: "usdc", mint: rpc.usdcMint, from: addr(owner), to: bob, amount: USDC, decimals: 6 }]);
    expect((await ledger.history(addr(owner), { limit: 5 })).map((t) => t.transfers[0]?.from)).toEqual([addr(owner)]);
  });

  test("buildTransfer validates token, amount, addresses and memo size before touching the chain", async () => {
    const from = addr(wallet());
    const to = addr(wallet());
    const calls = rpc.calls.length;
    expect((await failure(ledger.buildTransfer({ from, to, token: "doge", amount: 1n }))).code).toBe("VALIDATION_ERROR");
    expect((await failure(ledger.buildTransfer({ from, to, token: "sol", amount: 0n }))).code).toBe("VALIDATION_ERROR");
    expect((await failure(ledger.buildTransfer({ from, to, token: "usdc", amount: -5n }))).code).toBe("VALIDATION_ERROR");
    expect((await failure(ledger.buildTransfer({ from, to, token: "sol", amount: 2n ** 63n }))).code).toBe("VALIDATION_ERROR");
    expect((await failure(ledger.buildTransfer({ from, to, token: "wgt", amount: 1n }))).code).toBe("NOT_SUPPORTED");
    expect((await failure(ledger.buildTransfer({ from: "x", to, token: "sol", amount: 1n }))).code).toBe("INVALID_ADDRESS");
    expect((await failure(ledger.buildTransfer({ from, to, token: "sol", amount: 1n, feePayer: "y" }))).code).toBe("INVALID_ADDRESS");
    expect((await failure(ledger.buildTransfer({ from, to, token: "usdc", amount: 1n, memo: "m".repeat(1200) }))).code).toBe("VALIDATION_ERROR");
    expect(rpc.calls.length).toBe(calls);
  });

  test("finalized waits until the transaction's slot is rooted", async () => {
    const alice = wallet(SOL);
    let settled = false;
    const pending = transfer(alice, addr(wallet()), "sol", SOL / 10n, undefined, { finalized: true }).finally(() => {
      settled = true;
    });
    // Landed (however long that takes on a busy machine), only confirmed: still waiting for finality.
    await until(async () => ((await ledger.getBalances(addr(alice))).sol === SOL - SOL / 10n - FEE ? true : undefined));
    await Bun.sleep(150);
    expect(settled).toBe(false);
    rpc.advanceSlots(FINALITY_SLOTS);
    expect((await pending).fee).toBe(FEE);
  });
});

describe("history", () => {
  test("with finalized, only transactions the cluster has finalized are listed", async () => {
    const alice = wallet(SOL);
    const bob = wallet();
    const sent = await transfer(alice, addr(bob), "sol", SOL / 10n);
    expect((await ledger.history(addr(bob), { limit: 10 })).map((t) => t.signature)).toEqual([sent.signature]);
    expect(await ledger.history(addr(bob), { limit: 10, finalized: true })).toEqual([]);
    rpc.advanceSlots(FINALITY_SLOTS);
    expect((await ledger.history(addr(bob), { limit: 10, finalized: true })).map((t) => t.signature)).toEqual([sent.signature]);
  });

  test("newest first across the wallet and its token accounts, with limit and before", async () => {
    const alice = wallet(2n * SOL);
    rpc.mintUsdc(addr(alice), 10n * USDC);
    const dave = wallet(SOL);
    const solIn = await transfer(alice, addr(dave), "sol", SOL / 4n, "one");
    const ataCreated = await transfer(alice, addr(dave), "usdc", USDC, "two");
    // Touches only dave's token account: found through the ATA's signatures.
    const usdcIn = await transfer(alice, addr(dave), "usdc", 2n * USDC, "three");
    expect(parseTransaction((await signedTransfer(alice, addr(dave), "usdc", 1n))).accountKeys).not.toContain(addr(dave));
    const solOut = await transfer(dave, addr(alice), "sol", SOL / 8n, "four");

    const all = await ledger.history(addr(dave), { limit: 10 });
    expect(all.map((t) => t.signature)).toEqual([solOut.signature, usdcIn.signature, ataCreated.signature, solIn.signature]);
    expect(all.map((t) => t.memo)).toEqual(["four", "three", "two", "one"]);
    expect(all[1]!.transfers).toEqual([{ token: "usdc", mint: rpc.usdcMint, from: addr(alice), to: addr(dave), amount: 2n * USDC, decimals: 6 }]);

    const firstPage = await ledger.history(addr(dave), { limit: 2 });
    expect(firstPage.map((t) => t.signature)).toEqual([solOut.signature, usdcIn.signature]);
    const secondPage = await ledger.history(addr(dave), { limit: 2, before: firstPage[1]!.signature });
    expect(secondPage.map((t) => t.signature)).toEqual([ataCreated.signature, solIn.signature]);
    expect(await ledger.history(addr(dave), { limit: 2, before: solIn.signature })).toEqual([]);
    expect((await ledger.history(addr(alice), { limit: 1 })).map((t) => t.signature)).toEqual([solOut.signature]);

    // A transaction the node lists but cannot return yet: left out, or, asked for complete, CHAIN_UNAVAILABLE.
    const slotOf = (answer: Record<string, unknown>) => (answer.result as { slot?: number } | null)?.slot;
    rpc.setAnswerFilter((method, answer) => (method === "getTransaction" && slotOf(answer) === solOut.slot ? { ...answer, result: null } : answer));
    try {
      expect((await ledger.history(addr(dave), { limit: 10 })).map((t) => t.signature)).toEqual([usdcIn.signature, ataCreated.signature, solIn.signature]);
      expect((await failure(ledger.history(addr(dave), { limit: 10, complete: true }))).code).toBe("CHAIN_UNAVAILABLE");
    } finally {
      rpc.setAnswerFilter(null);
    }
    expect(await ledger.history(addr(dave), { limit: 10, complete: true })).toHaveLength(4);

    expect((await failure(ledger.history(addr(dave), { limit: 0 }))).code).toBe("VALIDATION_ERROR");
    expect((await failure(ledger.history(addr(dave), { limit: 1001 }))).code).toBe("VALIDATION_ERROR");
    expect((await failure(ledger.history(addr(dave), { limit: 5, before: "abc" }))).code).toBe("VALIDATION_ERROR");
    expect((await failure(ledger.history("nope", { limit: 5 }))).code).toBe("INVALID_ADDRESS");

    // signatures: the address's own transactions only (a token account's are not asked for), unread.
    expect(await ledger.signatures(addr(dave), { limit: 10 })).toEqual([solOut.signature, ataCreated.signature, solIn.signature]);
    expect(await ledger.signatures(addr(dave), { limit: 1, before: solOut.signature })).toEqual([ataCreated.signature]);
    expect(await ledger.signatures(addr(dave), { limit: 10, finalized: true })).toEqual([]);
    rpc.advanceSlots(FINALITY_SLOTS);
    expect(await ledger.signatures(addr(dave), { limit: 10, finalized: true })).toHaveLength(3);
    expect((await failure(ledger.signatures(addr(dave), { limit: 1001 }))).code).toBe("VALIDATION_ERROR");
    expect((await failure(ledger.signatures(addr(dave), { limit: 5, before: "abc" }))).code).toBe("VALIDATION_ERROR");
    expect((await failure(ledger.signatures("nope", { limit: 5 }))).code).toBe("INVALID_ADDRESS");
  });

  test("getTransaction of an unknown or malformed signature is null", async () => {
    const unknown = VersionedTransaction.deserialize(await signedTransfer(wallet(), addr(wallet()), "sol", 1n));
    expect(await ledger.getTransaction(parseTransaction(unknown.serialize()).signature)).toBeNull();
    expect(await ledger.getTransaction("not a signature")).toBeNull();
  });

  test("getTransaction with finalized is null until the cluster has finalized the transaction", async () => {
    const sent = await transfer(wallet(SOL), addr(wallet()), "sol", SOL / 10n);
    expect((await ledger.getTransaction(sent.signature))?.status).toBe("confirmed");
    expect(await ledger.getTransaction(sent.signature, { finalized: true })).toBeNull();
    rpc.advanceSlots(FINALITY_SLOTS);
    expect((await ledger.getTransaction(sent.signature, { finalized: true }))?.signature).toBe(sent.signature);
  });

  test("a node answering getTransaction with another transaction's bytes is not answering: CHAIN_UNAVAILABLE", async () => {
    const alice = wallet(SOL);
    const asked = await transfer(alice, addr(wallet()), "sol", SOL / 10n);
    const other = await transfer(alice, addr(wallet()), "sol", SOL / 5n);
    const otherWire = (await ledger.getTransaction(other.signature))!.wire;
    rpc.setAnswerFilter((method, answer) => {
      if (method !== "getTransaction" || answer.result === null) return answer;
      return { ...answer, result: { ...(answer.result as object), transaction: [Buffer.from(otherWire).toString("base64"), "base64"] } };
    });
    try {
      const e = await failure(ledger.getTransaction(asked.signature));
      expect(e.code).toBe("CHAIN_UNAVAILABLE");
      expect(e.message).toContain("another transaction");
    } finally {
      rpc.setAnswerFilter(null);
    }
    expect((await ledger.getTransaction(asked.signature))?.transfers[0]?.amount).toBe(SOL / 10n);
  });

  test("a v0 transaction's lookup-table accounts come from the node's loadedAddresses, writable ones first", async () => {
    // A wallet's v0 transaction: SOL to a table's first address (writable), and another program reading its second.
    const payer = wallet();
    const [recipient, readOnly] = [Keypair.generate().publicKey, Keypair.generate().publicKey];
    const table = new AddressLookupTableAccount({
      key: Keypair.generate().publicKey,
      state: { deactivationSlot: BigInt("18446744073709551615"), lastExtendedSlot: 0, lastExtendedSlotStartIndex: 0, addresses: [recipient, readOnly] },
    });
    const instructions = [
      SystemProgram.transfer({ fromPubkey: payer.publicKey, toPubkey: recipient, lamports: 7000 }),
      new TransactionInstruction({ programId: Keypair.generate().publicKey, keys: [{ pubkey: readOnly, isSigner: false, isWritable: false }], data: Buffer.from([]) }),
    ];
    const message = new TransactionMessage({ payerKey: payer.publicKey, recentBlockhash: rpc.svm.latestBlockhash(), instructions }).compileToV0Message([table]);
    const tx = new VersionedTransaction(message);
    tx.sign([payer]);
    const signature = parseTransaction(tx.serialize(), { loadedAddresses: { writable: [recipient.toBase58()], readonly: [readOnly.toBase58()] } }).signature;
    // What a node answers for it (meta.loadedAddresses as Agave gives them).
    rpc.setAnswerFilter((method, answer) => {
      if (method !== "getTransaction") return answer;
      const meta = { err: null, status: { Ok: null }, fee: 5000, preTokenBalances: [], postTokenBalances: [], loadedAddresses: { writable: [recipient.toBase58()], readonly: [readOnly.toBase58()] } };
      return { ...answer, result: { slot: rpc.blockHeight(), blockTime: null, version: 0, transaction: [Buffer.from(tx.serialize()).toString("base64"), "base64"], meta } };
    });
    try {
      const read = await ledger.getTransaction(signature);
      expect(read?.transfers).toEqual([{ token: "sol", mint: null, from: addr(payer), to: recipient.toBase58(), amount: 7000n }]);
      expect(read?.loadedAddresses).toEqual({ writable: [recipient.toBase58()], readonly: [readOnly.toBase58()] });
    } finally {
      rpc.setAnswerFilter(null);
    }
  });
});

describe("rejections", () => {
  test("a failed execution is recorded, charged its fee and reported as execution_failed", async () => {
    const alice = wallet(SOL);
    const bob = addr(wallet());
    const wire = await signedTransfer(alice, bob, "sol", 5n * SOL);
    const e = await failure(ledger.submit(wire));
    expect(e.code).toBe("TRANSACTION_REJECTED");
    const details = e.extra.details as { reason: string; signature: string; error: string };
    expect(details.reason).toBe("execution_failed");
    expect(details.signature).toBe(parseTransaction(wire).signature);
    expect(details.error).toContain("insufficient lamports");
    expect(await ledger.getBalances(addr(alice))).toEqual({ sol: SOL - FEE, usdc: 0n, wgt: 0n });
    expect((await ledger.getBalances(bob)).sol).toBe(0n);
    const recorded = await ledger.getTransaction(details.signature);
    expect(recorded).toMatchObject({ status: "failed", fee: FEE, feePayer: addr(alice) });
    expect(recorded?.error).toContain("instruction 1 (system) failed"); // after SetComputeUnitLimit
    expect((await ledger.history(addr(alice), { limit: 5 }))[0]?.status).toBe("failed");
  });

  test("an SPL overdraw fails on chain the same way", async () => {
    const alice = wallet(SOL);
    rpc.mintUsdc(addr(alice), USDC);
    const e = await failure(transfer(alice, addr(wallet()), "usdc", 2n * USDC));
    expect([e.code, reasonOf(e)]).toEqual(["TRANSACTION_REJECTED", "execution_failed"]);
    expect((e.extra.details as { error: string }).error).toContain("insufficient token balance");
    // The whole transaction rolled back: no ATA rent, only the fee.
    expect(await ledger.getBalances(addr(alice))).toEqual({ sol: SOL - FEE, usdc: USDC, wgt: 0n });
  });

  test("an own transfer's shortfall is INSUFFICIENT_FUNDS, never sent and free", async () => {
    const alice = wallet(SOL);
    rpc.mintUsdc(addr(alice), USDC);
    const bob = addr(wallet());
    const cases: [string, bigint][] = [
      ["sol", 5n * SOL],
      ["usdc", 2n * USDC],
    ];
    for (const [token, amount] of cases) {
      const wire = await signedTransfer(alice, bob, token, amount);
      const calls = rpc.calls.length;
      const e = await failure(ledger.submit(wire, { ownTransfer: true }));
      expect(e.code).toBe("INSUFFICIENT_FUNDS");
      expect(rpc.calls.slice(calls)).not.toContain("sendTransaction");
      expect(await ledger.getTransaction(parseTransaction(wire).signature)).toBeNull();
    }
    // A fee payer with nothing at all, and one that cannot fund the recipient's token account.
    const pauper = wallet();
    rpc.mintUsdc(addr(pauper), USDC);
    expect((await failure(ledger.submit(await signedTransfer(pauper, bob, "usdc", 1n), { ownTransfer: true }))).code).toBe("INSUFFICIENT_FUNDS");
    const poor = wallet(1_000_000n);
    rpc.mintUsdc(addr(poor), USDC);
    expect((await failure(ledger.submit(await signedTransfer(poor, addr(wallet()), "usdc", 1n), { ownTransfer: true }))).code).toBe("INSUFFICIENT_FUNDS");
    expect(await ledger.getBalances(addr(alice))).toEqual({ sol: SOL, usdc: USDC, wgt: 0n });
    expect((await ledger.getBalances(addr(poor))).sol).toBe(1_000_000n);
    // With the funds there, an own transfer goes through.
    expect((await transfer(alice, bob, "sol", SOL / 2n, undefined, { ownTransfer: true })).fee).toBe(FEE);
  });

  test("two own transfers from one wallet at once, with funds for one: the second's trial sees the first, and costs nothing", async () => {
    for (const token of ["sol", "usdc"] as const) {
      const alice = wallet(SOL);
      if (token === "usdc") rpc.mintTokens(USDC_MINTS.devnet, addr(alice), 3n * USDC);
      const amount = token === "sol" ? (SOL * 6n) / 10n : 2n * USDC;
      const wires = await Promise.all([0, 1].map(async () => signedTransfer(alice, addr(wallet(SOL)), token, amount)));
      const outcomes = await Promise.allSettled(wires.map((w) => ledger.submit(w, { ownTransfer: true })));
      const codes = outcomes.map((o) => (o.status === "fulfilled" ? "ok" : (o.reason as AppError).code)).sort();
      expect([token, codes]).toEqual([token, ["INSUFFICIENT_FUNDS", "ok"]]);
      const balances = await ledger.getBalances(addr(alice));
      expect([token, token === "sol" ? balances.sol : balances.usdc]).toEqual([token, token === "sol" ? SOL - amount - FEE : USDC]);
      if (token === "usdc") expect(balances.sol).toBe(SOL - FEE - TOKEN_ACCOUNT_RENT); // one fee: the refused one was never sent
    }
  });

  test("an own transfer that would fail for another reason is preflight_failed: never sent, free", async () => {
    const alice = wallet(SOL);
    const wire = await signedTransfer(alice, "SysvarRent111111111111111111111111111111111", "sol", SOL / 10n);
    const calls = rpc.calls.length;
    const e = await failure(ledger.submit(wire, { ownTransfer: true }));
    expect([e.code, reasonOf(e)]).toEqual(["TRANSACTION_REJECTED", "preflight_failed"]);
    expect(rpc.calls.slice(calls)).not.toContain("sendTransaction");
    expect((await ledger.getBalances(addr(alice))).sol).toBe(SOL);
  });

  test("an own transfer leaving its recipient below the rent is VALIDATION_ERROR on amount; the sender's is a shortfall", async () => {
    const alice = wallet(SOL);
    const fresh = addr(wallet());
    const e = await failure(transfer(alice, fresh, "sol", 1_000n, undefined, { ownTransfer: true }));
    expect(e.code).toBe("VALIDATION_ERROR");
    expect(e.extra.details).toMatchObject({ fields: [{ field: "amount" }] });
    expect(e.message).toContain(fresh);
    // The sender left with less than the rent: its own shortfall.
    const sender = await failure(transfer(alice, fresh, "sol", SOL - FEE - 1_000n, undefined, { ownTransfer: true }));
    expect(sender.code).toBe("INSUFFICIENT_FUNDS");
    expect((await ledger.getBalances(addr(alice))).sol).toBe(SOL);
  });

  test("when preflight refuses a failing execution (a real cluster's default) nothing is charged", async () => {
    rpc.setStrictPreflight(true);
    try {
      const alice = wallet(SOL);
      const e = await failure(transfer(alice, addr(wallet()), "sol", 5n * SOL));
      // Refused by the simulation: not execution_failed, which means recorded on chain with its fee charged.
      expect([e.code, reasonOf(e)]).toEqual(["TRANSACTION_REJECTED", "preflight_failed"]);
      expect(e.message).toContain("refused before execution");
      expect((await ledger.getBalances(addr(alice))).sol).toBe(SOL);
    } finally {
      rpc.setStrictPreflight(false);
    }
  });

  test("another's transaction leaving a new recipient below the rent, refused by preflight, is insufficient_funds_for_rent: not a field error", async () => {
    rpc.setStrictPreflight(true);
    try {
      const alice = wallet(SOL);
      // Not an own transfer: there is no amount field to blame, only Solana's reason (the own-transfer case is VALIDATION_ERROR on amount).
      const e = await failure(transfer(alice, addr(wallet()), "sol", 1_000n));
      expect([e.code, reasonOf(e)]).toEqual(["TRANSACTION_REJECTED", "insufficient_funds_for_rent"]);
      expect((await ledger.getBalances(addr(alice))).sol).toBe(SOL);
    } finally {
      rpc.setStrictPreflight(false);
    }
  });

  test("submitting the same transaction twice is CONFLICT and charges once", async () => {
    const alice = wallet(SOL);
    const wire = await signedTransfer(alice, addr(wallet()), "sol", SOL / 10n);
    await ledger.submit(wire);
    expect((await failure(ledger.submit(wire))).code).toBe("CONFLICT");
    expect((await failure(ledger.submit(wire, { ownTransfer: true }))).code).toBe("CONFLICT");
    expect((await ledger.getBalances(addr(alice))).sol).toBe(SOL - SOL / 10n - FEE);
  });

  test("an expired blockhash is refused (blockhash_not_found) and nothing is charged", async () => {
    const alice = wallet(SOL);
    const wire = await signedTransfer(alice, addr(wallet()), "sol", SOL / 10n);
    rpc.expireBlockhash();
    const e = await failure(ledger.submit(wire));
    expect([e.code, reasonOf(e)]).toEqual(["TRANSACTION_REJECTED", "blockhash_not_found"]);
    expect((await failure(ledger.submit(wire, { ownTransfer: true }))).code).toBe("TRANSACTION_REJECTED");
    expect((await ledger.getBalances(addr(alice))).sol).toBe(SOL);
  });

  test("a blockhash this ledger did not hand out, called invalid by a node behind, is followed for its whole life, not said expired", async () => {
    const alice = wallet(SOL);
    const bob = addr(wallet());
    const wire = await signedTransfer(alice, bob, "sol", SOL / 10n); // built by another ledger (the wallet's own RPC, or before a restart)
    // A node a slot behind (or another node of a pool) does not know the blockhash yet; everything else is honest.
    const behind: typeof fetch = (async (input: string | URL | Request, init?: RequestInit) => {
      if (typeof init?.body === "string" && init.body.includes('"isBlockhashValid"')) {
        return Response.json({ jsonrpc: "2.0", id: JSON.parse(init.body).id, result: { context: { slot: 1 }, value: false } });
      }
      return fetch(input, init);
    }) as typeof fetch;
    const fresh = makeLedger(rpc.url, { fetch: behind });
    rpc.setDropTransactions(true); // the first send is taken but does not land at once
    try {
      const pending = fresh.submit(wire);
      let settled = false;
      void pending.then(() => (settled = true), () => (settled = true));
      await Bun.sleep(100);
      rpc.advanceSlots(1);
      await Bun.sleep(200); // several polls past the new height
      expect(settled).toBe(false); // not "it was not executed": it can still land for ~150 blocks
      rpc.advanceSlots(120); // most of its life, still within it
      await Bun.sleep(200);
      expect(settled).toBe(false);
      rpc.setDropTransactions(false); // the next re-send lands
      const sent = await pending;
      expect(sent.signature).toBe(parseTransaction(wire).signature);
      expect((await ledger.getBalances(bob)).sol).toBe(SOL / 10n);
    } finally {
      rpc.setDropTransactions(false);
      await fresh.stop();
    }
  });

  test("a send whose answer is lost (an HTTP error after the node took it) is confirmed by its signature, not reported unavailable", async () => {
    const alice = wallet(SOL);
    const bob = addr(wallet());
    let lose = true;
    const lossy: typeof fetch = (async (input: string | URL | Request, init?: RequestInit) => {
      const answer = await fetch(input, init);
      if (lose && typeof init?.body === "string" && init.body.includes('"sendTransaction"')) {
        lose = false;
        return new Response("bad gateway", { status: 502 });
      }
      return answer;
    }) as typeof fetch;
    const flaky = makeLedger(rpc.url, { fetch: lossy });
    try {
      const wire = await signedTransfer(alice, bob, "sol", SOL / 10n);
      const sent = await flaky.submit(wire);
      expect(sent.signature).toBe(parseTransaction(wire).signature);
      expect((await ledger.getBalances(bob)).sol).toBe(SOL / 10n); // once
      // The same bytes again once their blockhash has expired: a duplicate that landed, not "nothing was charged".
      rpc.expireBlockhash();
      const again = await failure(ledger.submit(wire));
      expect([again.code, (again.extra.details as { signature?: string }).signature]).toEqual(["CONFLICT", sent.signature]);
      const own = await failure(ledger.submit(wire, { ownTransfer: true })); // tried first: the trial's refusal too
      expect([own.code, (own.extra.details as { signature?: string }).signature]).toEqual(["CONFLICT", sent.signature]);
      expect((await ledger.getBalances(alice.publicKey.toBase58())).sol).toBe(SOL - SOL / 10n - FEE);
    } finally {
      await flaky.stop();
    }
  });

  test("a lost first send is re-sent through preflight: a failing transaction is never executed and charged", async () => {
    rpc.setStrictPreflight(true);
    let dropped = 0;
    // The first sendTransaction never reaches the node and its answer is lost: the node knows nothing of it.
    const lossy: typeof fetch = (async (input: string | URL | Request, init?: RequestInit) => {
      if (dropped === 0 && typeof init?.body === "string" && init.body.includes('"sendTransaction"')) {
        dropped++;
        return new Response("bad gateway", { status: 502 });
      }
      return fetch(input, init);
    }) as typeof fetch;
    const flaky = makeLedger(rpc.url, { fetch: lossy });
    try {
      const alice = wallet(SOL);
      const wire = await signedTransfer(alice, addr(wallet()), "sol", 5n * SOL); // more than alice has
      const sendsBefore = rpc.calls.filter((c) => c === "sendTransaction").length;
      const pending = failure(flaky.submit(wire));
      // Several re-send periods: each re-send is refused by preflight, never forwarded.
      await until(() => rpc.calls.filter((c) => c === "sendTransaction").length - sendsBefore >= 2);
      rpc.advanceSlots(200);
      const e = await pending;
      // Expired, with its signature (callers leave such a one to their reconcilers), and why it never landed.
      expect([e.code, reasonOf(e), (e.extra.details as { signature?: string }).signature]).toEqual(["TRANSACTION_REJECTED", "blockhash_expired", parseTransaction(wire).signature]);
      expect(e.message).toContain("re-sent, it was refused");
      expect(rpc.calls.filter((c) => c === "sendTransaction").length - sendsBefore).toBeGreaterThanOrEqual(2); // re-sending goes on
      expect(await ledger.transactionStatus(parseTransaction(wire).signature)).toBeNull();
      expect((await ledger.getBalances(addr(alice))).sol).toBe(SOL);
    } finally {
      rpc.setStrictPreflight(false);
      await flaky.stop();
    }
  });

  test("an own transfer that does not land gives up its payer's turn after a while: the payer's next one is not held until it expires", async () => {
    const alice = wallet(SOL);
    const first = await signedTransfer(alice, addr(wallet(SOL)), "sol", SOL / 10n);
    const firstBase64 = Buffer.from(first).toString("base64");
    // The first transfer's sends reach no node (dropped under congestion, say); anything else goes through.
    const dropping: typeof fetch = (async (input: string | URL | Request, init?: RequestInit) => {
      if (typeof init?.body === "string" && init.body.includes('"sendTransaction"') && init.body.includes(firstBase64)) {
        return Response.json({ jsonrpc: "2.0", id: JSON.parse(init.body).id, result: parseTransaction(first).signature });
      }
      return fetch(input, init);
    }) as typeof fetch;
    const lossy = makeLedger(rpc.url, { fetch: dropping });
    try {
      const pending = failure(lossy.submit(first, { ownTransfer: true }));
      await Bun.sleep(50);
      const started = performance.now();
      const second = await lossy.submit(await signedTransfer(alice, addr(wallet(SOL)), "sol", SOL / 10n), { ownTransfer: true });
      const waited = performance.now() - started;
      expect(second.signature).toEqual(expect.any(String));
      // The turn is 25 polls (500 ms here), not the first one's whole life (the 180 s confirmation limit: its
      // blockhash never passes until the slots are moved below). A bound far from both, for a loaded machine.
      expect(waited).toBeLessThan(20_000);
      rpc.advanceSlots(200);
      expect(reasonOf(await pending)).toBe("blockhash_expired"); // the first was followed to its end all the same
    } finally {
      await lossy.stop();
    }
  });

  test("a blockhash refusal whose earlier landing cannot be looked up is unknown, never \"nothing was charged\"", async () => {
    const alice = wallet(SOL);
    const wire = await signedTransfer(alice, addr(wallet()), "sol", SOL / 10n);
    await ledger.submit(wire);
    rpc.expireBlockhash();
    const blind: typeof fetch = (async (input: string | URL | Request, init?: RequestInit) => {
      if (typeof init?.body === "string" && init.body.includes("searchTransactionHistory")) return new Response("unavailable", { status: 503 });
      return fetch(input, init);
    }) as typeof fetch;
    const flaky = makeLedger(rpc.url, { fetch: blind });
    try {
      for (const options of [{}, { ownTransfer: true }]) {
        const e = await failure(flaky.submit(wire, options));
        expect([e.code, (e.extra.details as { signature?: string }).signature]).toEqual(["CHAIN_UNAVAILABLE", parseTransaction(wire).signature]);
        expect(e.message).not.toContain("nothing was charged");
        expectNoSecret(e);
      }
    } finally {
      await flaky.stop();
    }
  });

  test("a node whose block height stops moving is waited for at most the confirmation limit, then the outcome is unknown with the signature", async () => {
    const alice = wallet(SOL);
    const wire = await signedTransfer(alice, addr(wallet()), "sol", SOL / 10n);
    const stuck = makeLedger(rpc.url, { confirmLimitMs: 500 });
    rpc.setDropTransactions(true);
    try {
      const e = await failure(stuck.submit(wire));
      expect([e.code, (e.extra.details as { signature?: string }).signature]).toEqual(["CHAIN_UNAVAILABLE", parseTransaction(wire).signature]);
      expect(e.message).toContain("outcome is unknown");
    } finally {
      rpc.setDropTransactions(false);
      await stuck.stop();
    }
  });

  test("a sent transaction that never lands is reported expired once the block height passes its blockhash", async () => {
    const alice = wallet(SOL);
    const wire = await signedTransfer(alice, addr(wallet()), "sol", SOL / 10n);
    rpc.setDropTransactions(true);
    try {
      const sendsBefore = rpc.calls.filter((c) => c === "sendTransaction").length;
      const pending = failure(ledger.submit(wire));
      // Sent (and dropped) before the blockhash passes: else the node's preflight would refuse it as unknown.
      await until(() => rpc.calls.filter((c) => c === "sendTransaction").length > sendsBefore);
      rpc.advanceSlots(200);
      const e = await pending;
      expect([e.code, reasonOf(e)]).toEqual(["TRANSACTION_REJECTED", "blockhash_expired"]);
      expect((e.extra.details as { signature: string }).signature).toBe(parseTransaction(wire).signature);
    } finally {
      rpc.setDropTransactions(false);
    }
    const sends = rpc.calls.filter((c) => c === "sendTransaction").length;
    expect(sends).toBeGreaterThan(0);
    expect((await ledger.getBalances(addr(alice))).sol).toBe(SOL);
  });

  test("a sent transaction not seen yet when the block height reaches its blockhash's last valid height can still land: it is followed, not said expired", async () => {
    const alice = wallet(SOL);
    const bob = addr(wallet());
    const wire = await signedTransfer(alice, bob, "sol", SOL / 10n);
    const { lastValidBlockHeight } = await ledger.latestBlockhash(); // the blockhash the transfer was built on
    expect(parseTransaction(wire).recentBlockhash).toBe(rpc.svm.latestBlockhash());
    rpc.setDropTransactions(true);
    let settled = false;
    let pending: Promise<SubmitResult>;
    try {
      const sendsBefore = rpc.calls.filter((c) => c === "sendTransaction").length;
      pending = ledger.submit(wire).finally(() => {
        settled = true;
      });
      pending.catch(() => {});
      await until(() => rpc.calls.filter((c) => c === "sendTransaction").length > sendsBefore);
      // The last height at which its blockhash is still valid (Solana: valid while height <= lastValidBlockHeight).
      rpc.advanceSlots(lastValidBlockHeight - rpc.blockHeight());
      expect(rpc.blockHeight()).toBe(lastValidBlockHeight);
      await Bun.sleep(200); // ten polls at this height
      expect(settled).toBe(false);
    } finally {
      rpc.setDropTransactions(false);
    }
    // A re-send lands at that very height.
    const result = await pending;
    expect(result.slot).toBe(lastValidBlockHeight);
    expect((await ledger.getBalances(bob)).sol).toBe(SOL / 10n);
  });

  test("bad, missing and wrong signatures, and bytes that are not a transaction", async () => {
    const alice = wallet(SOL);
    const unsigned = await ledger.buildTransfer({ from: addr(alice), to: addr(wallet()), token: "sol", amount: 1000n });
    expect(reasonOf(await failure(ledger.submit(unsigned)))).toBe("missing_signature");
    const forged = sign(unsigned, alice);
    forged[1] = forged[1]! ^ 0xff;
    const e = await failure(ledger.submit(forged));
    expect([e.code, reasonOf(e)]).toEqual(["TRANSACTION_REJECTED", "invalid_signature"]);
    const calls = rpc.calls.length;
    expect(reasonOf(await failure(ledger.submit(new Uint8Array([1, 2, 3]))))).toBe("malformed");
    expect(rpc.calls.length).toBe(calls);
    expect((await ledger.getBalances(addr(alice))).sol).toBe(SOL);
  });
});

describe("an RPC that is down, failing or slow", () => {
  async function closedPortUrl(): Promise<string> {
    const server = Bun.serve({ port: 0, hostname: "127.0.0.1", fetch: () => new Response("") });
    const url = `http://127.0.0.1:${server.port}/`;
    await server.stop(true);
    return url;
  }

  async function expectUnavailable(promise: Promise<unknown>, text?: string): Promise<void> {
    const e = await failure(promise);
    expect(e.code).toBe("CHAIN_UNAVAILABLE");
    expect(e.status).toBe(503);
    expect(e.message).toStartWith("Solana RPC unavailable: ");
    if (text !== undefined) expect(e.message).toContain(text);
    expectNoSecret(e);
  }

  test("nothing listening: every call is CHAIN_UNAVAILABLE and ping is false", async () => {
    const down = makeLedger(await closedPortUrl());
    const alice = wallet(SOL);
    const wire = await signedTransfer(alice, addr(wallet()), "sol", 1000n);
    await expectUnavailable(down.getBalances(addr(alice)), "connection failed");
    await expectUnavailable(down.accountExists(addr(alice)));
    await expectUnavailable(down.latestBlockhash());
    await expectUnavailable(down.buildTransfer({ from: addr(alice), to: addr(wallet()), token: "usdc", amount: 1n }));
    await expectUnavailable(down.submit(wire));
    await expectUnavailable(down.submit(wire, { ownTransfer: true }));
    await expectUnavailable(down.airdrop(addr(alice), { sol: SOL }));
    await expectUnavailable(down.getTransaction(parseTransaction(wire).signature));
    await expectUnavailable(down.history(addr(alice), { limit: 5 }));
    expect(await down.ping()).toBe(false);
    await down.stop();
  });

  test("a server that stops: ping turns false, calls fail", async () => {
    const own = await startLiteSvmRpc();
    const l = makeLedger(own.url);
    expect(await l.ping()).toBe(true);
    await own.stop();
    expect(await l.ping()).toBe(false);
    await expectUnavailable(l.getBalances(addr(wallet())));
    await l.stop();
  });

  test("HTTP 500, HTTP 429 and JSON-RPC errors are summarised without the URL's secrets", async () => {
    let status = 500;
    const server = Bun.serve({
      port: 0,
      hostname: "127.0.0.1",
      async fetch(request) {
        const body = (await request.json()) as { id: string };
        if (status !== 200) return new Response(`upstream http://127.0.0.1/?api-key=${SECRET} failed`, { status });
        return Response.json({
          jsonrpc: "2.0",
          id: body.id,
          error: { code: -32005, message: `Node is unhealthy; see ${request.url} (api-key=${SECRET})` },
        });
      },
    });
    const failing = makeLedger(`http://127.0.0.1:${server.port}/`);
    const wire = await signedTransfer(wallet(SOL), addr(wallet()), "sol", 1000n);
    try {
      await expectUnavailable(failing.getBalances(addr(wallet())), "HTTP 500");
      await expectUnavailable(failing.submit(wire), "HTTP 500");
      status = 429;
      await expectUnavailable(failing.latestBlockhash(), "HTTP 429");
      status = 200;
      await expectUnavailable(failing.getBalances(addr(wallet())), "-32005");
      await expectUnavailable(failing.getTransaction(parseTransaction(wire).signature), "Node is unhealthy");
      await expectUnavailable(failing.history(addr(wallet()), { limit: 3 }), "-32005");
      expect(await failing.ping()).toBe(false);
    } finally {
      await failing.stop();
      await server.stop(true);
    }
  });

  test("a send refused for a non-transaction reason is CHAIN_UNAVAILABLE, not a rejection", async () => {
    // Everything answers except sendTransaction, which fails like an overloaded node.
    const own = await startLiteSvmRpc();
    const server = Bun.serve({
      port: 0,
      hostname: "127.0.0.1",
      async fetch(request) {
        const body = (await request.json()) as { id: string; method: string };
        if (body.method === "sendTransaction") {
          return Response.json({ jsonrpc: "2.0", id: body.id, error: { code: -32005, message: `Node is behind by 120 slots (key ${SECRET})` } });
        }
        return fetch(own.url, { method: "POST", body: JSON.stringify(body), headers: { "content-type": "application/json" } });
      },
    });
    const proxied = makeLedger(`http://127.0.0.1:${server.port}/`);
    const alice = wallet();
    own.setLamports(addr(alice), SOL);
    try {
      const wire = sign(await proxied.buildTransfer({ from: addr(alice), to: addr(wallet()), token: "sol", amount: 1000n }), alice);
      const e = await failure(proxied.submit(wire));
      expect(e.code).toBe("CHAIN_UNAVAILABLE");
      expect(e.message).toContain("Node is behind");
      expect(e.message).not.toContain(SECRET);
    } finally {
      await proxied.stop();
      await server.stop(true);
      await own.stop();
    }
  });

  test("a redirect from the RPC URL is not followed: unavailable, and the other address is never asked", async () => {
    let reached = 0;
    const elsewhere = Bun.serve({ port: 0, hostname: "127.0.0.1", fetch: () => (reached++, Response.json({ jsonrpc: "2.0", id: 1, result: 0 })) });
    const redirector = Bun.serve({ port: 0, hostname: "127.0.0.1", fetch: () => new Response(null, { status: 307, headers: { location: `http://127.0.0.1:${elsewhere.port}/admin` } }) });
    const redirected = makeLedger(`http://127.0.0.1:${redirector.port}`);
    try {
      const e = await failure(redirected.getBalances(addr(wallet())));
      expect(e.code).toBe("CHAIN_UNAVAILABLE");
      expectNoSecret(e);
      expect(reached).toBe(0);
    } finally {
      await redirected.stop();
      redirector.stop(true);
      elsewhere.stop(true);
    }
  });

  test("a request that gets no answer times out", async () => {
    const server = Bun.serve({
      port: 0,
      hostname: "127.0.0.1",
      async fetch() {
        await Bun.sleep(10_000); // far past the bound below; the server is stopped before it answers
        return new Response("late");
      },
    });
    const slow = makeLedger(`http://127.0.0.1:${server.port}/`, { requestTimeoutMs: 100 });
    try {
      const started = performance.now();
      await expectUnavailable(slow.getBalances(addr(wallet())), "no answer within 100 ms");
      expect(performance.now() - started).toBeLessThan(2000); // the 100-ms limit, with room for a busy machine; the answer is 10 s away
      expect(await slow.ping()).toBe(false);
    } finally {
      await slow.stop();
      await server.stop(true);
    }
  });

  test("a stopped ledger answers nothing", async () => {
    const l = makeLedger(rpc.url);
    await l.stop();
    expect(await l.ping()).toBe(false);
    await expectUnavailable(l.getBalances(addr(wallet())), "stopped");
  });
});
