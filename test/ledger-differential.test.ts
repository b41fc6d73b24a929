// The embedded ledger judged by the real Solana runtime: the same transactions go through it and through
// LiteSVM (real System, SPL Token and Associated Token Account programs, signatures verified), and both
// must agree on confirmed / failed / rejected and on every resulting balance, fee payer included.
import { beforeAll, describe, expect, test } from "bun:test";
import { createPrivateKey, sign } from "node:crypto";
import { FailedTransactionMetadata, LiteSVM } from "litesvm";
import {
  ComputeBudgetProgram,
  Keypair,
  PublicKey,
  SYSVAR_RENT_PUBKEY,
  SystemProgram,
  TransactionInstruction,
  VersionedTransaction,
} from "@solana/web3.js";
import {
  ACCOUNT_SIZE,
  ASSOCIATED_TOKEN_PROGRAM_ID,
  AccountLayout,
  TOKEN_2022_PROGRAM_ID,
  TOKEN_PROGRAM_ID,
  createAssociatedTokenAccountIdempotentInstruction,
  createAssociatedTokenAccountInstruction,
  createTransferCheckedInstruction,
  createTransferInstruction,
} from "@solana/spl-token";
import { RENT_EXEMPT_TOKEN_ACCOUNT } from "../src/ledger/embedded/execute.ts";
import { createEmbeddedLedger, type EmbeddedLedger } from "../src/ledger/embedded/ledger.ts";
import { findAccount } from "../src/ledger/embedded/store.ts";
import { MEMO_PROGRAM, MEMO_V1_PROGRAM, associatedTokenAddress, compileTransaction, memoInstruction, transferInstructions } from "../src/ledger/transactions.ts";
import { AppError } from "../src/errors.ts";
import { testDeps } from "./helpers/deps.ts";
import { setMint, setSystemAccount, setTokenAccount } from "./helpers/litesvm-accounts.ts";

type Outcome = "confirmed" | "failed" | "rejected";

type Case = {
  name: string;
  expected: Outcome;
  /** The transaction's instructions; signed by `signers` (first = fee payer unless `feePayer`). */
  instructions: () => TransactionInstruction[];
  feePayer: () => Keypair;
  signers: () => Keypair[];
  version?: "legacy" | 0;
  /** Leave these signers' slots empty. */
  unsigned?: () => PublicKey[];
  /** Sign the message with these keys in place of the named signers (a wrong key in the slot). */
  impostors?: () => [PublicKey, Keypair][];
  /** Resubmit the exact bytes of an earlier case. */
  resubmitOf?: string;
  /**
   * Why both fail, where an outcome alone would not tell: a phrase of the embedded ledger's failure message
   * and one of the runtime's error or logs (several of the embedded ledger's checks back each other up).
   */
  why?: { embedded: string; svm: string };
};

const SOL = 1_000_000_000n;
const USDC = 1_000_000n;

let embedded: EmbeddedLedger;
let db: Awaited<ReturnType<typeof testDeps>>["db"];
const svm = new LiteSVM().withTransactionHistory(10_000n); // remembers every case's transaction (the duplicate case resubmits the first)
const alice = Keypair.generate();
const bob = Keypair.generate();
const carol = Keypair.generate();
const dave = Keypair.generate(); // funded with SOL only
const erin = Keypair.generate(); // exactly 1 SOL, to be left below the rent-exempt minimum
const frank = Keypair.generate(); // exactly 1 SOL, pays (or fails to pay) priority fees
const gina = Keypair.generate(); // no SOL; her token account's address is funded before it is created
const hank = Keypair.generate(); // 0.001 SOL: less than a token account's rent
const ivy = Keypair.generate(); // a USDC token account at her own address (no SOL account), see beforeAll
let usdcMint: string;
/** The service token's mint (the embedded ledger's second mint), and its decimals. */
let serviceMint: string;
let serviceDecimals: number;
const sentBytes = new Map<string, { embedded: Uint8Array; svm: Uint8Array }>();

/** An Ed25519 signature by `signer` over `message` (node:crypto from the keypair's 32-byte seed). */
function signBytes(signer: Keypair, message: Uint8Array): Uint8Array {
  const pkcs8 = Buffer.concat([Buffer.from("302e020100300506032b657004220420", "hex"), Buffer.from(signer.secretKey.subarray(0, 32))]);
  return new Uint8Array(sign(null, message, createPrivateKey({ key: pkcs8, format: "der", type: "pkcs8" })));
}

function signed(wire: Uint8Array, c: Case): Uint8Array {
  const tx = VersionedTransaction.deserialize(wire);
  const unsigned = new Set((c.unsigned?.() ?? []).map((k) => k.toBase58()));
  const impostors = new Map((c.impostors?.() ?? []).map(([slot, key]) => [slot.toBase58(), key]));
  const keys = tx.message.staticAccountKeys.map((k) => k.toBase58());
  const message = tx.message.serialize();
  for (const signer of c.signers()) {
    const address = signer.publicKey.toBase58();
    if (unsigned.has(address)) continue;
    // An impostor's signature goes in the named signer's slot.
    tx.signatures[keys.indexOf(address)] = signBytes(impostors.get(address) ?? signer, message);
  }
  return tx.serialize();
}

/** The outcome, and why it was not confirmed (the error's message; the runtime's error and logs). */
type Result = { outcome: Outcome; why: string };

