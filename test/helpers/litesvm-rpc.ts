// A test-only Solana JSON-RPC 2.0 server backed by LiteSVM, so the RPC ledger's real @solana/web3.js calls run against the real runtime.
import { LiteSVM, FailedTransactionMetadata, type AccountInfoBytes, type TransactionMetadata } from "litesvm";
import { setMint, setTokenAccount } from "./litesvm-accounts.ts";
import { Keypair, PublicKey, SystemProgram, Transaction, VersionedTransaction } from "@solana/web3.js";
import { ACCOUNT_SIZE, AccountLayout, MintLayout, TOKEN_PROGRAM_ID, getAssociatedTokenAddressSync } from "@solana/spl-token";
import { base58 } from "@scure/base";

/** The devnet USDC mint (ledger.md); the server creates it at startup so `rpcTokens("devnet", …)` works as is. */
export const DEVNET_USDC_MINT = "4zMMC9srt5Ri5X14GAgXhaHii3GnPAEERYPJgZJDncDU";

/** Slots between a transaction's slot and the slot at which its status reads `finalized` (as on a real cluster). */
export const FINALITY_SLOTS = 32;
/** A blockhash is valid for 150 blocks after the one it was issued at, as on Solana. */
const BLOCKHASH_VALID_BLOCKS = 150;
const FIRST_SLOT = 1000;

export type LiteSvmRpc = Readonly<{
  url: string;
  svm: LiteSVM;
  usdcMint: string;
  /** The address that pays out requestAirdrop (a real transfer, like devnet's faucet). */
  faucet: string;
  /** Creates an initialized SPL mint (at `address`, else a fresh one); the mint authority is a test keypair. */
  createMint(decimals: number, address?: string): string;
  /** Credits `amount` to the owner's associated token account (creating it); returns the ATA address. */
  mintTokens(mint: string, owner: string, amount: bigint): string;
  mintUsdc(owner: string, amount: bigint): string;
  /** Sets an account's lamports directly (a system account), outside any transaction. */
  setLamports(address: string, lamports: bigint): void;
  blockHeight(): number;
  /** Moves the cluster forward; a blockhash past its last valid block height stops being accepted. */
  advanceSlots(count: number): void;
  /** Retires the current blockhash at once and jumps the block height past its last valid height. */
  expireBlockhash(): void;
  /** While on, sendTransaction answers with the signature but the transaction never lands (a dropped packet). */
  setDropTransactions(drop: boolean): void;
  /** While on, preflight also refuses transactions that would fail in execution (what a real cluster does). */
  setStrictPreflight(strict: boolean): void;
  /** While on, blockTime is null in getTransaction, getSignaturesForAddress and getBlockTime (a node that lacks it). */
  setBlockTimeUnknown(unknown: boolean): void;
  /** The cluster's clock this far from the real time (ms): blocks landing from now on, and getBlockTime. */
  setBlockTimeOffset(ms: number): void;
  /** While on, getTransaction answers meta: null (a node without the transaction's status). */
  setMetaMissing(missing: boolean): void;
  /** While set, a request for `method` is answered only after `ms` (a node slow to answer it); null: none. */
  setSlowMethod(slow: { method: string; ms: number } | null): void;
  /** While set, every JSON-RPC answer passes through it (a node answering out of spec). */
  setAnswerFilter(filter: ((method: string, answer: Record<string, unknown>) => Record<string, unknown>) | null): void;
  /** Every JSON-RPC method called, in order. */
  calls: string[];
  stop(): Promise<void>;
}>;

type RpcTokenBalance = {
  accountIndex: number;
  mint: string;
  owner: string;
  programId: string;
  uiTokenAmount: { amount: string; decimals: number; uiAmount: number | null; uiAmountString: string };
};

