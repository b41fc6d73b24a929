// The Solana RPC ledger (devnet, mainnet): the Ledger interface over @solana/web3.js v1's Connection, confirming
// by polling signature statuses against the blockhash's last valid block height (no websocket needed).
import { Connection, PublicKey, SystemProgram, VersionedTransaction, type AccountInfo, type SignatureStatus } from "@solana/web3.js";
import { ACCOUNT_SIZE, AccountLayout, MINT_SIZE, MintLayout, TOKEN_2022_PROGRAM_ID, TOKEN_PROGRAM_ID } from "@solana/spl-token";
import { AppError, fieldError } from "../../errors.ts";
import { firstCharacters } from "../../lib/text.ts";
import { isAddress, decodeBase58, encodeBase58 } from "../../lib/encoding.ts";
import type { Clock } from "../../lib/clock.ts";
import { cryptoRandom, type Random } from "../../lib/ids.ts";
import { settlesWithin, sleep } from "../../lib/sleep.ts";
import { createKeyedLock } from "../../lib/keyed-lock.ts";
import {
  recipientBelowRent,
  requireHistoryLimit,
  requireTransferAmount,
  type AirdropAmounts,
  type Balances,
  type Blockhash,
  type HistoryOptions,
  type Ledger,
  type LedgerTransaction,
  type SubmitOptions,
  type SubmitResult,
  type ProgramAccountKind,
  type TokenInfo,
  type TransferIntent,
} from "../ledger.ts";
import {
  MAX_TRANSACTION_BYTES,
  associatedTokenAddress,
  compileTransaction,
  memoOf,
  parseTransaction,
  transactionFee,
  transferInstructions,
  distinctComputeUnitLimit,
  transfersOf,
  type LoadedAddresses,
  type ParsedTransaction,
  type TokenAccountInfo,
} from "../transactions.ts";

export type RpcNetwork = "devnet" | "mainnet";

export type RpcLedgerOptions = Readonly<{
  network: RpcNetwork;
  rpcUrl: string;
  tokens: readonly TokenInfo[];
  clock: Clock;
  /** Randomness (deps.random): the compute-unit limits that keep equal transfers apart. */
  random?: Random;
  /** How often confirmation polls statuses and the block height (default 400 ms, one slot). */
  pollIntervalMs?: number;
  /** Each HTTP exchange with the RPC, body included (default 15 s). */
  requestTimeoutMs?: number;
  /** The longest a sent transaction is waited for (default CONFIRM_LIMIT_MS). */
  confirmLimitMs?: number;
  fetch?: typeof fetch;
}>;

export const USDC_MINTS: Readonly<Record<RpcNetwork, string>> = {
  mainnet: "EPjFWdd5AufqSSqeM2qN1xzybapC8G4wEGGkZwyTDt1v",
  devnet: "4zMMC9srt5Ri5X14GAgXhaHii3GnPAEERYPJgZJDncDU",
};

/** The tokens of an RPC network (ledger.md "Tokens"): sol, usdc and the service token (no mint → balance 0, no transfers). */
export function rpcTokens(network: RpcNetwork, serviceToken: Readonly<{ symbol: string; decimals: number; mint: string | null }>): TokenInfo[] {
  return [
    { key: "sol", kind: "native", decimals: 9, mint: null },
    { key: "usdc", kind: "spl", decimals: 6, mint: USDC_MINTS[network] },
    { key: serviceToken.symbol, kind: "spl", decimals: serviceToken.decimals, mint: serviceToken.mint },
  ];
}

const LAMPORTS_PER_SOL = 1_000_000_000n;
const MAX_AIRDROP_LAMPORTS = 2n * LAMPORTS_PER_SOL;
/** Solana accepts a blockhash for 150 blocks. */
const BLOCKHASH_VALID_BLOCKS = 150;
const MAX_REMEMBERED_BLOCKHASHES = 256;
const HISTORY_FETCH_CONCURRENCY = 8;
/** Consecutive failed polls tolerated while waiting for a sent transaction (a blip should not lose its outcome). */
const MAX_POLL_FAILURES = 5;
/**
 * Re-sending the identical signed bytes is safe (same signature, executes at most once) and helps them land:
 * every this many polls (2 s at the default interval).
 */
const REBROADCAST_POLLS = 5;
/**
 * The longest a sent transaction is waited for: its blockhash's 150 blocks (~60-90 s) and finality after it.
 * A node whose block height stops moving would otherwise be polled without end.
 */
const CONFIRM_LIMIT_MS = 180_000;
/**
 * The longest one own transfer holds its fee payer's turn (submit), in polls (10 s at the default interval):
 * several confirmations on a healthy cluster. One not confirmed by then is still followed, outside the turn.
 */
const OWN_TURN_POLLS = 25;
// Marks failures raised by our own fetch wrapper, whose text survives web3.js's error wrapping.
const TRANSPORT = "rpc transport: ";

/**
 * A JSON-RPC error answer, raised by the fetch wrapper so that its code and `data.err` reach us: web3.js keeps
 * only the message of a preflight failure and folds most other errors into strings.
 */
class RpcCallError extends Error {
  constructor(
    readonly rpcCode: number,
    readonly rpcMessage: string,
    readonly rpcData: unknown,
  ) {
    super(`${TRANSPORT}error ${rpcCode}: ${oneLine(rpcMessage)}`);
  }
}