async function runEmbedded(wire: Uint8Array): Promise<Result> {
  try {
    await embedded.submit(wire);
    return { outcome: "confirmed", why: "" };
  } catch (err) {
    if (!(err instanceof AppError)) throw err;
    if (err.code === "CONFLICT") return { outcome: "rejected", why: err.message };
    const reason = (err.extra.details as { reason?: string } | undefined)?.reason;
    if (err.code === "TRANSACTION_REJECTED") return { outcome: reason === "execution_failed" ? "failed" : "rejected", why: err.message };
    throw err;
  }
}

function runSvm(wire: Uint8Array, feePayer: PublicKey): Result {
  const before = svm.getBalance(feePayer) ?? 0n;
  const result = svm.sendTransaction(VersionedTransaction.deserialize(wire));
  if (!(result instanceof FailedTransactionMetadata)) return { outcome: "confirmed", why: "" };
  const why = [result.err().toString(), ...result.meta().logs()].join("\n");
  // A failed transaction is recorded and charged its fee; a rejected one changes nothing.
  return { outcome: (svm.getBalance(feePayer) ?? 0n) < before ? "failed" : "rejected", why };
}

async function runCase(c: Case): Promise<{ embedded: Result; svm: Result }> {
  const feePayer = c.feePayer().publicKey.toBase58();
  let embeddedWire: Uint8Array;
  let svmWire: Uint8Array;
  if (c.resubmitOf !== undefined) {
    const earlier = sentBytes.get(c.resubmitOf)!;
    embeddedWire = earlier.embedded;
    svmWire = earlier.svm;
  } else {
    // Identical instructions, keys and amounts; each copy signed over its own ledger's recent blockhash.
    const instructions = c.instructions();
    embeddedWire = signed(compileTransaction(instructions, feePayer, (await embedded.latestBlockhash()).blockhash, c.version), c);
    svmWire = signed(compileTransaction(instructions, feePayer, svm.latestBlockhash(), c.version), c);
    sentBytes.set(c.name, { embedded: embeddedWire, svm: svmWire });
  }
  for (const key of VersionedTransaction.deserialize(embeddedWire).message.staticAccountKeys) touched.add(key.toBase58());
  return { embedded: await runEmbedded(embeddedWire), svm: runSvm(svmWire, c.feePayer().publicKey) };
}

/** Every account key any case has named so far (wallets, token accounts, mints, random recipients). */
const touched = new Set<string>();
const SYSVAR_OWNER = "Sysvar1111111111111111111111111111111111111";

/**
 * Lamports (and, for token accounts, amounts) of every account the cases touched, as each ledger has
 * them. Programs and sysvars are left out: the embedded ledger does not keep them as accounts.
 */
async function balances(): Promise<{ embedded: Record<string, string>; svm: Record<string, string> }> {
  const e: Record<string, string> = {};
  const s: Record<string, string> = {};
  for (const address of touched) {
    const account = svm.getAccount(new PublicKey(address));
    if (account !== null && (account.executable || account.owner.toBase58() === SYSVAR_OWNER)) continue;
    const row = await findAccount(db, address);
    e[address] = row === null ? "none" : `${row.lamports}${row.kind === "token" ? `/${row.amount}` : ""}`;
    const isTokenAccount = account !== null && account.owner.equals(TOKEN_PROGRAM_ID) && account.data.length === ACCOUNT_SIZE;
    s[address] =
      account === null || account.lamports === 0
        ? "none"
        : `${account.lamports}${isTokenAccount ? `/${AccountLayout.decode(account.data).amount}` : ""}`;
  }
  return { embedded: e, svm: s };
}

/** How many leading bytes two addresses share: creating a token account costs 9 units per byte its address shares with its mint's and its payer's. */
function shared(a: PublicKey, b: PublicKey): number {
  const [x, y] = [a.toBytes(), b.toBytes()];
  let n = 0;
  while (n < 32 && x[n] === y[n]) n++;
  return n;
}

/** `owner`'s associated token account for `mint`, and the bump seed its derivation found. */
function ataAndBump(owner: PublicKey, mint: PublicKey): [PublicKey, number] {
  return PublicKey.findProgramAddressSync([owner.toBuffer(), TOKEN_PROGRAM_ID.toBuffer(), mint.toBuffer()], ASSOCIATED_TOKEN_PROGRAM_ID);
}

/** A new owner whose associated token account for `mint` passes `fits` (found by trying keys; the same one for both slacks of a case). */
const sharing = new Map<string, { owner: Keypair; ata: PublicKey; bump: number }>();
function ownerSharingWith(mint: PublicKey, fits: (ata: PublicKey) => boolean): { owner: Keypair; ata: PublicKey; bump: number } {
  const key = `${mint.toBase58()} ${fits.toString()}`;
  let found = sharing.get(key);
  while (found === undefined) {
    const owner = Keypair.generate();
    const [ata, bump] = ataAndBump(owner.publicKey, mint);
    if (fits(ata)) sharing.set(key, (found = { owner, ata, bump }));
  }
  return found;
}

/** `owner`'s USDC associated token account. */
function usdcAccount(owner: Keypair): PublicKey {
  return new PublicKey(associatedTokenAddress(owner.publicKey.toBase58(), usdcMint));
}

/** `owner`'s associated token account for the service token. */
function serviceTokenAccount(owner: Keypair): PublicKey {
  return new PublicKey(associatedTokenAddress(owner.publicKey.toBase58(), serviceMint));
}

function solTransfer(from: Keypair, to: PublicKey, lamports: bigint): TransactionInstruction {
  return SystemProgram.transfer({ fromPubkey: from.publicKey, toPubkey: to, lamports });
}

