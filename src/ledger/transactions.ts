// Solana wire-format transactions: building transfers with @solana/web3.js v1 and @solana/spl-token, and
// parsing signed bytes into the instruction subset the service understands (ledger.md). Both ledgers
// read transactions through parseTransaction, so they see transfers identically.
import {
  ComputeBudgetProgram,
  PublicKey,
  SystemProgram,
  Transaction,
  TransactionInstruction,
  TransactionMessage,
  VersionedTransaction,
} from "@solana/web3.js";
import {
  ASSOCIATED_TOKEN_PROGRAM_ID,
  TOKEN_PROGRAM_ID,
  createAssociatedTokenAccountIdempotentInstruction,
  createTransferCheckedInstruction,
  getAssociatedTokenAddressSync,
} from "@solana/spl-token";
import { AppError, fieldError, reasonOf, requireWellFormed } from "../errors.ts";
import { decodeAddress, encodeBase58 } from "../lib/encoding.ts";
import type { SignatureVerifier } from "../lib/verifier.ts";

export const SYSTEM_PROGRAM = SystemProgram.programId.toBase58();
export const TOKEN_PROGRAM = TOKEN_PROGRAM_ID.toBase58();
export const ATA_PROGRAM = ASSOCIATED_TOKEN_PROGRAM_ID.toBase58();
export const COMPUTE_BUDGET_PROGRAM = ComputeBudgetProgram.programId.toBase58();
export const MEMO_PROGRAM = "MemoSq4gqABAXKb96qnH8TysNcWxMyWCqXgDLGmfcHr";
export const MEMO_V1_PROGRAM = "Memo1UhkJRfHyvLMcVucJwxXeuD728EqVDDwQDxFMNo";
export const TOKEN_2022_PROGRAM = "TokenzQdBNbLqP5VEhdkAS6EPFLC1PHnBqCXEpPxuEb";

/**
 * Solana's reserved account keys (sysvars and builtin programs): the runtime treats them as read-only
 * whatever the message says, so no transaction can change them.
 */
export const RESERVED_ACCOUNT_KEYS: ReadonlySet<string> = new Set([
  "SysvarC1ock11111111111111111111111111111111",
  "SysvarEpochRewards1111111111111111111111111",
  "SysvarEpochSchedu1e111111111111111111111111",
  "SysvarFees111111111111111111111111111111111",
  "Sysvar1nstructions1111111111111111111111111",
  "SysvarLastRestartS1ot1111111111111111111111",
  "SysvarRecentB1ockHashes11111111111111111111",
  "SysvarRent111111111111111111111111111111111",
  "SysvarRewards111111111111111111111111111111",
  "SysvarS1otHashes111111111111111111111111111",
  "SysvarS1otHistory11111111111111111111111111",
  "SysvarStakeHistory1111111111111111111111111",
  "Sysvar1111111111111111111111111111111111111",
  SYSTEM_PROGRAM,
  COMPUTE_BUDGET_PROGRAM,
  "Vote111111111111111111111111111111111111111",
  "Stake11111111111111111111111111111111111111",
  "Config1111111111111111111111111111111111111",
  "BPFLoader1111111111111111111111111111111111",
  "BPFLoader2111111111111111111111111111111111",
  "BPFLoaderUpgradeab1e11111111111111111111111",
  "LoaderV411111111111111111111111111111111111",
  "AddressLookupTab1e1111111111111111111111111",
  "Ed25519SigVerify111111111111111111111111111",
  "KeccakSecp256k11111111111111111111111111111",
  "Secp256r1SigVerify1111111111111111111111111",
  "NativeLoader1111111111111111111111111111111",
  "Feature111111111111111111111111111111111111",
  "ZkTokenProof1111111111111111111111111111111",
  "ZkE1Gama1Proof11111111111111111111111111111",
]);

/**
 * The on-chain programs the service knows of besides the builtins: on a cluster each is an executable
 * account holding at least its rent-exempt minimum, so lamports sent to one (when the transaction does
 * not call it) leave it rent exempt. The embedded ledger keeps no account for them until they receive
 * lamports, so its rent rule passes them by.
 */