/** The JSON-RPC error in a response body, if that is what it is. */
function rpcErrorIn(body: string): RpcCallError | null {
  if (!body.includes('"error"')) return null;
  try {
    const parsed = JSON.parse(body) as { error?: { code?: unknown; message?: unknown; data?: unknown } } | null;
    const error = parsed !== null && typeof parsed === "object" && !Array.isArray(parsed) ? parsed.error : undefined;
    if (error === undefined || error === null || typeof error !== "object") return null;
    return new RpcCallError(typeof error.code === "number" ? error.code : 0, typeof error.message === "string" ? error.message : "error", error.data);
  } catch {
    return null;
  }
}

type Commitment = "confirmed" | "finalized";
type RawTokenBalance = { accountIndex?: unknown; mint?: unknown; owner?: unknown; uiTokenAmount?: { decimals?: unknown } | null };
type RawTransaction = {
  slot?: unknown;
  blockTime?: unknown;
  transaction?: unknown;
  meta?: { err?: unknown; status?: unknown; fee?: unknown; preTokenBalances?: unknown; postTokenBalances?: unknown; loadedAddresses?: unknown } | null;
};

function oneLine(text: string, max = 160): string {
  const flat = text.replace(/\s+/g, " ").trim();
  const cut = firstCharacters(flat, max);
  return cut.length < flat.length ? `${cut}…` : flat;
}