function usdcTransfer(from: Keypair, to: Keypair, amount: bigint, createRecipientAccount: boolean, feePayer = from): TransactionInstruction[] {
  return transferInstructions({
    from: from.publicKey.toBase58(),
    to: to.publicKey.toBase58(),
    feePayer: feePayer.publicKey.toBase58(),
    amount,
    spl: { mint: usdcMint, decimals: 6 },
    createRecipientAccount,
    memo: null,
  });
}

/** Gives `owner` the same SOL, USDC and service tokens in LiteSVM as the embedded airdrop gave it. */
function fundInSvm(owner: Keypair, lamports: bigint, usdc: bigint, token: bigint): void {
  setSystemAccount(svm, owner.publicKey, lamports);
  if (usdc > 0n) {
    setTokenAccount(svm, usdcAccount(owner), { mint: new PublicKey(usdcMint), owner: owner.publicKey, amount: usdc });
  }
  if (token > 0n) {
    setTokenAccount(svm, serviceTokenAccount(owner), { mint: new PublicKey(serviceMint), owner: owner.publicKey, amount: token });
  }
}

beforeAll(async () => {
  const t = await testDeps();
  db = t.db;
  embedded = await createEmbeddedLedger(t.deps);
  const tokens = await embedded.tokens();
  usdcMint = tokens.find((x) => x.key === "usdc")!.mint!;
  const service = tokens.find((x) => x.kind === "spl" && x.key !== "usdc")!;
  [serviceMint, serviceDecimals] = [service.mint!, service.decimals];

  setMint(svm, new PublicKey(usdcMint), { decimals: 6, supply: 10n ** 18n, authority: Keypair.generate().publicKey });
  setMint(svm, new PublicKey(serviceMint), { decimals: serviceDecimals, supply: 10n ** 18n, authority: Keypair.generate().publicKey });

  for (const [k, sol, usdc, token] of [
    [alice, 2n * SOL, 1000n * USDC, 500n * 10n ** BigInt(serviceDecimals)],
    [bob, 1n * SOL, 0n, 0n],
    [dave, 1n * SOL, 0n, 0n],
    [erin, 1n * SOL, 0n, 0n],
    [frank, 1n * SOL, 0n, 0n],
    [hank, SOL / 1000n, 0n, 0n],
  ] as const) {
    await embedded.airdrop(k.publicKey.toBase58(), { sol, usdc, token });
    fundInSvm(k, sol, usdc, token);
  }

  // A token account at a wallet's own key: a cluster can hold one (CreateAccount, then InitializeAccount),
  // the embedded ledger has no instruction that makes one, so it is written into its store directly.
  setTokenAccount(svm, ivy.publicKey, { mint: new PublicKey(usdcMint), owner: alice.publicKey, amount: 0n });
  await db.write(() =>
    db.sqlite
      .query("INSERT INTO ledger_accounts (address, kind, lamports, mint, owner, amount) VALUES (?, 'token', ?, ?, ?, 0)")
      .run(ivy.publicKey.toBase58(), RENT_EXEMPT_TOKEN_ACCOUNT, usdcMint, alice.publicKey.toBase58()),
  );
});