export const DEPLOYED_PROGRAMS: ReadonlySet<string> = new Set([TOKEN_PROGRAM, TOKEN_2022_PROGRAM, ATA_PROGRAM, MEMO_PROGRAM, MEMO_V1_PROGRAM]);

/** Wrapped SOL's mint: a mint on every cluster, though the embedded ledger keeps no account for it. */
export const NATIVE_MINT = "So11111111111111111111111111111111111111112";

/** A program or sysvar address (of those above): no wallet, so never a transfer's intended recipient. */
export function isProgramOrSysvar(address: string): boolean {
  return RESERVED_ACCOUNT_KEYS.has(address) || DEPLOYED_PROGRAMS.has(address);
}

/** Solana's limit on a serialized transaction. */
export const MAX_TRANSACTION_BYTES = 1232;

const ATA_CACHE_MAX = 50_000;
const ataCache = new Map<string, { address: string; bump: number }>();

/**
 * The associated token account of `owner` for `mint` (owners may be off the curve, e.g. escrow PDAs).
 * Deriving one costs a program-address search (hashes and curve checks, ~0.1 ms), and balances ask for
 * the same few on every call: derivations are remembered, the oldest forgotten past 50,000.
 */
export function associatedTokenAddress(owner: string, mint: string): string {
  return associatedTokenAccount(owner, mint).address;
}

/** The associated token account's address and its bump seed (the search's tries are 256 - bump). */
export function associatedTokenAccount(owner: string, mint: string): { address: string; bump: number } {
  const key = `${owner}:${mint}`;
  const known = ataCache.get(key);
  if (known !== undefined) return known;
  const [address, bump] = PublicKey.findProgramAddressSync(
    [new PublicKey(owner).toBuffer(), new PublicKey(TOKEN_PROGRAM).toBuffer(), new PublicKey(mint).toBuffer()],
    new PublicKey(ATA_PROGRAM),
  );
  const derived = { address: address.toBase58(), bump };
  if (ataCache.size >= ATA_CACHE_MAX) ataCache.delete(ataCache.keys().next().value!);
  ataCache.set(key, derived);
  return derived;
}

export type TransferPlan = Readonly<{
  from: string;
  to: string;
  feePayer: string;
  amount: bigint;
  /** null for SOL; else the SPL mint and its decimals. */
  spl: Readonly<{ mint: string; decimals: number }> | null;
  /** SPL only: add CreateAssociatedTokenAccountIdempotent for the recipient (paid by the fee payer). */
  createRecipientAccount: boolean;
  memo: string | null;
  /** A second transfer of the same token from the same sender (SPL: with its recipient account when missing). */
  split?: Readonly<{ to: string; amount: bigint; createRecipientAccount: boolean }> | null;
  /**
   * An explicit SetComputeUnitLimit first (free at the default price of 0). The service's own transfers
   * pass a slightly different limit each time, so two identical requests within one blockhash are two
   * transactions, not one transaction and a duplicate.
   */
  computeUnitLimit?: number | null;
  /**
   * A key the transfer carries as a read-only non-signer account (Solana Pay's reference), so the transaction
   * can be found by listing that key's signatures alone.
   */
  reference?: string | null;
}>;

/**
 * 200,000 units plus 20 random bits (at most 1,248,575, under the 1,400,000 cap): a limit that makes an
 * otherwise identical transfer distinct. Two equal requests in one blockhash's life still collide once in
 * about a million pairs; the caller then builds again.
 */
export function distinctComputeUnitLimit(randomBytes: (count: number) => Uint8Array): number {
  const [a, b, c] = randomBytes(3);
  return 200_000 + (((a! & 0x0f) << 16) | (b! << 8) | c!);
}

export function memoInstruction(memo: string): TransactionInstruction {
  requireWellFormed(memo, "memo"); // else the chain would get U+FFFD in place of a lone surrogate, for good
  return new TransactionInstruction({ programId: new PublicKey(MEMO_PROGRAM), keys: [], data: Buffer.from(memo, "utf8") });
}