type Recorded = {
  seq: number;
  signature: string;
  slot: number;
  blockTime: number;
  wire: Uint8Array;
  version: "legacy" | 0;
  accountKeys: string[];
  err: unknown;
  fee: number;
  preBalances: number[];
  postBalances: number[];
  preTokenBalances: RpcTokenBalance[];
  postTokenBalances: RpcTokenBalance[];
  logs: string[];
  computeUnits: number;
};

class RpcError extends Error {
  constructor(
    readonly code: number,
    message: string,
    readonly data?: unknown,
  ) {
    super(message);
  }
}

// LiteSVM hands fieldless errors over as numbers of these (non-exported const) enums; order from its typings.
const TRANSACTION_ERRORS = [
  "AccountInUse", "AccountLoadedTwice", "AccountNotFound", "ProgramAccountNotFound", "InsufficientFundsForFee",
  "InvalidAccountForFee", "AlreadyProcessed", "BlockhashNotFound", "CallChainTooDeep", "MissingSignatureForFee",
  "InvalidAccountIndex", "SignatureFailure", "InvalidProgramForExecution", "SanitizeFailure", "ClusterMaintenance",
  "AccountBorrowOutstanding", "WouldExceedMaxBlockCostLimit", "UnsupportedVersion", "InvalidWritableAccount",
  "WouldExceedMaxAccountCostLimit", "WouldExceedAccountDataBlockLimit", "TooManyAccountLocks",
  "AddressLookupTableNotFound", "InvalidAddressLookupTableOwner", "InvalidAddressLookupTableData",
  "InvalidAddressLookupTableIndex", "InvalidRentPayingAccount", "WouldExceedMaxVoteCostLimit",
  "WouldExceedAccountDataTotalLimit", "MaxLoadedAccountsDataSizeExceeded", "ResanitizationNeeded",
  "InvalidLoadedAccountsDataSizeLimit", "UnbalancedTransaction", "ProgramCacheHitMaxLimit", "CommitCancelled",
];
const INSTRUCTION_ERRORS = [
  "GenericError", "InvalidArgument", "InvalidInstructionData", "InvalidAccountData", "AccountDataTooSmall",
  "InsufficientFunds", "IncorrectProgramId", "MissingRequiredSignature", "AccountAlreadyInitialized",
  "UninitializedAccount", "UnbalancedInstruction", "ModifiedProgramId", "ExternalAccountLamportSpend",
  "ExternalAccountDataModified", "ReadonlyLamportChange", "ReadonlyDataModified", "DuplicateAccountIndex",
  "ExecutableModified", "RentEpochModified", "NotEnoughAccountKeys", "AccountDataSizeChanged", "AccountNotExecutable",
  "AccountBorrowFailed", "AccountBorrowOutstanding", "DuplicateAccountOutOfSync", "InvalidError",
  "ExecutableDataModified", "ExecutableLamportChange", "ExecutableAccountNotRentExempt", "UnsupportedProgramId",
  "CallDepth", "MissingAccount", "ReentrancyNotAllowed", "MaxSeedLengthExceeded", "InvalidSeeds", "InvalidRealloc",
  "ComputationalBudgetExceeded", "PrivilegeEscalation", "ProgramEnvironmentSetupFailure", "ProgramFailedToComplete",
  "ProgramFailedToCompile", "Immutable", "IncorrectAuthority", "AccountNotRentExempt", "InvalidAccountOwner",
  "ArithmeticOverflow", "UnsupportedSysvar", "IllegalOwner", "MaxAccountsDataAllocationsExceeded",
  "MaxAccountsExceeded", "MaxInstructionTraceLengthExceeded", "BuiltinProgramsMustConsumeComputeUnits", "BorshIoError",
];

// The Display texts Agave puts after "Transaction simulation failed: " (what clients match on).
const TRANSACTION_ERROR_TEXT: Record<string, string> = {
  AccountNotFound: "Attempt to debit an account but found no record of a prior credit.",
  InsufficientFundsForFee: "Insufficient funds for fee",
  AlreadyProcessed: "This transaction has already been processed",
  BlockhashNotFound: "Blockhash not found",
  SignatureFailure: "Transaction did not pass signature verification",
  MissingSignatureForFee: "Transaction requires a fee but has no signature present",
  SanitizeFailure: "Transaction failed to sanitize accounts offsets correctly",
};

