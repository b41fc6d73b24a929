// The one ledger interface the domain talks to (ledger.md), implemented by the embedded ledger
// (localnet) and the Solana RPC ledger (devnet, mainnet). Amounts are bigint base units.
import type { Network } from "../config.ts";
import { fieldError, type AppError } from "../errors.ts";
import type { LoadedAddresses } from "./transactions.ts";

/** Solana cluster names, as product, purchase, verification and webhook records carry them (spec/README.md). */
export function clusterName(network: Network): string {
  return network === "mainnet" ? "mainnet-beta" : network;
}

/**
 * Whether money the service waits for (a checkout's payment, escrow moves) counts only once finalized:
 * on mainnet (paygate.md step 3: "confirmed (mainnet: finalized)"); elsewhere once confirmed.
 */
export function waitsForFinality(network: Network): boolean {
  return network === "mainnet";
}

/** Amounts above 2^63-1 base units are refused everywhere (spec/README.md "Amounts"; SQLite's integers). */
export const MAX_AMOUNT_BASE_UNITS = 2n ** 63n - 1n;
export const MAX_HISTORY_LIMIT = 1000;

/** The checks both ledgers make on a transfer's amount and a history page's size. */
export function requireTransferAmount(amount: bigint): void {
  if (amount <= 0n || amount > MAX_AMOUNT_BASE_UNITS) {
    throw fieldError("amount", "amount must be greater than zero and at most 2^63-1 base units");
  }
}

/** Solana's rent-exempt minimum of an account without data (a wallet): 0.00089088 SOL. */
export const RENT_EXEMPT_WALLET_LAMPORTS = 890_880n;
/** The rent-exempt minimum of a token account (165 bytes), paid by whoever creates one: 0.00203928 SOL. */
export const RENT_EXEMPT_TOKEN_ACCOUNT_LAMPORTS = 2_039_280n;

/**
 * The service's own transfer would leave its recipient (an account that only receives) below the
 * rent-exempt minimum: the amount is too small for a new account, which no funds of the sender's
 * would change (VALIDATION_ERROR on amount, not INSUFFICIENT_FUNDS).
 */
export function recipientBelowRent(recipient: string): AppError {
  return fieldError("amount", `amount: ${recipient} would hold less than the rent-exempt minimum; send at least 0.00089088 SOL to a new account`);
}

export function requireHistoryLimit(limit: number): void {
  if (!Number.isInteger(limit) || limit < 1 || limit > MAX_HISTORY_LIMIT) {
    throw fieldError("limit", `limit must be an integer from 1 to ${MAX_HISTORY_LIMIT}`);
  }
}

/** A token the service knows: `sol`, `usdc` and the service token (its key is SERVICE_TOKEN_SYMBOL). */
export type TokenInfo = Readonly<{ key: string; kind: "native" | "spl"; decimals: number; mint: string | null }>;

/** Balances in base units by token key, e.g. `{ sol: 1_500_000_000n, usdc: 0n, wgt: 0n }`. */
export type Balances = Record<string, bigint>;

export type TransferIntent = Readonly<{
  from: string;
  to: string;
  /** A token key of `tokens()`. */
  token: string;
  amount: bigint;
  /** Pays the fee (and any recipient token account); defaults to `from`. */
  feePayer?: string | undefined;
  memo?: string | undefined;
  /**
   * A second recipient of the same token from the same sender, in the same transaction (the
   * marketplace's fee on a release).
   */
  split?: Readonly<{ to: string; amount: bigint }> | undefined;
  /**
   * False: never open `to`'s token account, even when it is missing as the transaction is built (it then fails
   * on the ledger, having moved nothing). For a sender that checked the account first and must not pay its
   * rent (the marketplace's escrow): the account may be closed between that check and this build.
   */
  openRecipientAccount?: false | undefined;
  /**
   * A fresh key the transfer carries as a read-only non-signer account (Solana Pay's reference), so that the
   * transaction, once signed and sent by someone else, is found by listing that key's signatures alone.
   */
  reference?: string | undefined;
}>;