/** The instructions of a transfer: SOL via the System Program, SPL via TransferChecked between ATAs. */
export function transferInstructions(plan: TransferPlan): TransactionInstruction[] {
  const from = new PublicKey(plan.from);
  const to = new PublicKey(plan.to);
  const instructions: TransactionInstruction[] = [];
  if (plan.computeUnitLimit !== undefined && plan.computeUnitLimit !== null) {
    instructions.push(ComputeBudgetProgram.setComputeUnitLimit({ units: plan.computeUnitLimit }));
  }
  const legs = [{ to, amount: plan.amount, createRecipientAccount: plan.createRecipientAccount }];
  if (plan.split) legs.push({ ...plan.split, to: new PublicKey(plan.split.to) });
  for (const [i, leg] of legs.entries()) {
    let transfer: TransactionInstruction;
    if (plan.spl === null) {
      transfer = SystemProgram.transfer({ fromPubkey: from, toPubkey: leg.to, lamports: leg.amount });
    } else {
      const mint = new PublicKey(plan.spl.mint);
      const source = getAssociatedTokenAddressSync(mint, from, true);
      const destination = getAssociatedTokenAddressSync(mint, leg.to, true);
      if (leg.createRecipientAccount) {
        instructions.push(createAssociatedTokenAccountIdempotentInstruction(new PublicKey(plan.feePayer), destination, leg.to, mint));
      }
      transfer = createTransferCheckedInstruction(source, mint, destination, from, leg.amount, plan.spl.decimals);
    }
    // On the first leg's transfer, as Solana Pay places it.
    if (i === 0 && plan.reference !== undefined && plan.reference !== null) {
      transfer.keys.push({ pubkey: new PublicKey(plan.reference), isSigner: false, isWritable: false });
    }
    instructions.push(transfer);
  }
  if (plan.memo !== null) instructions.push(memoInstruction(plan.memo));
  return instructions;
}

/**
 * Serializes an unsigned transaction (empty signature slots) as a legacy or a v0 message. Past Solana's
 * 1,232 bytes (a long memo) it is VALIDATION_ERROR.
 */
export function compileTransaction(
  instructions: TransactionInstruction[],
  feePayer: string,
  blockhash: string,
  version: "legacy" | 0 = "legacy",
): Uint8Array {
  const payerKey = new PublicKey(feePayer);
  let wire: Uint8Array;
  try {
    if (version === "legacy") {
      const tx = new Transaction({ feePayer: payerKey, recentBlockhash: blockhash }).add(...instructions);
      wire = new Uint8Array(tx.serialize({ requireAllSignatures: false, verifySignatures: false }));
    } else {
      const message = new TransactionMessage({ payerKey, recentBlockhash: blockhash, instructions }).compileToV0Message();
      wire = new VersionedTransaction(message).serialize();
    }
  } catch {
    wire = new Uint8Array(MAX_TRANSACTION_BYTES + 1); // web3.js throws a plain Error past the limit
  }
  if (wire.length > MAX_TRANSACTION_BYTES) {
    throw fieldError("memo", `the transaction would be larger than ${MAX_TRANSACTION_BYTES} bytes; shorten the memo`);
  }
  return wire;
}

// ---- parsing ----

export type DecodedInstruction =
  | { program: "system"; type: "transfer"; from: number; to: number; lamports: bigint }
  | { program: "token"; type: "transfer"; source: number; destination: number; owner: number; amount: bigint }
  | {
      program: "token";
      type: "transferChecked";
      source: number;
      mint: number;
      destination: number;
      owner: number;
      amount: bigint;
      decimals: number;
    }
  | { program: "ata"; type: "create" | "createIdempotent"; payer: number; account: number; owner: number; mint: number; systemProgram: number; tokenProgram: number }
  /**
   * A supported instruction its program cannot even read (too few accounts, data too short): a cluster
   * executes it and it fails, fee charged. It moves nothing, so it never reads as a transfer.
   */
  | { program: "system" | "token" | "ata"; type: "invalid"; error: string }
  | { program: "computeBudget"; type: "setComputeUnitLimit"; units: number }
  | { program: "computeBudget"; type: "setComputeUnitPrice"; microLamports: bigint }
  /** `version` 2 (MemoSq4…) requires every account it names to sign; version 1 (Memo1Uhk…) ignores its accounts. */
  | { program: "memo"; type: "memo"; version: 1 | 2; text: string | null; accounts: number[] }
  /** Only in a transaction read as landed (parseTransaction's `landed`): an instruction the service does not model. */
  | { program: "other"; type: "other"; programId: string; accounts: number[]; data: Uint8Array };