const cases: Case[] = [
  {
    name: "SOL transfer to a new account",
    expected: "confirmed",
    instructions: () => [solTransfer(alice, carol.publicKey, SOL / 2n)],
    feePayer: () => alice,
    signers: () => [alice],
  },
  {
    name: "SOL transfer, v0 message",
    expected: "confirmed",
    instructions: () => [solTransfer(alice, carol.publicKey, SOL / 10n)],
    feePayer: () => alice,
    signers: () => [alice],
    version: 0,
  },
  {
    name: "USDC transfer creating the recipient's token account",
    expected: "confirmed",
    instructions: () => usdcTransfer(alice, bob, 25n * USDC, true),
    feePayer: () => alice,
    signers: () => [alice],
  },
  {
    name: "USDC transfer to an existing token account (CreateIdempotent is a no-op)",
    expected: "confirmed",
    instructions: () => usdcTransfer(alice, bob, 5n * USDC, true),
    feePayer: () => alice,
    signers: () => [alice],
  },
  {
    name: "USDC transfer without creation, v0",
    expected: "confirmed",
    instructions: () => usdcTransfer(alice, bob, 1n * USDC, false),
    feePayer: () => alice,
    signers: () => [alice],
    version: 0,
  },
  {
    name: "compute budget price and limit, memo, another fee payer",
    expected: "confirmed",
    instructions: () => [
      ComputeBudgetProgram.setComputeUnitLimit({ units: 300_000 }),
      ComputeBudgetProgram.setComputeUnitPrice({ microLamports: 12_345 }),
      solTransfer(alice, bob.publicKey, 1_000_000n),
      memoInstruction("order 42 ✓"),
    ],
    feePayer: () => dave,
    signers: () => [dave, alice],
  },
  {
    name: "price without a limit (default units per instruction)",
    expected: "confirmed",
    instructions: () => [ComputeBudgetProgram.setComputeUnitPrice({ microLamports: 7 }), solTransfer(bob, carol.publicKey, 2_000_000n)],
    feePayer: () => bob,
    signers: () => [bob],
  },
  {
    name: "a high price without a limit: builtin instructions count 3,000 units each",
    expected: "confirmed",
    instructions: () => [ComputeBudgetProgram.setComputeUnitPrice({ microLamports: 1_000_000 }), solTransfer(bob, carol.publicKey, 3_000_000n)],
    feePayer: () => bob,
    signers: () => [bob],
  },
  {
    name: "a high price without a limit: program instructions count 200,000 units each",
    expected: "confirmed",
    instructions: () => [ComputeBudgetProgram.setComputeUnitPrice({ microLamports: 1_000 }), ...usdcTransfer(alice, bob, 2n, true), memoInstruction("m")],
    feePayer: () => alice,
    signers: () => [alice],
  },
  // Compute units: builtins use 150 each, TransferChecked 105, an account's creation 13,525 plus 1,500 per
  // bump-seed try, a memo 1,382 plus ~330-17,000 per character; over the limit the transaction fails, its
  // fee charged.
  ...[0, 299, 300].map((units): Case => ({
    name: `a SOL transfer under a compute unit limit of ${units} (it and the limit use 300)`,
    expected: units < 300 ? "failed" : "confirmed",
    instructions: () => [ComputeBudgetProgram.setComputeUnitLimit({ units }), solTransfer(alice, bob.publicKey, 1_000n)],
    feePayer: () => alice,
    signers: () => [alice],
  })),
  ...[254, 255].map((units): Case => ({
    name: `a USDC TransferChecked under a compute unit limit of ${units} (255 used)`,
    expected: units < 255 ? "failed" : "confirmed",
    instructions: () => [ComputeBudgetProgram.setComputeUnitLimit({ units }), ...usdcTransfer(alice, bob, 1n, false)],
    feePayer: () => alice,
    signers: () => [alice],
  })),
  ...[-1, 0].map((slack): Case => ({
    name: `a token account's creation under a limit ${slack < 0 ? "one unit short of" : "exactly"} what it uses`,
    expected: slack < 0 ? "failed" : "confirmed",
    instructions: () => {
      const mint = new PublicKey(usdcMint);
      const [ata, bump] = ataAndBump(frank.publicKey, mint);
      const units = 150 + 13_525 + 1_500 * (255 - bump) + 9 * (shared(ata, mint) + shared(ata, alice.publicKey)) + 105;
      return [ComputeBudgetProgram.setComputeUnitLimit({ units: units + slack }), ...usdcTransfer(alice, frank, 1n, true)];
    },
    feePayer: () => alice,
    signers: () => [alice],
  })),
  // A wallet making its own token account (payer = owner) uses ~100 units less.
  ...[-1, 0].map((slack): Case => ({
    name: `a wallet creating its own token account under a limit ${slack < 0 ? "one unit short of" : "exactly"} what it uses`,
    expected: slack < 0 ? "failed" : "confirmed",
    instructions: () => {
      const mint = new PublicKey(usdcMint);
      const [ata, bump] = ataAndBump(dave.publicKey, mint);
      return [
        ComputeBudgetProgram.setComputeUnitLimit({ units: 150 + 13_525 - 101 + 1_500 * (255 - bump) + 9 * (shared(ata, mint) + shared(ata, dave.publicKey)) + slack }),
        createAssociatedTokenAccountIdempotentInstruction(dave.publicKey, ata, dave.publicKey, mint),
      ];
    },
    feePayer: () => dave,
    signers: () => [dave],
  })),
  // The program compares the new account's address with its mint's and its payer's byte by byte: 9 units
  // for each leading byte they share (a random account shares one with either about 1 % of the time).
  ...[-1, 0].map((slack): Case => ({
    name: `a token account whose address shares its first byte with its mint's, under a limit ${slack < 0 ? "one unit short of" : "exactly"} what it uses`,
    expected: slack < 0 ? "failed" : "confirmed",
    instructions: () => {
      const mint = new PublicKey(usdcMint);
      const { owner, ata, bump } = ownerSharingWith(mint, (ata) => shared(ata, mint) === 1 && shared(ata, alice.publicKey) === 0);
      const units = 150 + 13_525 + 1_500 * (255 - bump) + 9 + slack;
      return [ComputeBudgetProgram.setComputeUnitLimit({ units }), createAssociatedTokenAccountIdempotentInstruction(alice.publicKey, ata, owner.publicKey, mint)];
    },
    feePayer: () => alice,
    signers: () => [alice],
  })),
  // A wallet's own existing account looked at by itself: 99 units less than by another payer.
  ...[-1, 0].map((slack): Case => ({
    name: `a wallet's idempotent look at its own existing token account under a limit ${slack < 0 ? "one unit short of" : "exactly"} what it uses`,
    expected: slack < 0 ? "failed" : "confirmed",
    instructions: () => {
      const mint = new PublicKey(usdcMint);
      const [ata, bump] = ataAndBump(alice.publicKey, mint);
      return [
        ComputeBudgetProgram.setComputeUnitLimit({ units: 150 + 4_437 - 99 + 1_500 * (255 - bump) + slack }),
        createAssociatedTokenAccountIdempotentInstruction(alice.publicKey, ata, alice.publicKey, mint),
      ];
    },
    feePayer: () => alice,
    signers: () => [alice],
  })),
  {
    name: "x402's layout (a limit of 20,000) with a memo of 54 quote characters: 19,739 units, confirmed",
    expected: "confirmed",
    instructions: () => [
      ComputeBudgetProgram.setComputeUnitLimit({ units: 20_000 }),
      ComputeBudgetProgram.setComputeUnitPrice({ microLamports: 1 }),
      ...usdcTransfer(alice, bob, 1n, false),
      memoInstruction('"'.repeat(54)),
    ],
    feePayer: () => alice,
    signers: () => [alice],
  },
  {
    name: "a memo of 600 characters needs more than the 200,000 units a program instruction gets by default",
    expected: "failed",
    instructions: () => [memoInstruction("a".repeat(600))],
    feePayer: () => alice,
    signers: () => [alice],
  },
  {
    name: "a memo naming its signer under a limit of 10,000: logging the signer alone costs over 12,000 units",
    expected: "failed",
    instructions: () => [
      ComputeBudgetProgram.setComputeUnitLimit({ units: 10_000 }),
      new TransactionInstruction({
        programId: new PublicKey(MEMO_PROGRAM),
        keys: [{ pubkey: bob.publicKey, isSigner: true, isWritable: false }],
        data: Buffer.from("signed"),
      }),
    ],
    feePayer: () => alice,
    signers: () => [alice, bob],
  },
  {
    name: "SOL overdraw fails and charges the fee",
    expected: "failed",
    instructions: () => [solTransfer(bob, carol.publicKey, 50n * SOL)],
    feePayer: () => bob,
    signers: () => [bob],
  },
  {
    name: "USDC overdraw fails and charges the fee",
    expected: "failed",
    instructions: () => usdcTransfer(bob, alice, 10_000n * USDC, false),
    feePayer: () => bob,
    signers: () => [bob],
  },
  {
    name: "a new account left below the rent-exempt minimum fails",
    expected: "failed",
    instructions: () => [solTransfer(alice, Keypair.generate().publicKey, 1_000n)],
    feePayer: () => alice,
    signers: () => [alice],
  },
  {
    name: "a sender left below the rent-exempt minimum fails",
    expected: "failed",
    instructions: () => [solTransfer(erin, carol.publicKey, 0n), solTransfer(erin, alice.publicKey, SOL - 5_000n - 100_000n)],
    feePayer: () => erin,
    signers: () => [erin],
  },
  {
    name: "a token transfer signed by someone who does not own the source fails",
    expected: "failed",
    instructions: () => [
      createTransferCheckedInstruction(usdcAccount(alice), new PublicKey(usdcMint), usdcAccount(bob), bob.publicKey, 1n, 6),
    ],
    feePayer: () => bob,
    signers: () => [bob],
  },
  {
    name: "TransferChecked with the wrong decimals fails",
    expected: "failed",
    instructions: () => [
      createTransferCheckedInstruction(usdcAccount(alice), new PublicKey(usdcMint), usdcAccount(bob), alice.publicKey, 1n, 9),
    ],
    feePayer: () => alice,
    signers: () => [alice],
  },
  {
    name: "plain Token Transfer",
    expected: "confirmed",
    instructions: () => [
      createTransferInstruction(usdcAccount(alice), usdcAccount(bob), alice.publicKey, 3n),
    ],
    feePayer: () => alice,
    signers: () => [alice],
  },
  {
    name: "Create (not idempotent) of an existing token account fails",
    expected: "failed",
    instructions: () => [
      createAssociatedTokenAccountInstruction(alice.publicKey, usdcAccount(bob), bob.publicKey, new PublicKey(usdcMint)),
    ],
    feePayer: () => alice,
    signers: () => [alice],
    why: { embedded: "the associated token account already exists", svm: "IllegalOwner" },
  },
  // Token accounts of different mints, and accounts that are no token accounts.
  {
    name: "a Token Transfer from a service-token account into a USDC account fails (the mints differ)",
    expected: "failed",
    instructions: () => [createTransferInstruction(serviceTokenAccount(alice), usdcAccount(bob), alice.publicKey, 1n)],
    feePayer: () => alice,
    signers: () => [alice],
  },
  {
    name: "a TransferChecked from a service-token account into a USDC account, naming the service mint, fails",
    expected: "failed",
    instructions: () => [
      createTransferCheckedInstruction(serviceTokenAccount(alice), new PublicKey(serviceMint), usdcAccount(bob), alice.publicKey, 1n, serviceDecimals),
    ],
    feePayer: () => alice,
    signers: () => [alice],
  },
  {
    name: "a USDC TransferChecked naming the service token's mint (its decimals right) fails",
    expected: "failed",
    instructions: () => [
      createTransferCheckedInstruction(usdcAccount(alice), new PublicKey(serviceMint), usdcAccount(bob), alice.publicKey, 1n, serviceDecimals),
    ],
    feePayer: () => alice,
    signers: () => [alice],
  },
  {
    name: "a Token Transfer whose source is a wallet's SOL account, not a token account, fails",
    expected: "failed",
    instructions: () => [createTransferInstruction(bob.publicKey, usdcAccount(alice), bob.publicKey, 1n)],
    feePayer: () => bob,
    signers: () => [bob],
    why: { embedded: `${bob.publicKey.toBase58()} is not a token account`, svm: "invalid account data" },
  },
  {
    name: "a Token Transfer into a wallet's SOL account, not a token account, fails",
    expected: "failed",
    instructions: () => [createTransferInstruction(usdcAccount(alice), bob.publicKey, alice.publicKey, 1n)],
    feePayer: () => alice,
    signers: () => [alice],
    why: { embedded: `${bob.publicKey.toBase58()} is not a token account`, svm: "invalid account data" },
  },
  // Associated token accounts the program refuses to create.
  {
    name: "an ATA Create at an address that is not the owner's associated token account fails",
    expected: "failed",
    instructions: () => [
      createAssociatedTokenAccountInstruction(alice.publicKey, Keypair.generate().publicKey, Keypair.generate().publicKey, new PublicKey(usdcMint)),
    ],
    feePayer: () => alice,
    signers: () => [alice],
  },
  ...(
    [
      ["a token account", () => usdcAccount(alice)],
      ["a wallet's SOL account", () => bob.publicKey],
    ] as const
  ).map(
    ([what, mint]): Case => ({
      name: `an ATA Create whose mint is ${what}, not a mint, fails`,
      expected: "failed",
      instructions: () => {
        const owner = Keypair.generate().publicKey;
        const [ata] = ataAndBump(owner, mint());
        return [createAssociatedTokenAccountInstruction(alice.publicKey, ata, owner, mint())];
      },
      feePayer: () => alice,
      signers: () => [alice],
    }),
  ),
  {
    name: "an ATA Create whose payer cannot pay the account's rent fails",
    expected: "failed",
    instructions: () => {
      const owner = Keypair.generate();
      return [createAssociatedTokenAccountInstruction(hank.publicKey, usdcAccount(owner), owner.publicKey, new PublicKey(usdcMint))];
    },
    feePayer: () => alice,
    signers: () => [alice, hank],
  },
  {
    name: "an ATA Create whose payer is a token account (at a wallet's key, signing) fails: only a SOL account pays",
    expected: "failed",
    instructions: () => {
      const owner = Keypair.generate();
      return [createAssociatedTokenAccountInstruction(ivy.publicKey, usdcAccount(owner), owner.publicKey, new PublicKey(usdcMint))];
    },
    feePayer: () => alice,
    signers: () => [alice, ivy],
  },
  {
    name: "CreateIdempotent of an existing token account with a wrong System Program account: the program never calls it",
    expected: "confirmed",
    instructions: () => {
      const ix = createAssociatedTokenAccountIdempotentInstruction(alice.publicKey, usdcAccount(bob), bob.publicKey, new PublicKey(usdcMint));
      ix.keys[4] = { pubkey: carol.publicKey, isSigner: false, isWritable: false };
      return [ix];
    },
    feePayer: () => alice,
    signers: () => [alice],
  },
  {
    name: "Create of a new token account with a wrong System Program account fails",
    expected: "failed",
    instructions: () => {
      const owner = Keypair.generate().publicKey;
      const ix = createAssociatedTokenAccountInstruction(alice.publicKey, new PublicKey(associatedTokenAddress(owner.toBase58(), usdcMint)), owner, new PublicKey(usdcMint));
      ix.keys[4] = { pubkey: carol.publicKey, isSigner: false, isWritable: false };
      return [ix];
    },
    feePayer: () => alice,
    signers: () => [alice],
  },
  {
    name: "SOL sent to the address of a token account not created yet",
    expected: "confirmed",
    instructions: () => [solTransfer(alice, usdcAccount(gina), 3_000_000n)],
    feePayer: () => alice,
    signers: () => [alice],
  },
  {
    name: "Create at an address already holding the rent: the payer pays nothing, so need not sign",
    expected: "confirmed",
    instructions: () => {
      const ix = createAssociatedTokenAccountInstruction(bob.publicKey, usdcAccount(gina), gina.publicKey, new PublicKey(usdcMint));
      ix.keys[0] = { pubkey: bob.publicKey, isSigner: false, isWritable: false };
      return [ix];
    },
    feePayer: () => alice,
    signers: () => [alice],
  },
  {
    name: "a SOL transfer from a wallet that did not sign fails, and moves nothing (only the fee payer signed)",
    expected: "failed",
    instructions: () => {
      const ix = solTransfer(bob, carol.publicKey, 1_000_000n);
      ix.keys[0] = { pubkey: bob.publicKey, isSigner: false, isWritable: true };
      return [ix];
    },
    feePayer: () => alice,
    signers: () => [alice],
    why: { embedded: "missing required signature of the sender", svm: "MissingRequiredSignature" },
  },
  {
    name: "a token transfer whose source account's owner did not sign fails, and moves nothing",
    expected: "failed",
    instructions: () => {
      const ix = createTransferCheckedInstruction(usdcAccount(bob), new PublicKey(usdcMint), usdcAccount(alice), bob.publicKey, 1n * USDC, 6);
      ix.keys[3] = { pubkey: bob.publicKey, isSigner: false, isWritable: false };
      return [ix];
    },
    feePayer: () => alice,
    signers: () => [alice],
    why: { embedded: "missing required signature of the token account owner", svm: "MissingRequiredSignature" },
  },
  {
    name: "Create of a new token account naming as its payer a wallet that did not sign fails: its rent is not taken",
    expected: "failed",
    instructions: () => {
      const owner = Keypair.generate();
      const ix = createAssociatedTokenAccountInstruction(bob.publicKey, usdcAccount(owner), owner.publicKey, new PublicKey(usdcMint));
      ix.keys[0] = { pubkey: bob.publicKey, isSigner: false, isWritable: true };
      return [ix];
    },
    feePayer: () => alice,
    signers: () => [alice],
    why: { embedded: "missing required signature of the payer", svm: "signer privilege escalated" },
  },
  {
    name: "a memo naming an account that did not sign fails",
    expected: "failed",
    instructions: () => [
      new TransactionInstruction({
        programId: new PublicKey(MEMO_PROGRAM),
        keys: [{ pubkey: bob.publicKey, isSigner: false, isWritable: false }],
        data: Buffer.from("signed by bob?"),
      }),
    ],
    feePayer: () => alice,
    signers: () => [alice],
  },
  {
    name: "a memo signed by the account it names",
    expected: "confirmed",
    instructions: () => [
      new TransactionInstruction({
        programId: new PublicKey(MEMO_PROGRAM),
        keys: [{ pubkey: bob.publicKey, isSigner: true, isWritable: false }],
        data: Buffer.from("signed by bob"),
      }),
    ],
    feePayer: () => alice,
    signers: () => [alice, bob],
  },
  {
    name: "a Memo v1 naming an account that did not sign: v1 checks no signer",
    expected: "confirmed",
    instructions: () => [
      new TransactionInstruction({
        programId: new PublicKey(MEMO_V1_PROGRAM),
        keys: [{ pubkey: bob.publicKey, isSigner: false, isWritable: false }],
        data: Buffer.from("names bob, unsigned"),
      }),
    ],
    feePayer: () => alice,
    signers: () => [alice],
  },
  {
    name: "a Memo v1 of 600 characters: v1 logs nothing and needs a few hundred units",
    expected: "confirmed",
    instructions: () => [new TransactionInstruction({ programId: new PublicKey(MEMO_V1_PROGRAM), keys: [], data: Buffer.from("a".repeat(600)) })],
    feePayer: () => alice,
    signers: () => [alice],
  },
  {
    name: "a Memo v1 that is not UTF-8 fails",
    expected: "failed",
    instructions: () => [new TransactionInstruction({ programId: new PublicKey(MEMO_V1_PROGRAM), keys: [], data: Buffer.from([0x61, 0xff]) })],
    feePayer: () => alice,
    signers: () => [alice],
  },
  {
    name: "a Token Transfer and a TransferChecked with trailing data bytes: SPL Token ignores them",
    expected: "confirmed",
    instructions: () => {
      const plain = createTransferInstruction(usdcAccount(alice), usdcAccount(bob), alice.publicKey, 2n);
      const checked = createTransferCheckedInstruction(usdcAccount(alice), new PublicKey(usdcMint), usdcAccount(bob), alice.publicKey, 3n, 6);
      return [
        new TransactionInstruction({ programId: TOKEN_PROGRAM_ID, keys: plain.keys, data: Buffer.concat([plain.data, Buffer.from([7])]) }),
        new TransactionInstruction({ programId: TOKEN_PROGRAM_ID, keys: checked.keys, data: Buffer.concat([checked.data, Buffer.from([7, 8])]) }),
      ];
    },
    feePayer: () => alice,
    signers: () => [alice],
  },
  {
    name: "SetComputeUnitLimit and SetComputeUnitPrice with trailing data bytes: the runtime ignores them",
    expected: "confirmed",
    instructions: () => {
      const limit = ComputeBudgetProgram.setComputeUnitLimit({ units: 10_000 });
      const price = ComputeBudgetProgram.setComputeUnitPrice({ microLamports: 5 });
      return [
        new TransactionInstruction({ programId: limit.programId, keys: [], data: Buffer.concat([limit.data, Buffer.from([9])]) }),
        new TransactionInstruction({ programId: price.programId, keys: [], data: Buffer.concat([price.data, Buffer.from([9, 9])]) }),
        solTransfer(alice, bob.publicKey, 1_000n),
      ];
    },
    feePayer: () => alice,
    signers: () => [alice],
  },
  // Instructions of a supported kind that their program cannot read: a cluster executes and fails them.
  {
    name: "an ATA CreateIdempotent with a trailing data byte fails (the program reads its data exactly) and charges the fee",
    expected: "failed",
    instructions: () => {
      const ix = createAssociatedTokenAccountIdempotentInstruction(alice.publicKey, usdcAccount(carol), carol.publicKey, new PublicKey(usdcMint));
      return [new TransactionInstruction({ programId: ix.programId, keys: ix.keys, data: Buffer.concat([ix.data, Buffer.from([0])]) })];
    },
    feePayer: () => alice,
    signers: () => [alice],
  },
  {
    name: "a System Transfer naming only its sender fails (missing account)",
    expected: "failed",
    instructions: () => {
      const ix = solTransfer(alice, bob.publicKey, 1_000n);
      return [new TransactionInstruction({ programId: SystemProgram.programId, keys: ix.keys.slice(0, 1), data: ix.data })];
    },
    feePayer: () => alice,
    signers: () => [alice],
  },
  {
    name: "a System Transfer with 8 bytes of data fails",
    expected: "failed",
    instructions: () => {
      const ix = solTransfer(alice, bob.publicKey, 1_000_000n);
      return [new TransactionInstruction({ programId: SystemProgram.programId, keys: ix.keys, data: ix.data.subarray(0, 8) })];
    },
    feePayer: () => alice,
    signers: () => [alice],
  },
  {
    name: "a Token Transfer with two accounts fails",
    expected: "failed",
    instructions: () => {
      const ix = createTransferInstruction(usdcAccount(alice), usdcAccount(bob), alice.publicKey, 3n);
      return [new TransactionInstruction({ programId: TOKEN_PROGRAM_ID, keys: ix.keys.slice(0, 2), data: ix.data })];
    },
    feePayer: () => alice,
    signers: () => [alice],
  },
  {
    name: "a TransferChecked with too little data fails",
    expected: "failed",
    instructions: () => {
      const ix = createTransferCheckedInstruction(usdcAccount(alice), new PublicKey(usdcMint), usdcAccount(bob), alice.publicKey, 3n, 6);
      return [new TransactionInstruction({ programId: TOKEN_PROGRAM_ID, keys: ix.keys, data: ix.data.subarray(0, 9) })];
    },
    feePayer: () => alice,
    signers: () => [alice],
  },
  {
    name: "a CreateIdempotent with five accounts fails",
    expected: "failed",
    instructions: () => {
      const [create] = usdcTransfer(alice, frank, 1n, true);
      return [new TransactionInstruction({ programId: ASSOCIATED_TOKEN_PROGRAM_ID, keys: create!.keys.slice(0, 5), data: create!.data })];
    },
    feePayer: () => alice,
    signers: () => [alice],
  },
  {
    name: "SOL and USDC sent to oneself",
    expected: "confirmed",
    instructions: () => [solTransfer(alice, alice.publicKey, 12_345n), ...usdcTransfer(alice, alice, 4n, false)],
    feePayer: () => alice,
    signers: () => [alice],
  },
  {
    name: "SOL sent to a sysvar fails: reserved accounts are read-only",
    expected: "failed",
    instructions: () => [solTransfer(alice, SYSVAR_RENT_PUBKEY, 1_000_000n)],
    feePayer: () => alice,
    signers: () => [alice],
  },
  {
    name: "SOL sent to a program the transaction does not call",
    expected: "confirmed",
    instructions: () => [solTransfer(alice, ASSOCIATED_TOKEN_PROGRAM_ID, 1_000_000n)],
    feePayer: () => alice,
    signers: () => [alice],
  },
  {
    name: "1,000 lamports to each deployed program the transaction does not call: their accounts stay rent exempt",
    expected: "confirmed",
    instructions: () =>
      [TOKEN_PROGRAM_ID, TOKEN_2022_PROGRAM_ID, ASSOCIATED_TOKEN_PROGRAM_ID, new PublicKey(MEMO_PROGRAM), new PublicKey(MEMO_V1_PROGRAM)].map((program) =>
        solTransfer(alice, program, 1_000n),
      ),
    feePayer: () => alice,
    signers: () => [alice],
  },
  {
    name: "a transfer of 0 lamports from a read-only signer fails",
    expected: "failed",
    instructions: () => [
      new TransactionInstruction({
        programId: SystemProgram.programId,
        keys: [
          { pubkey: bob.publicKey, isSigner: true, isWritable: false },
          { pubkey: carol.publicKey, isSigner: false, isWritable: true },
        ],
        data: SystemProgram.transfer({ fromPubkey: bob.publicKey, toPubkey: carol.publicKey, lamports: 0n }).data,
      }),
    ],
    feePayer: () => alice,
    signers: () => [alice, bob],
  },
  {
    name: "a token transfer into a read-only token account fails",
    expected: "failed",
    instructions: () => {
      const ix = createTransferCheckedInstruction(usdcAccount(alice), new PublicKey(usdcMint), usdcAccount(bob), alice.publicKey, 5n, 6);
      ix.keys[2]!.isWritable = false;
      return [ix];
    },
    feePayer: () => alice,
    signers: () => [alice],
  },
  {
    name: "a fee payer who cannot pay the fee is rejected",
    expected: "rejected",
    instructions: () => [
      ComputeBudgetProgram.setComputeUnitLimit({ units: 1_000_000 }),
      ComputeBudgetProgram.setComputeUnitPrice({ microLamports: 5_000_000_000 }), // 5,000 SOL of priority fee
      memoInstruction("too dear"),
    ],
    feePayer: () => frank,
    signers: () => [frank],
  },
  {
    name: "a fee payer the fee would leave below the rent-exempt minimum is rejected",
    expected: "rejected",
    instructions: () => [
      ComputeBudgetProgram.setComputeUnitLimit({ units: 1_000_000 }),
      // Priority fee = price in lamports at 1,000,000 units: leaves frank 500,000 lamports.
      ComputeBudgetProgram.setComputeUnitPrice({ microLamports: Number(SOL - 5_000n - 500_000n) }),
      memoInstruction("almost all"),
    ],
    feePayer: () => frank,
    signers: () => [frank],
  },
  {
    name: "a wrong key's signature in the sender's slot is rejected",
    expected: "rejected",
    instructions: () => [solTransfer(alice, bob.publicKey, 777n + SOL / 100n)],
    feePayer: () => alice,
    signers: () => [alice],
    impostors: () => [[alice.publicKey, carol]],
  },
  {
    name: "a missing signature is rejected",
    expected: "rejected",
    instructions: () => [solTransfer(alice, bob.publicKey, 778n + SOL / 100n)],
    feePayer: () => dave,
    signers: () => [dave, alice],
    unsigned: () => [alice.publicKey],
  },
  {
    name: "a fee payer without SOL is rejected",
    expected: "rejected",
    instructions: () => [memoInstruction("no money")],
    feePayer: () => Keypair.fromSecretKey(emptyPayer.secretKey),
    signers: () => [emptyPayer],
  },
  {
    name: "the same bytes twice: the second is rejected",
    expected: "rejected",
    instructions: () => [],
    feePayer: () => alice,
    signers: () => [alice],
    resubmitOf: "SOL transfer to a new account",
  },
];
const emptyPayer = Keypair.generate();

describe("embedded ledger vs LiteSVM (the real runtime)", () => {
  for (const c of cases) {
    test(c.name, async () => {
      const result = await runCase(c);
      expect({ embedded: result.embedded.outcome, svm: result.svm.outcome }).toEqual({ embedded: c.expected, svm: c.expected });
      if (c.why !== undefined) {
        expect(result.embedded.why).toContain(c.why.embedded);
        expect(result.svm.why).toContain(c.why.svm);
      }
      const after = await balances();
      expect(after.embedded).toEqual(after.svm);
    });
  }
});