/** LiteSVM's error object → the JSON form Solana's RPC uses (`"BlockhashNotFound"`, `{InstructionError:[0,{Custom:1}]}`). */
function rpcTransactionError(err: unknown): unknown {
  if (typeof err === "number") return TRANSACTION_ERRORS[err] ?? `TransactionError${err}`;
  const e = err as { constructor: { name: string }; index?: number; accountIndex?: number; err?: () => unknown };
  switch (e.constructor.name) {
    case "TransactionErrorInstructionError": {
      const inner = e.err!() as unknown;
      let ix: unknown;
      if (typeof inner === "number") ix = INSTRUCTION_ERRORS[inner] ?? `InstructionError${inner}`;
      else if ((inner as { constructor: { name: string } }).constructor.name === "InstructionErrorCustom") ix = { Custom: (inner as { code: number }).code };
      else ix = { BorshIoError: String((inner as { msg?: string }).msg ?? "") };
      return { InstructionError: [e.index, ix] };
    }
    case "TransactionErrorInsufficientFundsForRent":
      return { InsufficientFundsForRent: { account_index: e.accountIndex } };
    case "TransactionErrorDuplicateInstruction":
      return { DuplicateInstruction: e.index };
    case "TransactionErrorProgramExecutionTemporarilyRestricted":
      return { ProgramExecutionTemporarilyRestricted: { account_index: e.accountIndex } };
    default:
      return String(err);
  }
}

function errorText(err: unknown): string {
  if (typeof err === "string") return TRANSACTION_ERROR_TEXT[err] ?? err;
  const e = err as Record<string, unknown>;
  if (Array.isArray(e.InstructionError)) {
    const [index, ix] = e.InstructionError as [number, unknown];
    const detail =
      typeof ix === "object" && ix !== null && "Custom" in ix
        ? `custom program error: 0x${(ix as { Custom: number }).Custom.toString(16)}`
        : ix === "InsufficientFunds"
          ? "insufficient funds for instruction"
          : JSON.stringify(ix);
    return `Error processing Instruction ${index}: ${detail}`;
  }
  if (e.InsufficientFundsForRent !== undefined) {
    return `Transaction results in an account (${(e.InsufficientFundsForRent as { account_index: number }).account_index}) with insufficient funds for rent`;
  }
  return JSON.stringify(err);
}

/** Errors raised before execution leave no trace on a real cluster; the others are recorded with their fee charged. */
const isPreExecution = (rpcErr: unknown) => typeof rpcErr === "string";

// LiteSVM's metadata prints the fee it charged but has no accessor for it.
function feeOf(meta: TransactionMetadata, signatures: number): number {
  const m = /\bfee: (\d+)/.exec(meta.toString());
  return m ? Number(m[1]) : 5000 * signatures;
}

function decodeWire(encoded: unknown, encoding: unknown): Uint8Array {
  if (typeof encoded !== "string") throw new RpcError(-32602, "Invalid params: transaction must be a string");
  try {
    return encoding === "base64" ? new Uint8Array(Buffer.from(encoded, "base64")) : base58.decode(encoded);
  } catch {
    throw new RpcError(-32602, "invalid transaction: failed to decode");
  }
}

function parseWire(wire: Uint8Array): VersionedTransaction {
  try {
    return VersionedTransaction.deserialize(wire);
  } catch {
    throw new RpcError(-32602, "invalid transaction: Transaction failed to deserialize");
  }
}

function pubkeyParam(value: unknown): PublicKey {
  try {
    if (typeof value !== "string") throw new Error();
    return new PublicKey(value);
  } catch {
    throw new RpcError(-32602, "Invalid param: Invalid");
  }
}