/** The accounts a v0 transaction loaded from lookup tables, in the order the runtime appends them. */
export type LoadedAddresses = Readonly<{ writable: readonly string[]; readonly: readonly string[] }>;

export type ParsedTransaction = Readonly<{
  version: "legacy" | 0;
  /** base58 of the first signature: the txHash. */
  signature: string;
  signatures: readonly Uint8Array[];
  /** The signed bytes. */
  messageBytes: Uint8Array;
  accountKeys: readonly string[];
  numRequiredSignatures: number;
  isSigner(index: number): boolean;
  isWritable(index: number): boolean;
  recentBlockhash: string;
  instructions: readonly DecodedInstruction[];
  /** The program ids the instructions call. */
  invokedPrograms: readonly string[];
  computeUnitLimit: number | null;
  /** Micro-lamports per compute unit. */
  computeUnitPrice: bigint;
}>;

function rejected(reason: string, message: string): AppError {
  return new AppError("TRANSACTION_REJECTED", message, { details: { reason } });
}

function readU64(data: Uint8Array, offset: number): bigint {
  return new DataView(data.buffer, data.byteOffset, data.byteLength).getBigUint64(offset, true);
}

function readU32(data: Uint8Array, offset: number): number {
  return new DataView(data.buffer, data.byteOffset, data.byteLength).getUint32(offset, true);
}

/** Why the program fails an instruction it cannot read (too short data, too few accounts), or null. */
function unreadable(data: Uint8Array, dataLength: number, accounts: number[], count: number, what: string): string | null {
  if (data.length < dataLength) return `${what}: the instruction data is too short`;
  if (accounts.length < count) return `${what} needs ${count} accounts, got ${accounts.length}`;
  return null;
}

const utf8Strict = new TextDecoder("utf-8", { fatal: true });

function decodeInstruction(program: string, data: Uint8Array, accounts: number[]): DecodedInstruction {
  // System and SPL Token ignore data past what an instruction reads, as on a cluster; too little data or
  // too few accounts make the instruction fail at execution (`invalid`), not the transaction malformed.
  if (program === SYSTEM_PROGRAM) {
    if (data.length >= 4 && readU32(data, 0) === 2) {
      const error = unreadable(data, 12, accounts, 2, "System Transfer");
      if (error !== null) return { program: "system", type: "invalid", error };
      return { program: "system", type: "transfer", from: accounts[0]!, to: accounts[1]!, lamports: readU64(data, 4) };
    }
    throw rejected("unsupported_instruction", "only the System Program's Transfer instruction is supported");
  }
  if (program === TOKEN_PROGRAM) {
    if (data[0] === 3) {
      const error = unreadable(data, 9, accounts, 3, "Token Transfer");
      if (error !== null) return { program: "token", type: "invalid", error };
      return { program: "token", type: "transfer", source: accounts[0]!, destination: accounts[1]!, owner: accounts[2]!, amount: readU64(data, 1) };
    }
    if (data[0] === 12) {
      const error = unreadable(data, 10, accounts, 4, "Token TransferChecked");
      if (error !== null) return { program: "token", type: "invalid", error };
      return {
        program: "token",
        type: "transferChecked",
        source: accounts[0]!,
        mint: accounts[1]!,
        destination: accounts[2]!,
        owner: accounts[3]!,
        amount: readU64(data, 1),
        decimals: data[9]!,
      };
    }
    throw rejected("unsupported_instruction", "only the SPL Token Transfer and TransferChecked instructions are supported");
  }
  if (program === ATA_PROGRAM) {
    const kind = data.length === 0 || data[0] === 0 ? "create" : data[0] === 1 ? "createIdempotent" : null;
    if (kind === null) throw rejected("unsupported_instruction", "only the Associated Token Account Create and CreateIdempotent instructions are supported");
    // The program reads its data exactly (Borsh): a byte more is a Create it cannot read, and fails when run.
    if (data.length > 1) return { program: "ata", type: "invalid", error: "Associated Token Account instruction data has bytes past its instruction" };
    if (accounts.length < 6) return { program: "ata", type: "invalid", error: `Associated Token Account Create needs 6 accounts, got ${accounts.length}` };
    const [payer, account, owner, mint, systemProgram, tokenProgram] = accounts as [number, number, number, number, number, number];
    return { program: "ata", type: kind, payer, account, owner, mint, systemProgram, tokenProgram };
  }
  if (program === COMPUTE_BUDGET_PROGRAM) {
    // The runtime reads the fields it needs and ignores bytes after them, as SPL Token does.
    if (data[0] === 2 && data.length >= 5) return { program: "computeBudget", type: "setComputeUnitLimit", units: readU32(data, 1) };
    if (data[0] === 3 && data.length >= 9) return { program: "computeBudget", type: "setComputeUnitPrice", microLamports: readU64(data, 1) };
    throw rejected("unsupported_instruction", "only the Compute Budget SetComputeUnitLimit and SetComputeUnitPrice instructions are supported");
  }
  if (program === MEMO_PROGRAM || program === MEMO_V1_PROGRAM) {
    let text: string | null;
    try {
      text = utf8Strict.decode(data);
    } catch {
      text = null; // fails at execution, as the Memo program does
    }
    return { program: "memo", type: "memo", version: program === MEMO_PROGRAM ? 2 : 1, text, accounts };
  }
  throw rejected("unsupported_instruction", `program ${program} is not supported (System transfers, SPL Token transfers, Associated Token Accounts, Compute Budget and Memo are)`);
}