/** Removes the RPC URL and its parts (API keys live in query strings and path tokens) and any other URL. */
function redactor(rpcUrl: string): (text: string) => string {
  const secrets = [rpcUrl];
  try {
    const url = new URL(rpcUrl);
    secrets.push(url.href, url.search, url.search.slice(1), url.username, url.password, ...url.searchParams.values());
    secrets.push(...url.pathname.split("/").filter((segment) => segment.length >= 8));
  } catch {
    // not a URL: the whole string is already listed
  }
  const list = secrets.filter((s) => s.length >= 4).sort((a, b) => b.length - a.length);
  return (text) => {
    let out = text.replace(/\b[a-z][a-z0-9+.-]*:\/\/[^\s"'<>]+/gi, "<url>");
    for (const secret of list) out = out.split(secret).join("<redacted>");
    return out;
  };
}

/** A short, URL-free description of a failed RPC call. */
function summarize(err: unknown): string {
  const text = err instanceof Error ? err.message : String(err);
  const at = text.indexOf(TRANSPORT);
  if (at >= 0) return text.slice(at + TRANSPORT.length).split("\n")[0]!;
  const code = (err as { code?: unknown } | null)?.code;
  if (typeof code === "number") return `error ${code}: ${oneLine(text)}`;
  return `unexpected answer (${oneLine(text)})`;
}

function words(name: string): string {
  return name.replace(/([a-z0-9])([A-Z])/g, "$1 $2").toLowerCase();
}

/** Solana's JSON transaction error in words, naming the failing instruction's program when known. */
function describeTransactionError(err: unknown, tx: ParsedTransaction | null): string {
  if (typeof err === "string") return words(err);
  const e = (err ?? {}) as Record<string, unknown>;
  if (Array.isArray(e.InstructionError)) {
    const [index, inner] = e.InstructionError as [number, unknown];
    const program = tx?.instructions[index]?.program;
    let what: string;
    if (typeof inner === "string") what = words(inner);
    else if (inner !== null && typeof inner === "object" && typeof (inner as { Custom?: unknown }).Custom === "number") {
      const code = (inner as { Custom: number }).Custom;
      what =
        code === 1 && (program === "system" || program === "ata")
          ? "insufficient lamports"
          : code === 1 && program === "token"
            ? "insufficient token balance"
            : `custom program error 0x${code.toString(16)}`;
    } else what = oneLine(JSON.stringify(inner), 80);
    return `instruction ${index}${program === undefined ? "" : ` (${program})`} failed: ${what}`;
  }
  const rent = e.InsufficientFundsForRent as { account_index?: unknown } | undefined;
  if (rent !== undefined) {
    const key = typeof rent.account_index === "number" ? tx?.accountKeys[rent.account_index] : undefined;
    return `account ${key ?? "?"} would be left below the rent-exempt minimum`;
  }
  return oneLine(JSON.stringify(err), 120);
}

/**
 * The account a rent failure names when it did not sign: it only received, too little to be rent
 * exempt (a recipient of too small an amount, not a shortfall of the payer's). Null otherwise.
 */
function recipientLeftBelowRent(err: unknown, tx: ParsedTransaction): string | null {
  const rent = typeof err === "object" && err !== null ? ((err as Record<string, unknown>).InsufficientFundsForRent as { account_index?: unknown } | undefined) : undefined;
  const index = rent?.account_index;
  if (typeof index !== "number" || tx.isSigner(index)) return null;
  return tx.accountKeys[index] ?? null;
}

/** A simulation error that means "not enough funds" (fee, a payer's rent, a lamport or token overdraw). */
function isShortfall(err: unknown, tx: ParsedTransaction): boolean {
  if (err === "InsufficientFundsForFee" || err === "AccountNotFound") return true;
  if (typeof err !== "object" || err === null) return false;
  const e = err as Record<string, unknown>;
  if (e.InsufficientFundsForRent !== undefined) return recipientLeftBelowRent(err, tx) === null;
  if (!Array.isArray(e.InstructionError)) return false;
  const [index, inner] = e.InstructionError as [number, unknown];
  if (inner === "InsufficientFunds") return true;
  // Custom 1 is SystemError::ResultWithNegativeLamports and TokenError::InsufficientFunds (the ATA program fails
  // with the System Program's error when its payer cannot fund the new account).
  const program = tx.instructions[index]?.program;
  return (inner as { Custom?: unknown } | null)?.Custom === 1 && (program === "system" || program === "token" || program === "ata");
}

function isSignature(text: string): boolean {
  return text.length <= 88 && decodeBase58(text)?.length === 64;
}

function rejected(reason: string, message: string, extra: Record<string, unknown> = {}): AppError {
  return new AppError("TRANSACTION_REJECTED", message, { details: { reason, ...extra } });
}

function statusReached(status: SignatureStatus, target: Commitment): boolean {
  const level = status.confirmationStatus ?? (status.confirmations === null ? "finalized" : "confirmed");
  const rank = { processed: 0, confirmed: 1, finalized: 2 } as const;
  return rank[level] >= rank[target];
}

function tokenAmount(info: AccountInfo<Buffer> | null): bigint {
  if (info === null || !info.owner.equals(TOKEN_PROGRAM_ID) || info.data.length < ACCOUNT_SIZE) return 0n;
  return AccountLayout.decode(info.data).amount;
}

export function createRpcLedger(options: RpcLedgerOptions): Ledger {
  const { network, clock } = options;
  const tokens: readonly TokenInfo[] = Object.freeze(options.tokens.map((t) => Object.freeze({ ...t })));
  const pollIntervalMs = options.pollIntervalMs ?? 400;
  const requestTimeoutMs = options.requestTimeoutMs ?? 15_000;
  const confirmLimitMs = options.confirmLimitMs ?? CONFIRM_LIMIT_MS;
  const baseFetch = options.fetch ?? globalThis.fetch;
  const lifetime = new AbortController();
  const redact = redactor(options.rpcUrl);
  /** Blockhashes this ledger handed out → their last valid block height, newest last. */
  const issued = new Map<string, number>();
  let requestId = 0;

  // Every exchange is bounded by requestTimeoutMs (body included) and by stop(); failures get a URL-free text.
  const timedFetch = async (input: string | URL | Request, init?: RequestInit): Promise<Response> => {
    const timeout = AbortSignal.timeout(requestTimeoutMs);
    const signal = AbortSignal.any(init?.signal ? [timeout, lifetime.signal, init.signal] : [timeout, lifetime.signal]);
    let status: number;
    let body: string;
    try {
      // No redirects: SOLANA_RPC_URL is the node; a redirect would carry the request (and a key in a header)
      // to an address nobody configured.
      const response = await baseFetch(input, { ...init, signal, redirect: "error" });
      status = response.status;
      body = await response.text();
    } catch {
      const why = timeout.aborted ? `no answer within ${requestTimeoutMs} ms` : lifetime.signal.aborted ? "the ledger is stopped" : "connection failed";
      throw new Error(TRANSPORT + why);
    }
    if (status < 200 || status > 299) throw new Error(`${TRANSPORT}HTTP ${status}`);
    const rpcError = rpcErrorIn(body);
    if (rpcError !== null) throw rpcError;
    return new Response(body, { status, headers: { "content-type": "application/json" } });
  };

  const connection = new Connection(options.rpcUrl, {
    commitment: "confirmed",
    fetch: timedFetch as typeof fetch,
    disableRetryOnRateLimit: true,
    httpAgent: false,
  });

  function unavailable(err: unknown): AppError {
    return new AppError("CHAIN_UNAVAILABLE", `Solana RPC unavailable: ${redact(summarize(err))}`);
  }

  /** Runs one RPC call; anything but an AppError becomes CHAIN_UNAVAILABLE. */
  async function call<T>(fn: () => Promise<T>): Promise<T> {
    if (lifetime.signal.aborted) throw new AppError("CHAIN_UNAVAILABLE", "Solana RPC unavailable: the ledger is stopped");
    try {
      return await fn();
    } catch (e) {
      if (e instanceof AppError) throw e;
      throw unavailable(e);
    }
  }

  /** A JSON-RPC call whose raw result we read ourselves (web3.js has no base64 getTransaction). */
  async function rawRpc(method: string, params: unknown[]): Promise<unknown> {
    const internal = (connection as unknown as { _rpcRequest?: unknown })._rpcRequest;
    const response = (await call(async () => {
      if (typeof internal === "function") return (await internal.call(connection, method, params)) as unknown;
      const res = await timedFetch(options.rpcUrl, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ jsonrpc: "2.0", id: String(++requestId), method, params }),
      });
      return (await res.json()) as unknown;
    })) as { result?: unknown; error?: { code?: unknown; message?: unknown } } | null;
    if (response === null || typeof response !== "object") throw unavailable(new Error("not a JSON-RPC response"));
    if (response.error !== undefined) {
      const err = Object.assign(new Error(String(response.error?.message ?? "error")), { code: response.error?.code });
      throw unavailable(err);
    }
    // Neither a result (null included) nor an error is no answer: "not found" would be read as final.
    if (!("result" in response)) throw unavailable(new Error("a JSON-RPC response with neither result nor error"));
    return response.result ?? null;
  }

  function address(text: string, what: string): PublicKey {
    if (!isAddress(text)) throw new AppError("INVALID_ADDRESS", `${what} must be a base58 address of 32 bytes`);
    return new PublicKey(text);
  }

  function tokenByKey(key: string): TokenInfo {
    const token = tokens.find((t) => t.key === key);
    if (token === undefined) throw fieldError("token", `unknown token "${key}"; one of ${tokens.map((t) => t.key).join(", ")}`);
    return token;
  }

  function splMint(token: TokenInfo): string {
    if (token.mint === null) throw new AppError("NOT_SUPPORTED", `${token.key} has no mint configured on ${network}`);
    return token.mint;
  }

  /** SERVICE_TOKEN_MINT once it was found to be what the configuration says (read on first use). */
  let serviceMintChecked = false;

  /**
   * The service token's mint (SERVICE_TOKEN_MINT) as configured: an SPL Token mint (a Token-2022 one keeps its
   * accounts elsewhere, so its balances would read 0 and its transfers fail) with SERVICE_TOKEN_DECIMALS (else
   * every amount of it would be shown scaled wrong). Read on first use, not at start: start-up does not wait
   * for the network. Until it passes, its transfers say what is wrong instead of being built. Balances are read
   * as they are (a wrong mint's: 0), so that SOL and USDC sales and balances do not depend on it.
   */
  async function requireServiceMint(token: TokenInfo, mint: string): Promise<void> {
    if (serviceMintChecked) return;
    const info = await call(() => connection.getAccountInfo(new PublicKey(mint), "confirmed"));
    const what = `SERVICE_TOKEN_MINT (${mint}, the ${token.key} token)`;
    if (info === null) throw new AppError("NOT_SUPPORTED", `${what} has no account on ${network}`);
    if (info.owner.equals(TOKEN_2022_PROGRAM_ID)) throw new AppError("NOT_SUPPORTED", `${what} is a Token-2022 mint; only SPL Token mints are supported`);
    if (!info.owner.equals(TOKEN_PROGRAM_ID) || info.data.length !== MINT_SIZE) throw new AppError("NOT_SUPPORTED", `${what} is not an SPL Token mint`);
    const { decimals, isInitialized } = MintLayout.decode(info.data);
    if (!isInitialized) throw new AppError("NOT_SUPPORTED", `${what} is not initialized`);
    if (decimals !== token.decimals) {
      throw new AppError("NOT_SUPPORTED", `${what} has ${decimals} decimals, but SERVICE_TOKEN_DECIMALS is ${token.decimals}: set SERVICE_TOKEN_DECIMALS=${decimals}`);
    }
    serviceMintChecked = true;
  }

  function remember(blockhash: Blockhash): void {
    issued.delete(blockhash.blockhash);
    issued.set(blockhash.blockhash, blockhash.lastValidBlockHeight);
    while (issued.size > MAX_REMEMBERED_BLOCKHASHES) issued.delete(issued.keys().next().value!);
  }

  async function latestBlockhash(): Promise<Blockhash> {
    const { blockhash, lastValidBlockHeight } = await call(() => connection.getLatestBlockhash("confirmed"));
    const result = { blockhash, lastValidBlockHeight };
    remember(result);
    return result;
  }

  /** The height after which a transaction on this blockhash can no longer land. */
  async function lastValidHeightOf(blockhash: string): Promise<number> {
    const known = issued.get(blockhash);
    if (known !== undefined) return known;
    // Not ours (built with the wallet's own RPC, or before a restart): assumed as young as it can be, so that
    // it is never said "not executed" while it may still land. An expired one fails the send's preflight
    // anyway. (A node's isBlockhashValid cannot tell: one a slot behind, or another node of a pool, answers
    // false for a blockhash newer than it knows.)
    return (await call(() => connection.getBlockHeight("confirmed"))) + BLOCKHASH_VALID_BLOCKS;
  }

  async function accountExists(text: string): Promise<boolean> {
    const key = address(text, "address");
    return (await call(() => connection.getAccountInfo(key, "confirmed"))) !== null;
  }

  async function tokenAccountExists(text: string): Promise<boolean> {
    const key = address(text, "address");
    const info = await call(() => connection.getAccountInfo(key, "confirmed"));
    return info !== null && info.owner.equals(TOKEN_PROGRAM_ID) && info.data.length >= ACCOUNT_SIZE;
  }

  async function programAccount(text: string): Promise<ProgramAccountKind | null> {
    const key = address(text, "address");
    const info = await call(() => connection.getAccountInfo(key, "confirmed"));
    if (info === null || (info.owner.equals(SystemProgram.programId) && info.data.length === 0)) return null;
    if (!info.owner.equals(TOKEN_PROGRAM_ID) && !info.owner.equals(TOKEN_2022_PROGRAM_ID)) return "program";
    // A mint is 82 bytes; an account 165. Token-2022 accounts with extensions are longer and say which they are
    // in the byte after an account's 165 (1 a mint, 2 an account).
    const { length } = info.data;
    return length === MINT_SIZE || (length > ACCOUNT_SIZE && info.data[ACCOUNT_SIZE] === 1) ? "mint" : "token";
  }

  /**
   * Why a transaction was refused before execution (preflight or simulation), as the catalogue says it. An own
   * transfer's shortfall is INSUFFICIENT_FUNDS; anyone else's is a rejection with Solana's reason.
   */
  function refusal(err: unknown, tx: ParsedTransaction, ownTransfer: boolean): AppError {
    if (err === "AlreadyProcessed") return new AppError("CONFLICT", "this transaction was already submitted", { details: { signature: tx.signature } });
    const what = describeTransactionError(err, tx);
    if (ownTransfer && isShortfall(err, tx)) return new AppError("INSUFFICIENT_FUNDS", `insufficient funds: ${what}`);
    const recipient = ownTransfer ? recipientLeftBelowRent(err, tx) : null;
    if (recipient !== null) return recipientBelowRent(recipient);
    const named: Record<string, string> = {
      BlockhashNotFound: "blockhash_not_found",
      SignatureFailure: "invalid_signature",
      MissingSignatureForFee: "missing_signature",
      AccountNotFound: "account_not_found",
      InsufficientFundsForFee: "insufficient_funds_for_fee",
    };
    const e = (typeof err === "object" && err !== null ? err : {}) as Record<string, unknown>;
    const reason =
      typeof err === "string"
        ? (named[err] ?? "preflight_failed")
        : e.InsufficientFundsForRent !== undefined
          ? "insufficient_funds_for_rent"
          : "preflight_failed"; // an instruction's failure in a simulation too: nothing executed on chain
    return rejected(reason, `the transaction was refused before execution (${what}); it was not recorded and nothing was charged`);
  }

  /** A JSON-RPC error answering sendTransaction or simulateTransaction. */
  function sendFailure(e: RpcCallError, tx: ParsedTransaction, ownTransfer: boolean): AppError {
    const data = e.rpcData as { err?: unknown } | null | undefined;
    if (e.rpcCode === -32002 && data?.err !== undefined && data.err !== null) return refusal(data.err, tx, ownTransfer);
    if (e.rpcCode === -32003) return rejected("invalid_signature", "a signature does not verify");
    if (e.rpcCode === -32602 && /transaction/i.test(e.rpcMessage)) return rejected("malformed", `the RPC could not read the transaction: ${redact(oneLine(e.rpcMessage))}`);
    // A preflight failure without data: Agave's texts are stable enough to read the common causes.
    if (e.rpcCode === -32002) {
      const m = e.rpcMessage;
      const err = /already been processed/i.test(m)
        ? "AlreadyProcessed"
        : /blockhash not found/i.test(m)
          ? "BlockhashNotFound"
          : /no record of a prior credit/i.test(m)
            ? "AccountNotFound"
            : /insufficient funds for fee/i.test(m)
              ? "InsufficientFundsForFee"
              : /signature/i.test(m)
                ? "SignatureFailure"
                : redact(oneLine(m));
      return refusal(err, tx, ownTransfer);
    }
    return unavailable(e);
  }

  /** The service's own transfers in flight, one per fee payer (submit). */
  const ownTransfers = createKeyedLock();

  /** The service's own transfers: a dry run first, so a shortfall costs nothing (no fee is charged for it). */
  async function preflightOwnTransfer(wire: Uint8Array, tx: ParsedTransaction): Promise<void> {
    let err: unknown;
    try {
      const simulation = await connection.simulateTransaction(VersionedTransaction.deserialize(wire), { sigVerify: true, commitment: "confirmed" });
      err = simulation.value.err;
    } catch (e) {
      if (e instanceof RpcCallError && !lifetime.signal.aborted) throw sendFailure(e, tx, true);
      throw unavailable(e);
    }
    if (err !== null && err !== undefined) throw refusal(err, tx, true);
  }

  /**
   * Polls until the signature reaches `target`, fails on chain, or can no longer land (block height past the
   * blockhash's last valid height with no status), at the latest until `giveUpAt` (performance.now() time;
   * default confirmLimitMs from now). Never re-signs: at most re-sends the identical bytes.
   */
  async function confirm(
    signature: string,
    lastValidBlockHeight: number,
    target: Commitment,
    tx: ParsedTransaction | null,
    wire: Uint8Array | null,
    giveUpAt = performance.now() + confirmLimitMs,
  ): Promise<SignatureStatus> {
    let failures = 0;
    let lastSentAt = performance.now();
    // Re-sends go through preflight as the first send did: bytes whose first answer was lost may never have
    // reached the node, and a failing transaction sent without preflight would land, fail and be charged its
    // fee. A refused re-send is not forwarded, so re-sending goes on (a refusal may pass: a node behind, funds
    // arriving); the last refusal is said if the transaction never lands.
    let refused: string | null = null;
    for (;;) {
      if (performance.now() > giveUpAt) {
        throw new AppError("CHAIN_UNAVAILABLE", `Solana RPC unavailable: no outcome within ${confirmLimitMs / 1000} s; transaction ${signature} was sent and its outcome is unknown`, {
          details: { signature },
        });
      }
      try {
        // Height first: a status still missing after the height passed the limit means it can no longer land.
        const height = await connection.getBlockHeight("confirmed");
        const status = (await connection.getSignatureStatuses([signature])).value[0] ?? null;
        failures = 0;
        if (status !== null) {
          if (status.err !== null && statusReached(status, "confirmed")) {
            const error = describeTransactionError(status.err, tx);
            throw rejected("execution_failed", `the transaction failed on chain: ${error}; its fee was charged`, { signature, error });
          }
          if (status.err === null && statusReached(status, target)) return status;
        } else if (height > lastValidBlockHeight) {
          const why = refused === null ? "" : ` (re-sent, it was refused: ${refused})`;
          throw rejected("blockhash_expired", `the transaction expired before it landed (its blockhash is no longer valid)${why}; it was not executed`, { signature });
        } else if (wire !== null && performance.now() - lastSentAt >= REBROADCAST_POLLS * pollIntervalMs) {
          lastSentAt = performance.now();
          connection.sendRawTransaction(wire, { skipPreflight: false, maxRetries: 0, preflightCommitment: "confirmed" }).catch((e: unknown) => {
            if (!(e instanceof RpcCallError) || tx === null || (e.rpcCode !== -32002 && e.rpcCode !== -32003)) return;
            const refusal = sendFailure(e, tx, false);
            if (refusal.code !== "CONFLICT") refused = refusal.message; // already processed: its status will show
          });
        }
      } catch (e) {
        if (e instanceof AppError) throw e;
        if (lifetime.signal.aborted || ++failures >= MAX_POLL_FAILURES) {
          throw new AppError("CHAIN_UNAVAILABLE", `Solana RPC unavailable: ${redact(summarize(e))}; transaction ${signature} was sent and its outcome is unknown`, {
            details: { signature },
          });
        }
      }
      await sleep(pollIntervalMs, lifetime.signal);
    }
  }

  async function submit(wire: Uint8Array, submitOptions: SubmitOptions = {}): Promise<SubmitResult> {
    if (submitOptions.alongside !== undefined) {
      throw new AppError("NOT_SUPPORTED", "a transfer that commits with a database change needs the embedded ledger (localnet)");
    }
    const tx = parseTransaction(wire);
    // An empty slot would only come back as "signature verification failure"; say which signature is missing.
    const missing = tx.signatures.findIndex((s) => s.every((b) => b === 0));
    if (missing !== -1) throw rejected("missing_signature", `the transaction lacks the signature of ${tx.accountKeys[missing]}`);
    const target: Commitment = submitOptions.finalized === true ? "finalized" : "confirmed";
    let status: SignatureStatus;
    if (submitOptions.ownTransfer === true) {
      // One own transfer per fee payer at a time, from its trial until the cluster confirms it (OWN_TURN_POLLS
      // at most): the trial reads the confirmed state, so two tried side by side would both pass and the second
      // fail on chain with its fee. In turn, the second's trial sees the first's debit and a shortfall costs
      // nothing. A transfer that has not landed by then (a dropped one, a stalled node) gives up its turn
      // while it is still followed, so it does not hold its payer's others (escrow's releases) for minutes.
      // Finality is waited for outside the turn, within the same limit as the confirmation.
      const sent = await ownTransfers.run(tx.accountKeys[0]!, async () => {
        try {
          await preflightOwnTransfer(wire, tx);
        } catch (err) {
          throw await duplicateIfLanded(err, tx.signature);
        }
        const following = send(wire, tx, true);
        await settlesWithin(following, OWN_TURN_POLLS * pollIntervalMs, lifetime.signal);
        return { following };
      });
      const { status: confirmed, lastValidBlockHeight, giveUpAt } = await sent.following;
      status = target === "finalized" ? await confirm(tx.signature, lastValidBlockHeight, "finalized", tx, wire, giveUpAt) : confirmed;
    } else {
      status = (await send(wire, tx, false, target)).status;
    }
    return { signature: tx.signature, slot: status.slot, confirmedAt: clock.now(), fee: transactionFee(tx) };
  }

  /** Sends the bytes once and follows them until `target` (Ledger.submit's rules for each outcome). */
  async function send(
    wire: Uint8Array,
    tx: ParsedTransaction,
    ownTransfer: boolean,
    target: Commitment = "confirmed",
  ): Promise<{ status: SignatureStatus; lastValidBlockHeight: number; giveUpAt: number }> {
    const lastValidBlockHeight = await lastValidHeightOf(tx.recentBlockhash);
    const giveUpAt = performance.now() + confirmLimitMs;
    try {
      await connection.sendRawTransaction(wire, { skipPreflight: false, maxRetries: 0, preflightCommitment: "confirmed" });
    } catch (e) {
      if (lifetime.signal.aborted) throw unavailable(e);
      if (e instanceof RpcCallError) throw await duplicateIfLanded(sendFailure(e, tx, ownTransfer), tx.signature);
      // No answer (a timeout, an HTTP error, a reset): the node may have taken it. Its outcome is looked for
      // by its signature, re-sending the same bytes, until it lands or its blockhash can no longer land; a
      // caller never hears "unavailable" for a transaction that then lands without its signature.
    }
    return { status: await confirm(tx.signature, lastValidBlockHeight, target, tx, wire, giveUpAt), lastValidBlockHeight, giveUpAt };
  }

  /**
   * A blockhash the node no longer knows, on bytes that landed already (a re-send after a lost answer): a
   * duplicate (CONFLICT), not "nothing was charged". Any other refusal as it is.
   */
  async function duplicateIfLanded(refused: unknown, signature: string): Promise<unknown> {
    const reason = refused instanceof AppError ? (refused.extra.details as { reason?: unknown } | undefined)?.reason : undefined;
    if (reason !== "blockhash_not_found") return refused;
    let landed: boolean;
    try {
      landed = (await transactionStatus(signature)) !== null;
    } catch (e) {
      // Whether the bytes landed before is unknown: not "nothing was charged".
      const cause = e instanceof AppError ? e.message : redact(summarize(e));
      return new AppError("CHAIN_UNAVAILABLE", `${cause}; the node does not know the transaction's blockhash, and whether ${signature} landed before is unknown`, {
        details: { signature },
      });
    }
    return landed ? new AppError("CONFLICT", "this transaction was already submitted, and it landed", { details: { signature } }) : refused;
  }

  /** What became of a transaction, from the node's whole history (Ledger.transactionStatus). */
  async function transactionStatus(signature: string): Promise<"confirmed" | "failed" | "processed" | null> {
    if (!isSignature(signature)) throw fieldError("signature", "not a transaction signature");
    const status = (await call(() => connection.getSignatureStatuses([signature], { searchTransactionHistory: true }))).value[0] ?? null;
    if (status === null) return null;
    if (status.err !== null) return "failed";
    return status.confirmationStatus === "confirmed" || status.confirmationStatus === "finalized" ? "confirmed" : "processed";
  }

  async function airdrop(text: string, amounts: AirdropAmounts): Promise<string[]> {
    if (network === "mainnet") throw new AppError("NOT_SUPPORTED", "airdrops are not available on mainnet");
    const to = address(text, "address");
    const sol = amounts.sol ?? 0n;
    for (const [key, amount] of Object.entries(amounts)) {
      if (amount !== undefined && amount < 0n) throw fieldError(key, `the ${key} airdrop amount cannot be negative`);
    }
    if ((amounts.usdc ?? 0n) > 0n || (amounts.token ?? 0n) > 0n) {
      throw new AppError("NOT_SUPPORTED", `only SOL can be airdropped on ${network}; get tokens from their own faucet`);
    }
    if (sol > MAX_AIRDROP_LAMPORTS) throw fieldError("sol", "a SOL airdrop is at most 2 SOL");
    if (sol === 0n) return [];
    const { lastValidBlockHeight } = await latestBlockhash();
    const signature = await call(() => connection.requestAirdrop(to, Number(sol)));
    await confirm(signature, lastValidBlockHeight, "confirmed", null, null);
    return [signature];
  }

  async function buildTransfer(intent: TransferIntent): Promise<Uint8Array> {
    address(intent.from, "from");
    address(intent.to, "to");
    const feePayer = intent.feePayer ?? intent.from;
    address(feePayer, "feePayer");
    if (intent.reference !== undefined) address(intent.reference, "reference");
    const token = tokenByKey(intent.token);
    requireTransferAmount(intent.amount);
    const spl = token.kind === "spl" ? { mint: splMint(token), decimals: token.decimals } : null;
    if (intent.split !== undefined) {
      address(intent.split.to, "split.to");
      requireTransferAmount(intent.split.amount);
    }
    const plan = (createRecipientAccount: boolean, createSplitAccount: boolean) =>
      transferInstructions({
        from: intent.from,
        to: intent.to,
        feePayer,
        amount: intent.amount,
        spl,
        createRecipientAccount,
        memo: intent.memo ?? null,
        split: intent.split === undefined ? null : { ...intent.split, createRecipientAccount: createSplitAccount },
        computeUnitLimit: distinctComputeUnitLimit(options.random ?? cryptoRandom),
        reference: intent.reference ?? null,
      });
    // Size does not depend on the blockhash: an oversized memo is refused before asking the RPC anything.
    compileTransaction(plan(spl !== null, spl !== null), feePayer, PublicKey.default.toBase58());
    if (spl !== null && token.key !== "usdc") await requireServiceMint(token, spl.mint);
    const missing = async (owner: string) => spl !== null && !(await tokenAccountExists(associatedTokenAddress(owner, spl.mint)));
    const createRecipientAccount = intent.openRecipientAccount !== false && (await missing(intent.to));
    const createSplitAccount = intent.split === undefined ? false : await missing(intent.split.to);
    const { blockhash } = await latestBlockhash();
    return compileTransaction(plan(createRecipientAccount, createSplitAccount), feePayer, blockhash);
  }

  async function getBalances(text: string): Promise<Balances> {
    const owner = address(text, "address");
    const entries = await Promise.all(
      tokens.map(async (token): Promise<[string, bigint]> => {
        if (token.kind === "native") return [token.key, BigInt(await call(() => connection.getBalance(owner, "confirmed")))];
        if (token.mint === null) return [token.key, 0n];
        const ata = new PublicKey(associatedTokenAddress(text, token.mint));
        return [token.key, tokenAmount(await call(() => connection.getAccountInfo(ata, "confirmed")))];
      }),
    );
    return Object.fromEntries(entries);
  }

  function mintKey(mint: string): string | null {
    return tokens.find((t) => t.mint === mint)?.key ?? null;
  }

  /** The RPC's base64 transaction, read by the same parser as the embedded ledger's. */
  function toLedgerTransaction(signature: string, raw: RawTransaction): LedgerTransaction {
    const encoded = Array.isArray(raw.transaction) ? raw.transaction[0] : undefined;
    if (typeof encoded !== "string" || typeof raw.slot !== "number") throw unavailable(new Error("malformed getTransaction result"));
    const bytes = new Uint8Array(Buffer.from(encoded, "base64"));
    // Without its status the transaction cannot be told failed or not, nor what it moved: a node that
    // answers so is not answering (a checkout would otherwise refuse a payment for good).
    const meta = raw.meta ?? null;
    if (meta === null) throw unavailable(new Error("getTransaction returned no status (meta) for the transaction"));
    // Its error, or null: a status without the key says neither (and status.Err, where given, counts too).
    if (!("err" in meta)) throw unavailable(new Error("getTransaction returned a status without its err"));
    const statusErr = (meta.status as { Err?: unknown } | null | undefined)?.Err;
    const failed = (meta.err !== null && meta.err !== undefined) || (statusErr !== null && statusErr !== undefined);
    const common = {
      signature,
      wire: bytes,
      slot: raw.slot,
      timestamp: typeof raw.blockTime === "number" ? raw.blockTime * 1000 : 0,
      status: failed ? ("failed" as const) : ("confirmed" as const),
    };
    // A v0 transaction's lookup-table accounts, as the node loaded them (absent for legacy ones).
    const loaded = meta.loadedAddresses as { writable?: unknown; readonly?: unknown } | undefined | null;
    const addresses = (list: unknown) => (Array.isArray(list) && list.every((a) => typeof a === "string") ? (list as string[]) : []);
    const loadedAddresses: LoadedAddresses | null = loaded == null ? null : { writable: addresses(loaded.writable), readonly: addresses(loaded.readonly) };
    let tx: ParsedTransaction;
    try {
      // Read as landed: instructions of other programs and lookup tables do not hide the payments it made.
      tx = parseTransaction(bytes, { loadedAddresses });
    } catch (e) {
      if (!(e instanceof AppError)) throw e;
      // Anyone can send an address a transaction the service does not model (swaps, lookup tables): list it
      // without transfers rather than failing the whole history.
      let decoded: VersionedTransaction;
      try {
        decoded = VersionedTransaction.deserialize(bytes);
      } catch {
        throw unavailable(new Error("getTransaction returned bytes that are not a transaction"));
      }
      if (decoded.signatures[0] === undefined || encodeBase58(decoded.signatures[0]) !== signature) throw unavailable(new Error("getTransaction returned another transaction"));
      return {
        ...common,
        error: failed ? describeTransactionError(meta!.err, null) : null,
        fee: typeof meta?.fee === "number" ? BigInt(meta.fee) : 0n,
        feePayer: decoded.message.staticAccountKeys[0]!.toBase58(),
        transfers: [],
        memo: null,
        loadedAddresses,
      };
    }
    if (tx.signature !== signature) throw unavailable(new Error("getTransaction returned another transaction"));
    // Token accounts → owner and mint, from the balances the RPC recorded before and after (an ATA created by
    // this very transaction only appears after).
    const accounts = new Map<string, TokenAccountInfo>();
    for (const list of [meta?.preTokenBalances, meta?.postTokenBalances]) {
      if (!Array.isArray(list)) continue;
      for (const b of list as RawTokenBalance[]) {
        const key = typeof b.accountIndex === "number" ? tx.accountKeys[b.accountIndex] : undefined;
        // Without its owner a token account's transfer cannot be judged (a payment to payTo would read as
        // to no one): the node's answer is incomplete, not a refusal.
        if (key !== undefined && typeof b.mint === "string" && typeof b.owner !== "string") throw unavailable(new Error("token balances without their owner"));
        if (key !== undefined && typeof b.mint === "string" && typeof b.owner === "string") {
          const decimals = b.uiTokenAmount?.decimals;
          accounts.set(key, { mint: b.mint, owner: b.owner, decimals: typeof decimals === "number" ? decimals : undefined });
        }
      }
    }
    return {
      ...common,
      error: failed ? describeTransactionError(meta!.err ?? (meta!.status as { Err?: unknown }).Err, tx) : null,
      fee: typeof meta?.fee === "number" ? BigInt(meta.fee) : transactionFee(tx),
      feePayer: tx.accountKeys[0]!,
      transfers: transfersOf(tx, (a) => accounts.get(a) ?? null, mintKey),
      memo: memoOf(tx),
      loadedAddresses,
    };
  }

  async function getTransaction(signature: string, commitment: Commitment = "confirmed"): Promise<LedgerTransaction | null> {
    if (!isSignature(signature)) return null;
    const raw = await rawRpc("getTransaction", [signature, { encoding: "base64", commitment, maxSupportedTransactionVersion: 0 }]);
    if (raw === null) return null;
    if (typeof raw !== "object") throw unavailable(new Error("malformed getTransaction result"));
    return toLedgerTransaction(signature, raw as RawTransaction);
  }

  /** A history query checked, with the commitment it asks for. */
  function historyQuery(query: HistoryOptions): { limit: number; before: string | undefined; commitment: Commitment } {
    const { limit, before } = query;
    requireHistoryLimit(limit);
    if (before !== undefined && !isSignature(before)) throw fieldError("before", "before must be a transaction signature");
    return { limit, before, commitment: query.finalized === true ? "finalized" : "confirmed" };
  }

  async function signatures(text: string, query: HistoryOptions): Promise<string[]> {
    const key = address(text, "address");
    const { limit, before, commitment } = historyQuery(query);
    const list = await call(() => connection.getSignaturesForAddress(key, { limit, ...(before === undefined ? {} : { before }) }, commitment));
    return list.map((info) => info.signature);
  }

  async function history(text: string, query: HistoryOptions): Promise<LedgerTransaction[]> {
    const owner = address(text, "address");
    const { limit, before, commitment } = historyQuery(query);
    // Incoming token transfers touch only the recipient's token account, so ask for those too.
    const keys = [owner, ...tokens.flatMap((t) => (t.mint === null ? [] : [new PublicKey(associatedTokenAddress(text, t.mint))]))];
    const lists = await Promise.all(keys.map((key) => call(() => connection.getSignaturesForAddress(key, { limit, ...(before === undefined ? {} : { before }) }, commitment))));
    const bySignature = new Map(lists.flat().map((info) => [info.signature, info] as const));
    const merged = [...bySignature.values()]
      .sort((a, b) => b.slot - a.slot) // stable: within a slot the RPC's own order is kept
      .slice(0, limit);
    const out: (LedgerTransaction | null)[] = new Array(merged.length).fill(null);
    let next = 0;
    const worker = async () => {
      while (next < merged.length) {
        const i = next++;
        out[i] = await getTransaction(merged[i]!.signature, commitment);
      }
    };
    await Promise.all(Array.from({ length: Math.min(HISTORY_FETCH_CONCURRENCY, merged.length) }, worker));
    const missing = out.findIndex((t) => t === null);
    if (query.complete === true && missing !== -1) {
      throw new AppError("CHAIN_UNAVAILABLE", `Solana RPC unavailable: transaction ${merged[missing]!.signature} is listed but not readable yet; ask again shortly`);
    }
    return out.filter((t): t is LedgerTransaction => t !== null);
  }

  return {
    network,
    tokens: async () => tokens,
    getBalances,
    accountExists,
    tokenAccountExists,
    programAccount,
    airdrop,
    latestBlockhash,
    blockhashValid: async (blockhash) => (await call(() => connection.isBlockhashValid(blockhash, { commitment: "confirmed" }))).value,
    blockHeight: () => call(() => connection.getBlockHeight("confirmed")),
    chainTime: () =>
      call(async () => {
        const seconds = await connection.getBlockTime(await connection.getSlot("confirmed"));
        return seconds === null ? 0 : seconds * 1000;
      }),
    buildTransfer,
    submit,
    getTransaction: (signature, options) => getTransaction(signature, options?.finalized === true ? "finalized" : "confirmed"),
    transactionStatus,
    history,
    signatures,
    ping: async () => {
      try {
        await call(() => connection.getBlockHeight("confirmed"));
        return true;
      } catch {
        return false;
      }
    },
    stop: async () => {
      lifetime.abort();
    },
  };
}