export async function startLiteSvmRpc(): Promise<LiteSvmRpc> {
  const svm = new LiteSVM();
  svm.warpToSlot(BigInt(FIRST_SLOT));
  let slot = FIRST_SLOT;
  let blockhashIssuedAt = slot;
  let dropTransactions = false;
  let strictPreflight = false;
  let blockTimeUnknown = false;
  let blockTimeOffsetMs = 0;
  const blockTime = () => Math.floor((Date.now() + blockTimeOffsetMs) / 1000);
  let metaMissing = false;
  let answerFilter: ((method: string, answer: Record<string, unknown>) => Record<string, unknown>) | null = null;
  let slowMethod: { method: string; ms: number } | null = null;
  const calls: string[] = [];
  const records: Recorded[] = [];
  const bySignature = new Map<string, Recorded>();
  const mintAuthority = Keypair.generate();
  const faucet = Keypair.generate();
  const system = (lamports: number): AccountInfoBytes => ({ lamports, data: new Uint8Array(0), owner: SystemProgram.programId, executable: false, rentEpoch: 0 });
  svm.setAccount(faucet.publicKey, system(1_000_000 * 1_000_000_000));

  const lastValidBlockHeight = () => blockhashIssuedAt + BLOCKHASH_VALID_BLOCKS;
  const context = () => ({ slot, apiVersion: "2.2.0" });

  function advanceSlots(count: number): void {
    slot += count;
    svm.warpToSlot(BigInt(slot));
    // LiteSVM only knows its latest blockhash; retire it when the block height passes its validity, as Solana would.
    if (slot > lastValidBlockHeight()) {
      svm.expireBlockhash();
      blockhashIssuedAt = slot;
    }
  }

  function tokenBalances(keys: PublicKey[]): RpcTokenBalance[] {
    const out: RpcTokenBalance[] = [];
    keys.forEach((key, accountIndex) => {
      const acc = svm.getAccount(key);
      if (acc === null || !acc.owner.equals(TOKEN_PROGRAM_ID) || acc.data.length !== ACCOUNT_SIZE) return;
      const token = AccountLayout.decode(acc.data);
      const mint = svm.getAccount(token.mint);
      const decimals = mint === null ? 0 : MintLayout.decode(mint.data).decimals;
      const amount = token.amount.toString();
      const ui = Number(token.amount) / 10 ** decimals;
      out.push({
        accountIndex,
        mint: token.mint.toBase58(),
        owner: token.owner.toBase58(),
        programId: TOKEN_PROGRAM_ID.toBase58(),
        uiTokenAmount: { amount, decimals, uiAmount: ui, uiAmountString: String(ui) },
      });
    });
    return out;
  }

  /** Runs a transaction through LiteSVM and records it when a real cluster would have (success or failed execution). */
  function processTransaction(tx: VersionedTransaction, wire: Uint8Array): void {
    const keys = tx.message.staticAccountKeys;
    const preBalances = keys.map((k) => Number(svm.getBalance(k) ?? 0n));
    const preTokenBalances = tokenBalances(keys);
    const result = svm.sendTransaction(tx);
    const failed = result instanceof FailedTransactionMetadata;
    const meta = failed ? result.meta() : result;
    const signature = base58.encode(tx.signatures[0]!);
    if (svm.getTransaction(tx.signatures[0]!) === null) return; // refused before execution: never lands
    const record: Recorded = {
      seq: records.length,
      signature,
      slot,
      blockTime: blockTime(),
      wire,
      version: tx.version === 0 ? 0 : "legacy",
      accountKeys: keys.map((k) => k.toBase58()),
      err: failed ? rpcTransactionError(result.err()) : null,
      fee: feeOf(meta, tx.message.header.numRequiredSignatures),
      preBalances,
      postBalances: keys.map((k) => Number(svm.getBalance(k) ?? 0n)),
      preTokenBalances,
      postTokenBalances: tokenBalances(keys),
      logs: meta.logs(),
      computeUnits: Number(meta.computeUnitsConsumed()),
    };
    records.push(record);
    bySignature.set(signature, record);
    advanceSlots(1); // each transaction gets its own slot, so statuses and history have a clear order
  }

  function preflight(tx: VersionedTransaction): void {
    const sim = svm.simulateTransaction(tx);
    if (!(sim instanceof FailedTransactionMetadata)) return;
    const err = rpcTransactionError(sim.err());
    if (err === "SignatureFailure") throw new RpcError(-32003, "Transaction signature verification failure");
    if (!isPreExecution(err) && !strictPreflight) return; // let it land as a failed transaction
    const meta = sim.meta();
    throw new RpcError(-32002, `Transaction simulation failed: ${errorText(err)}`, {
      err,
      logs: meta.logs(),
      accounts: null,
      unitsConsumed: Number(meta.computeUnitsConsumed()),
      returnData: null,
    });
  }

  function status(record: Recorded) {
    const depth = slot - record.slot;
    const finalized = depth >= FINALITY_SLOTS;
    return {
      slot: record.slot,
      confirmations: finalized ? null : depth,
      err: record.err,
      status: record.err === null ? { Ok: null } : { Err: record.err },
      confirmationStatus: finalized ? "finalized" : "confirmed",
    };
  }

  const methods: Record<string, (params: unknown[]) => unknown> = {
    getSlot: () => slot,
    // The time of the slot's block: the real time, moved by setBlockTimeOffset as the blocks' stamps are.
    getBlockTime: () => (blockTimeUnknown ? null : blockTime()),
    getBlockHeight: () => slot,
    getHealth: () => "ok",
    getLatestBlockhash: () => ({ context: context(), value: { blockhash: svm.latestBlockhash(), lastValidBlockHeight: lastValidBlockHeight() } }),
    isBlockhashValid: ([blockhash]) => ({ context: context(), value: blockhash === svm.latestBlockhash() && slot <= lastValidBlockHeight() }),
    getBalance: ([address]) => ({ context: context(), value: Number(svm.getBalance(pubkeyParam(address)) ?? 0n) }),
    getAccountInfo: ([address, config]) => {
      const encoding = (config as { encoding?: string } | undefined)?.encoding ?? "base58";
      if (encoding !== "base64") throw new RpcError(-32602, "Invalid params: this test server answers base64 only");
      const acc = svm.getAccount(pubkeyParam(address));
      if (acc === null || acc.lamports === 0) return { context: context(), value: null };
      return {
        context: context(),
        value: {
          data: [Buffer.from(acc.data).toString("base64"), "base64"],
          executable: acc.executable,
          lamports: acc.lamports,
          owner: acc.owner.toBase58(),
          rentEpoch: acc.rentEpoch ?? 0,
          space: acc.data.length,
        },
      };
    },
    sendTransaction: ([encoded, config]) => {
      const opts = (config ?? {}) as { encoding?: string; skipPreflight?: boolean };
      const wire = decodeWire(encoded, opts.encoding);
      const tx = parseWire(wire);
      if (opts.skipPreflight !== true) preflight(tx);
      if (!dropTransactions) processTransaction(tx, wire);
      return base58.encode(tx.signatures[0]!);
    },
    simulateTransaction: ([encoded, config]) => {
      const tx = parseWire(decodeWire(encoded, (config as { encoding?: string } | undefined)?.encoding));
      const sim = svm.simulateTransaction(tx);
      const failed = sim instanceof FailedTransactionMetadata;
      const meta = sim.meta();
      return {
        context: context(),
        value: {
          err: failed ? rpcTransactionError(sim.err()) : null,
          logs: meta.logs(),
          accounts: null,
          unitsConsumed: Number(meta.computeUnitsConsumed()),
          returnData: null,
        },
      };
    },
    getSignatureStatuses: ([signatures]) => {
      if (!Array.isArray(signatures)) throw new RpcError(-32602, "Invalid params");
      return { context: context(), value: signatures.map((s) => (bySignature.has(String(s)) ? status(bySignature.get(String(s))!) : null)) };
    },
    getTransaction: ([signature, config]) => {
      const opts = (config ?? {}) as { encoding?: string; maxSupportedTransactionVersion?: number; commitment?: string };
      if (opts.encoding !== "base64") throw new RpcError(-32602, "Invalid params: this test server answers base64 only");
      const record = bySignature.get(String(signature));
      if (record === undefined) return null;
      // As a real node: asked at `finalized`, a transaction not yet rooted is not there.
      if (opts.commitment === "finalized" && status(record).confirmationStatus !== "finalized") return null;
      if (record.version === 0 && opts.maxSupportedTransactionVersion === undefined) {
        throw new RpcError(-32015, "Transaction version (0) is not supported by the requesting client.");
      }
      return {
        slot: record.slot,
        blockTime: blockTimeUnknown ? null : record.blockTime,
        version: record.version,
        transaction: [Buffer.from(record.wire).toString("base64"), "base64"],
        meta: metaMissing ? null : {
          err: record.err,
          status: record.err === null ? { Ok: null } : { Err: record.err },
          fee: record.fee,
          preBalances: record.preBalances,
          postBalances: record.postBalances,
          innerInstructions: [],
          logMessages: record.logs,
          preTokenBalances: record.preTokenBalances,
          postTokenBalances: record.postTokenBalances,
          rewards: [],
          loadedAddresses: { writable: [], readonly: [] },
          computeUnitsConsumed: record.computeUnits,
        },
      };
    },
    getSignaturesForAddress: ([address, config]) => {
      const key = pubkeyParam(address).toBase58();
      const opts = (config ?? {}) as { limit?: number; before?: string; until?: string; commitment?: string };
      const limit = opts.limit ?? 1000;
      if (!Number.isInteger(limit) || limit < 1 || limit > 1000) throw new RpcError(-32602, "Invalid limit; max 1000");
      // As Agave: `before` may be any known signature, not only one of this address's.
      let start = records.length - 1;
      if (opts.before !== undefined) {
        const before = bySignature.get(opts.before);
        if (before === undefined) return [];
        start = before.seq - 1;
      }
      const out = [];
      for (let i = start; i >= 0 && out.length < limit; i--) {
        const r = records[i]!;
        if (r.signature === opts.until) break;
        if (!r.accountKeys.includes(key)) continue;
        if (opts.commitment === "finalized" && status(r).confirmationStatus !== "finalized") continue;
        out.push({ signature: r.signature, slot: r.slot, err: r.err, memo: null, blockTime: blockTimeUnknown ? null : r.blockTime, confirmationStatus: status(r).confirmationStatus });
      }
      return out;
    },
    requestAirdrop: ([address, lamports]) => {
      const to = pubkeyParam(address);
      if (typeof lamports !== "number" || !Number.isSafeInteger(lamports) || lamports <= 0) throw new RpcError(-32602, "Invalid params: lamports");
      // Devnet's faucet sends an ordinary signed transfer; do the same so every reader sees a real transaction.
      const tx = new Transaction({ feePayer: faucet.publicKey, recentBlockhash: svm.latestBlockhash() }).add(
        SystemProgram.transfer({ fromPubkey: faucet.publicKey, toPubkey: to, lamports }),
      );
      tx.sign(faucet);
      const wire = new Uint8Array(tx.serialize());
      const vtx = VersionedTransaction.deserialize(wire);
      processTransaction(vtx, wire);
      const signature = base58.encode(vtx.signatures[0]!);
      if (!bySignature.has(signature)) throw new RpcError(-32603, "Internal error: airdrop failed");
      return signature;
    },
  };

  function answer(request: unknown): unknown {
    const req = (request ?? {}) as { jsonrpc?: unknown; id?: unknown; method?: unknown; params?: unknown };
    const id = req.id ?? null;
    try {
      if (req.jsonrpc !== "2.0" || typeof req.method !== "string") throw new RpcError(-32600, "Invalid request");
      calls.push(req.method);
      const method = methods[req.method];
      if (method === undefined) throw new RpcError(-32601, "Method not found");
      const params = req.params === undefined ? [] : req.params;
      if (!Array.isArray(params)) throw new RpcError(-32602, "Invalid params");
      const answered = { jsonrpc: "2.0", id, result: method(params) };
      return answerFilter === null ? answered : answerFilter(req.method, answered);
    } catch (e) {
      const err = e instanceof RpcError ? e : new RpcError(-32603, `Internal error: ${e instanceof Error ? e.message : String(e)}`);
      return { jsonrpc: "2.0", id, error: err.data === undefined ? { code: err.code, message: err.message } : { code: err.code, message: err.message, data: err.data } };
    }
  }

  const server = Bun.serve({
    port: 0,
    hostname: "127.0.0.1",
    async fetch(request) {
      if (request.method !== "POST") return new Response("Method Not Allowed", { status: 405 });
      let body: unknown;
      try {
        body = await request.json();
      } catch {
        return Response.json({ jsonrpc: "2.0", id: null, error: { code: -32700, message: "Parse error" } });
      }
      const slow = slowMethod;
      if (slow !== null && (Array.isArray(body) ? body : [body]).some((r) => (r as { method?: unknown } | null)?.method === slow.method)) await Bun.sleep(slow.ms);
      return Response.json(Array.isArray(body) ? body.map(answer) : answer(body));
    },
  });

  function createMint(decimals: number, address?: string): string {
    const mint = address === undefined ? Keypair.generate().publicKey : new PublicKey(address);
    setMint(svm, mint, { decimals, supply: 0n, authority: mintAuthority.publicKey });
    return mint.toBase58();
  }

  function mintTokens(mintAddress: string, owner: string, amount: bigint): string {
    const mint = new PublicKey(mintAddress);
    const mintAccount = svm.getAccount(mint);
    if (mintAccount === null) throw new Error(`no mint ${mintAddress}`);
    const ata = getAssociatedTokenAddressSync(mint, new PublicKey(owner), true);
    const existing = svm.getAccount(ata);
    const before = existing === null ? 0n : AccountLayout.decode(existing.data).amount;
    setTokenAccount(svm, ata, { mint, owner: new PublicKey(owner), amount: before + amount });
    const mintState = MintLayout.decode(mintAccount.data);
    setMint(svm, mint, { decimals: mintState.decimals, supply: mintState.supply + amount, authority: mintAuthority.publicKey });
    return ata.toBase58();
  }

  const usdcMint = createMint(6, DEVNET_USDC_MINT);

  return {
    url: `http://127.0.0.1:${server.port}/`,
    svm,
    usdcMint,
    faucet: faucet.publicKey.toBase58(),
    createMint,
    mintTokens,
    mintUsdc: (owner, amount) => mintTokens(usdcMint, owner, amount),
    setLamports: (address, lamports) => svm.setAccount(new PublicKey(address), system(Number(lamports))),
    blockHeight: () => slot,
    advanceSlots,
    expireBlockhash: () => advanceSlots(lastValidBlockHeight() - slot + 1),
    setDropTransactions: (drop) => {
      dropTransactions = drop;
    },
    setBlockTimeUnknown: (unknown) => {
      blockTimeUnknown = unknown;
    },
    setBlockTimeOffset: (ms) => {
      blockTimeOffsetMs = ms;
    },
    setMetaMissing: (missing) => {
      metaMissing = missing;
    },
    setSlowMethod: (slow) => {
      slowMethod = slow;
    },
    setAnswerFilter: (filter) => {
      answerFilter = filter;
    },
    setStrictPreflight: (strict) => {
      strictPreflight = strict;
    },
    calls,
    stop: async () => {
      await server.stop(true);
    },
  };
}