/** An instruction of a landed transaction: one the service does not model is `other`, not a refusal. */
function decodeLanded(program: string, data: Uint8Array, accounts: number[]): DecodedInstruction {
  try {
    return decodeInstruction(program, data, accounts);
  } catch (err) {
    if (reasonOf(err) !== "unsupported_instruction") throw err;
    return { program: "other", type: "other", programId: program, accounts, data };
  }
}

/**
 * Parses signed (or partly signed) wire bytes. Throws TRANSACTION_REJECTED with `details.reason`
 * `malformed` or `unsupported_instruction`. Signatures are not verified here.
 *
 * `landed`: the transaction is one a cluster executed (read back, not about to be sent). Then what the
 * service does not model is kept rather than refused: other programs' instructions as `other`, and the
 * accounts of lookup tables from the addresses the node says were loaded (after the static keys, writable
 * ones first, as the runtime orders them). A landed transaction ran as a whole, so its known instructions
 * did what they say whatever else it carries.
 */
export function parseTransaction(wire: Uint8Array, landed?: { loadedAddresses: LoadedAddresses | null }): ParsedTransaction {
  if (wire.length > MAX_TRANSACTION_BYTES) throw rejected("malformed", `a transaction is at most ${MAX_TRANSACTION_BYTES} bytes`);
  let tx: VersionedTransaction;
  try {
    tx = VersionedTransaction.deserialize(wire);
  } catch {
    throw rejected("malformed", "not a Solana transaction in wire format");
  }
  const message = tx.message;
  const messageBytes = message.serialize();
  // Refuse trailing bytes and non-canonical encodings: what was signed is exactly what is stored.
  const reencoded = tx.serialize();
  if (reencoded.length !== wire.length || !reencoded.every((b, i) => b === wire[i])) {
    throw rejected("malformed", "the transaction has trailing or non-canonical bytes");
  }
  const staticKeys = message.staticAccountKeys.map((k) => k.toBase58());
  let loaded: LoadedAddresses = { writable: [], readonly: [] };
  if (message.version === 0 && message.addressTableLookups.length > 0) {
    if (landed?.loadedAddresses == null) throw rejected("unsupported_instruction", "address lookup tables are not supported");
    loaded = landed.loadedAddresses;
    const count = (kind: "writableIndexes" | "readonlyIndexes") => message.addressTableLookups.reduce((n, l) => n + l[kind].length, 0);
    if (count("writableIndexes") !== loaded.writable.length || count("readonlyIndexes") !== loaded.readonly.length) {
      throw rejected("malformed", "the loaded addresses do not match the transaction's lookup tables");
    }
  }
  const accountKeys = [...staticKeys, ...loaded.writable, ...loaded.readonly];
  if (new Set(accountKeys).size !== accountKeys.length) throw rejected("malformed", "an account key appears twice");
  const { numRequiredSignatures, numReadonlySignedAccounts, numReadonlyUnsignedAccounts } = message.header;
  if (numRequiredSignatures < 1 || numRequiredSignatures > staticKeys.length || tx.signatures.length !== numRequiredSignatures) {
    throw rejected("malformed", "the message header and the signatures disagree");
  }
  if (numReadonlySignedAccounts >= numRequiredSignatures || numRequiredSignatures + numReadonlyUnsignedAccounts > staticKeys.length) {
    throw rejected("malformed", "the fee payer must be a writable signer");
  }
  const isSigner = (i: number) => i < numRequiredSignatures;
  const isWritable = (i: number) =>
    i < numRequiredSignatures
      ? i < numRequiredSignatures - numReadonlySignedAccounts
      : i < staticKeys.length
        ? i < staticKeys.length - numReadonlyUnsignedAccounts
        : i < staticKeys.length + loaded.writable.length;

  const instructions: DecodedInstruction[] = [];
  const invokedPrograms = new Set<string>();
  let computeUnitLimit: number | null = null;
  let computeUnitPrice: bigint | null = null;
  for (const ix of message.compiledInstructions) {
    const program = accountKeys[ix.programIdIndex];
    if (program === undefined || ix.accountKeyIndexes.some((i) => i >= accountKeys.length)) {
      throw rejected("malformed", "an instruction names an account index outside the message");
    }
    invokedPrograms.add(program);
    const decoded = landed === undefined ? decodeInstruction(program, ix.data, ix.accountKeyIndexes) : decodeLanded(program, ix.data, ix.accountKeyIndexes);
    if (decoded.program === "computeBudget") {
      // As the runtime does: a second instruction of the same kind rejects the transaction.
      if (decoded.type === "setComputeUnitLimit") {
        if (computeUnitLimit !== null) throw rejected("duplicate_instruction", "SetComputeUnitLimit appears twice");
        computeUnitLimit = decoded.units;
      } else {
        if (computeUnitPrice !== null) throw rejected("duplicate_instruction", "SetComputeUnitPrice appears twice");
        computeUnitPrice = decoded.microLamports;
      }
    }
    instructions.push(decoded);
  }
  const first = tx.signatures[0]!;
  return {
    version: message.version === 0 ? 0 : "legacy",
    signature: encodeBase58(first),
    signatures: tx.signatures,
    messageBytes,
    accountKeys,
    numRequiredSignatures,
    isSigner,
    isWritable,
    recentBlockhash: message.recentBlockhash,
    instructions,
    invokedPrograms: [...invokedPrograms],
    computeUnitLimit,
    computeUnitPrice: computeUnitPrice ?? 0n,
  };
}