export type HistoryOptions = {
  limit: number;
  before?: string | undefined;
  finalized?: boolean;
  /**
   * RPC ledger: a transaction the node lists but cannot return yet (a node behind another) is CHAIN_UNAVAILABLE
   * rather than left out. For a search whose "not found" moves money (escrow's look for a sent offer).
   */
  complete?: boolean;
};

export type SubmitOptions = Readonly<{
  /**
   * The service's own transfer (wallet_transfer, escrow, refunds), or a payment it sends for a buyer (a
   * checkout's, whose balance it checked): tried before it is executed; a shortfall of funds for amount, fee
   * or the payer's rent is `INSUFFICIENT_FUNDS`, a recipient left below the rent is `VALIDATION_ERROR`
   * on amount, and nothing is recorded or charged.
   */
  ownTransfer?: boolean;
  /** Wait for `finalized` rather than `confirmed` (RPC ledger; mainnet purchases). */
  finalized?: boolean;
  /**
   * Embedded ledger only: the caller's own SQL (its store's synchronous `…InWrite` functions), run in the
   * same database write as the transaction once it succeeded, told what moved. Throwing rolls both back, so a state change
   * and the transfer it causes commit together or not at all. The RPC ledger refuses it (NOT_SUPPORTED):
   * a chain transaction cannot sit inside a database transaction.
   */
  alongside?: (applied: Readonly<{ signature: string; transfers: readonly ParsedTransfer[] }>) => void;
}>;

export type SubmitResult = Readonly<{
  signature: string;
  slot: number;
  /** Unix ms. */
  confirmedAt: number;
  /** Lamports charged to the fee payer. */
  fee: bigint;
}>;

/** One movement of value read from a transaction: owners (wallets), not token accounts. */
export type ParsedTransfer = Readonly<{
  /** Token key when the mint is known to the service, else the mint address. */
  token: string;
  mint: string | null;
  from: string;
  to: string;
  /** Base units of the token. */
  amount: bigint;
  /**
   * SPL transfers: the mint's decimals, when the transaction (TransferChecked) or the ledger (the mint, the
   * node's token balances) tells them; absent for SOL (9) and when unknown.
   */
  decimals?: number | undefined;
}>;

export type LedgerTransaction = Readonly<{
  signature: string;
  slot: number;
  /** Unix ms of its block; 0 when the RPC node does not know it. */
  timestamp: number;
  status: "confirmed" | "failed";
  /** Why execution failed, in words; null when confirmed. */
  error: string | null;
  fee: bigint;
  feePayer: string;
  transfers: readonly ParsedTransfer[];
  memo: string | null;
  /** The transaction's wire bytes as recorded, for checks the parsed view does not carry. */
  wire: Uint8Array;
  /** The accounts its lookup tables loaded (RPC, v0 only); with `wire`, what parseTransaction's `landed` reads. */
  loadedAddresses: LoadedAddresses | null;
}>;

export type Blockhash = Readonly<{ blockhash: string; lastValidBlockHeight: number }>;

/** About how long a blockhash handed out now is accepted: 150 slots of about 400 ms. */
export const BLOCKHASH_LIFETIME_MS = 150 * 400;

/** When a transaction built on a blockhash fetched at `builtAtMs` stops being accepted, about: an ISO time. */
export const blockhashExpiresAt = (builtAtMs: number): string => new Date(builtAtMs + BLOCKHASH_LIFETIME_MS).toISOString();

export type AirdropAmounts = Readonly<{ sol?: bigint; usdc?: bigint; token?: bigint }>;

export type ProgramAccountKind = "token" | "mint" | "program";