const MAX_COMPUTE_UNIT_LIMIT = 1_400_000;
/** Units assumed per instruction without an explicit limit (SIMD-0170): builtins 3,000, programs 200,000. */
const BUILTIN_DEFAULT_UNITS = 3_000;
const PROGRAM_DEFAULT_UNITS = 200_000;
export const LAMPORTS_PER_SIGNATURE = 5000n;

/** The compute units the transaction may use: its SetComputeUnitLimit, else the defaults, capped at 1.4M. */
export function computeUnitLimit(tx: ParsedTransaction): number {
  const defaultLimit = tx.instructions.reduce(
    (units, ix) => units + (ix.program === "system" || ix.program === "computeBudget" ? BUILTIN_DEFAULT_UNITS : PROGRAM_DEFAULT_UNITS),
    0,
  );
  return Math.min(tx.computeUnitLimit ?? defaultLimit, MAX_COMPUTE_UNIT_LIMIT);
}

/**
 * The fee Solana charges: 5000 lamports per signature plus ceil(limit × price / 1e6). Without an explicit
 * limit the runtime assumes 3,000 units per builtin instruction (System, Compute Budget) and 200,000 per
 * program instruction (Token, Associated Token Account, Memo), capped at 1.4M.
 */
export function transactionFee(tx: ParsedTransaction): bigint {
  const priority = (BigInt(computeUnitLimit(tx)) * tx.computeUnitPrice + 999_999n) / 1_000_000n;
  return LAMPORTS_PER_SIGNATURE * BigInt(tx.numRequiredSignatures) + priority;
}