export type Ledger = Readonly<{
  network: Network;
  tokens(): Promise<readonly TokenInfo[]>;
  getBalances(address: string): Promise<Balances>;
  /** True when an account holds lamports or data at this address (e.g. a recipient's token account). */
  accountExists(address: string): Promise<boolean>;
  /**
   * True when an SPL token account is at this address. Not the same as accountExists: anyone can send
   * lamports to a token account's address before it is created, and a transfer built as if it existed
   * would then fail every time (a cluster still creates the account at such an address).
   */
  tokenAccountExists(address: string): Promise<boolean>;
  /**
   * What owns the account at this address when it is not a wallet: a token program (a token account or a
   * mint) or another program (its state, a program itself, a sysvar). Null when there is no account or it
   * is a wallet's (the System program's, without data).
   */
  programAccount(address: string): Promise<ProgramAccountKind | null>;
  /** localnet and devnet (SOL only on devnet); mainnet is NOT_SUPPORTED. Returns one signature per token sent. */
  airdrop(address: string, amounts: AirdropAmounts): Promise<string[]>;
  latestBlockhash(): Promise<Blockhash>;
  /** Whether a transaction on this recent blockhash can still land (the blockhash is known and not expired). */
  blockhashValid(blockhash: string): Promise<boolean>;
  /** The current block height: a transaction whose blockhash's lastValidBlockHeight is below it can no longer land. */
  blockHeight(): Promise<number>;
  /**
   * The chain's time now, in Unix milliseconds: the time of the latest confirmed block, on the clock that
   * stamps transactions (`timestamp`). 0 when the node cannot say. The embedded ledger's is this server's clock.
   */
  chainTime(): Promise<number>;
  /** Serialized wire bytes of an unsigned transfer transaction (legacy message) on a recent blockhash. */
  buildTransfer(intent: TransferIntent): Promise<Uint8Array>;
  /** Submits signed wire bytes and waits for confirmation. Errors: TRANSACTION_REJECTED, CONFLICT, INSUFFICIENT_FUNDS, CHAIN_UNAVAILABLE. */
  submit(wire: Uint8Array, options?: SubmitOptions): Promise<SubmitResult>;
  /** With `finalized`, only once the cluster has finalized it (RPC ledger), as `history`. */
  getTransaction(signature: string, options?: { finalized?: boolean }): Promise<LedgerTransaction | null>;
  /**
   * What became of a transaction, asked of the ledger's whole history (RPC: getSignatureStatuses with
   * searchTransactionHistory, one call, which a node answers from its archive where getTransaction may
   * say null): landed and succeeded (confirmed or finalized), landed and failed, seen but only processed,
   * or unknown (null).
   */
  transactionStatus(signature: string): Promise<"confirmed" | "failed" | "processed" | null>;
  /**
   * Newest first; `before` is a signature to page from. With `finalized`, only transactions the cluster
   * has finalized (RPC ledger; what a mainnet purchase is judged on), not those merely confirmed.
   */
  history(address: string, options: HistoryOptions): Promise<LedgerTransaction[]>;
  /**
   * The signatures of the transactions that name `address` itself (its token accounts are not asked
   * for), newest first, paged and filtered as `history`, without reading the transactions: what a
   * checkout's reference needs when strangers' transactions carry it too.
   */
  signatures(address: string, options: HistoryOptions): Promise<string[]>;
  /** Readiness: the ledger answers. */
  ping(): Promise<boolean>;
  stop(): Promise<void>;
}>;

/**
 * A reference's signatures are listed in pages of REFERENCE_PAGE, at most REFERENCE_PAGES of them (a listing is
 * one RPC request per page; reading the transactions is one each, and is the caller's to bound).
 */
export const REFERENCE_PAGE = 1_000;
export const REFERENCE_PAGES = 10;

/**
 * The signatures of the transactions carrying a reference key (a checkout's, an escrow offer's), oldest first:
 * anyone may put a key seen on chain into transactions of their own, so the first transaction that carried it
 * is where a payment sent with it is. `complete` is false when they fill REFERENCE_PAGES pages (10,000 or more),
 * the oldest then out of reach. With `finalized`, only what the cluster finalized (as `history`).
 */
export async function referenceSignatures(ledger: Ledger, reference: string, finalized: boolean): Promise<{ signatures: string[]; complete: boolean }> {
  const newestFirst: string[] = [];
  for (let page = 0; page < REFERENCE_PAGES; page++) {
    const listed = await ledger.signatures(reference, { limit: REFERENCE_PAGE, before: newestFirst.at(-1), finalized });
    newestFirst.push(...listed);
    if (listed.length < REFERENCE_PAGE) return { signatures: newestFirst.reverse(), complete: true };
  }
  return { signatures: newestFirst.reverse(), complete: false };
}