/** The memo text of the transaction, if it carries one (the first Memo instruction). */
export function memoOf(tx: ParsedTransaction): string | null {
  for (const ix of tx.instructions) if (ix.program === "memo") return ix.text;
  return null;
}

/** A token account's mint and owner, and its mint's decimals when the ledger knows them. */
export type TokenAccountInfo = Readonly<{ mint: string; owner: string; decimals?: number | undefined }>;

/**
 * The value movements of a transaction between wallets. `tokenAccount` says who owns a token account
 * (each ledger answers from its own state); `mintKey` names a mint's token key when the service knows it.
 * `keepUnresolved`: a token transfer whose mint nothing tells (a plain Transfer between accounts the ledger
 * does not know) is kept as token "unknown", between the token accounts it names, rather than left out: what
 * the audit log records of a transaction before it is sent.
 */
export function transfersOf(
  tx: ParsedTransaction,
  tokenAccount: (address: string) => TokenAccountInfo | null,
  mintKey: (mint: string) => string | null,
  options: { keepUnresolved?: boolean } = {},
): { token: string; mint: string | null; from: string; to: string; amount: bigint; decimals?: number }[] {
  const key = (i: number) => tx.accountKeys[i]!;
  // A token account this very transaction creates has its owner in the create instruction.
  const created = new Map<string, TokenAccountInfo>();
  for (const ix of tx.instructions) {
    if (ix.program === "ata" && ix.type !== "invalid") created.set(key(ix.account), { mint: key(ix.mint), owner: key(ix.owner) });
  }
  const lookup = (address: string) => tokenAccount(address) ?? created.get(address) ?? null;
  const out: { token: string; mint: string | null; from: string; to: string; amount: bigint; decimals?: number }[] = [];
  for (const ix of tx.instructions) {
    if (ix.program === "system" && ix.type === "transfer") {
      out.push({ token: "sol", mint: null, from: key(ix.from), to: key(ix.to), amount: ix.lamports });
    } else if (ix.program === "token" && ix.type !== "invalid") {
      const destination = lookup(key(ix.destination));
      const source = lookup(key(ix.source));
      const mint = ix.type === "transferChecked" ? key(ix.mint) : (source?.mint ?? destination?.mint ?? null);
      // What scales the amount to whole tokens: what the ledger knows of the accounts' mint first (a failed
      // TransferChecked may name wrong decimals), else the instruction's own.
      const decimals = source?.decimals ?? destination?.decimals ?? (ix.type === "transferChecked" ? ix.decimals : undefined);
      // Neither account a token account and no decimals named (a plain Transfer that can only have failed):
      // it moved nothing of any known token, and is not shown as a transfer (anyone could put it in a
      // wallet's history for one fee, with no amount a client could read).
      if (mint === null && decimals === undefined && options.keepUnresolved !== true) continue;
      out.push({
        token: (mint === null ? null : mintKey(mint)) ?? mint ?? "unknown",
        mint,
        from: source?.owner ?? key(ix.owner),
        to: destination?.owner ?? key(ix.destination),
        amount: ix.amount,
        ...(decimals === undefined ? {} : { decimals }),
      });
    }
  }
  return out;
}

/** An all-zero signature: a slot the signer has not filled. */
export function isEmptySignature(signature: Uint8Array): boolean {
  return signature.every((b) => b === 0);
}

/**
 * Every required signature present and valid (strict Ed25519), as a cluster checks before it accepts a
 * transaction; else TRANSACTION_REJECTED `missing_signature` or `invalid_signature`, naming the signer.
 */
export async function requireSignatures(verifier: SignatureVerifier, tx: ParsedTransaction): Promise<void> {
  const results = await Promise.all(
    tx.signatures.map((signature, i) => {
      if (isEmptySignature(signature)) return Promise.resolve("missing" as const);
      return verifier.verify(decodeAddress(tx.accountKeys[i]!)!, tx.messageBytes, signature).then((ok) => (ok ? "ok" : "invalid"));
    }),
  );
  const missing = results.indexOf("missing");
  if (missing !== -1) throw rejected("missing_signature", `the transaction lacks the signature of ${tx.accountKeys[missing]}`);
  const invalid = results.indexOf("invalid");
  if (invalid !== -1) throw rejected("invalid_signature", `the signature of ${tx.accountKeys[invalid]} does not verify`);
}
