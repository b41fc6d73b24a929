// Chooses the ledger for NETWORK and loads it on first use, so @solana/web3.js costs nothing at start-up.
import { ConfigError, type Config } from "../config.ts";
import type { Db } from "../db/open.ts";
import type { Clock } from "../lib/clock.ts";
import { importQuietly } from "../lib/quiet-import.ts";
import type { Random } from "../lib/ids.ts";
import type { SignatureVerifier } from "../lib/verifier.ts";
import { AppError, errorText, outcomeUnknown, reasonOf } from "../errors.ts";
import { encodeBase58 } from "../lib/encoding.ts";
import type { Logger } from "../log.ts";
import type { Ledger, SubmitOptions, SubmitResult } from "./ledger.ts";
import * as store from "./store.ts";
import { readMeta } from "./embedded/store.ts";
import type { TokenAccountInfo } from "./transactions.ts";

export type LedgerDeps = Readonly<{ config: Config; db: Db; clock: Clock; random: Random; verifier: SignatureVerifier; log?: Logger }>;

/**
 * On localnet, SERVICE_TOKEN_DECIMALS must still be what the embedded ledger made its service token with
 * (a mint's decimals never change): otherwise amounts would be read with other decimals than the ones
 * the setting promises, silently. Checked at start, before anything is served.
 */
export function requireGenesisDecimals(config: Config, db: Db): void {
  if (config.network !== "localnet") return;
  const made = readMeta(db, "service_decimals");
  if (made === null || Number(made) === config.serviceToken.decimals) return;
  throw new ConfigError(
    `SERVICE_TOKEN_DECIMALS is ${config.serviceToken.decimals}, but this database's embedded ledger made its service token with ${made} decimals, which a mint keeps: set SERVICE_TOKEN_DECIMALS=${made} (or unset it if ${made} is the default), or start from a new DATA_DIR`,
  );
}

/**
 * A database is served on one NETWORK: its purchases, feature tokens, orders and embedded ledger are that
 * network's, and served under another a localnet purchase paid in play money would grant access on devnet or
 * mainnet. `serve` and `mcp` (`records`) record the network at their first start; a database from before the
 * record is taken to be served where its newest purchase, audited transfer or escrow wallet was made, else on
 * the network it is opened under now. A start or command under another is refused (exit 1), naming both.
 * Other commands check against the record but make none: an operator's shell may lack the server's NETWORK.
 */
export function requireNetwork(config: Config, db: Db, records: boolean): void {
  const recorded = store.findNetworkInUse(db);
  const inferred = recorded ?? store.latestServedNetwork(db);
  const servedOn = inferred === null ? null : asNetwork(inferred);
  if (servedOn !== null && servedOn !== config.network) {
    throw new ConfigError(
      `this database is served on NETWORK=${servedOn}, not ${config.network}: its purchases, feature tokens, orders and wallets' records are ${servedOn}'s; set NETWORK=${servedOn}, or give ${config.network} a DATA_DIR of its own (DATA_DIR=./data-${config.network})`,
    );
  }
  // Recorded with the first batch of writes, not waited for: lost in a crash, the next start records it.
  if (recorded === null && records) store.recordNetworkInUse(db, config.network).catch(() => undefined);
}

/** A NETWORK value from a record, which may hold a cluster name (purchases: "mainnet-beta"). */
function asNetwork(recorded: string): string {
  return recorded === "mainnet-beta" ? "mainnet" : recorded;
}

async function loadLedger(deps: LedgerDeps): Promise<Ledger> {
  if (deps.config.network === "localnet") {
    const { createEmbeddedLedger } = await importQuietly(() => import("./embedded/ledger.ts"));
    return createEmbeddedLedger(deps);
  }
  const { createRpcLedger, rpcTokens } = await importQuietly(() => import("./rpc/ledger.ts"));
  return createRpcLedger({
    network: deps.config.network,
    rpcUrl: deps.config.solanaRpcUrl!,
    tokens: rpcTokens(deps.config.network, deps.config.serviceToken),
    clock: deps.clock,
    random: deps.random,
  });
}

const PING_TIMEOUT_MS = 2_000;
const PING_CACHE_MS = 1_000;

/** `promise`, or `fallback` once `ms` have passed. */
function withTimeout<T>(promise: Promise<T>, ms: number, fallback: T): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const timeout = new Promise<T>((resolve) => {
    timer = setTimeout(() => resolve(fallback), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

/** How long a landed transaction's reading may add to its submission, for the audit row (below). */
const AUDIT_READ_TIMEOUT_MS = 2_000;

/** What the audit log is told of a transaction's accounts beyond the transaction itself. */
type AuditReading = Readonly<{
  /** The service's token key of a mint ("usdc"), when it is one of the ledger's tokens. */
  mintKey: (mint: string) => string | null;
  /** Token accounts whose owner and mint the caller knows (an x402 payment's two). */
  tokenAccount?: (address: string) => TokenAccountInfo | null;
}>;

async function auditReading(ledger: Pick<Ledger, "tokens">, tokenAccount?: AuditReading["tokenAccount"]): Promise<AuditReading> {
  const tokens = await ledger.tokens();
  return { mintKey: (mint) => tokens.find((t) => t.mint === mint)?.key ?? null, ...(tokenAccount === undefined ? {} : { tokenAccount }) };
}

function transfersJson(transfers: readonly unknown[]): string {
  return JSON.stringify(transfers, (_, v: unknown) => (typeof v === "bigint" ? v.toString() : v));
}

/**
 * Mainnet rule (ledger.md): every submitted transfer is logged with its outcome — confirmed, failed on
 * chain, rejected before execution, or unknown (the RPC stopped answering after the send). The row is
 * written, as `unknown`, before the transaction is sent, so a crash while waiting for the outcome leaves
 * exactly that on record; the outcome then replaces it. A failure to write the outcome never replaces
 * the ledger's answer (the money moved, or did not, all the same): the row then stays `unknown`.
 */
async function auditedSubmit(deps: LedgerDeps, ledger: Ledger, wire: Uint8Array, options: SubmitOptions | undefined): Promise<SubmitResult> {
  // Throws for what is not a transaction: nothing sent, nothing to log.
  const { id, parsed, transfers: told } = await insertUnknownAudit(deps, wire, await auditReading(ledger));
  const settle = async (outcome: store.AuditRow["outcome"], errorCode: string | null) => {
    // Landed (confirmed, or failed with its fee): the chain's reading of what moved replaces what the
    // transaction alone told before it was sent: each transfer between wallets (the node's token balances
    // name each account's owner and mint), as the ledger's history reads it. Both readings take the
    // transaction's instructions in order, and the chain's leaves out a token transfer it cannot resolve (no
    // balances name its accounts): holding fewer, it lost one, and the row keeps the transaction's own
    // reading, as it does when the chain's is not read in time (or not yet served by the node).
    const landed =
      outcome === "confirmed" || outcome === "failed"
        ? await withTimeout(ledger.getTransaction(parsed.signature, options?.finalized === true ? { finalized: true } : {}), AUDIT_READ_TIMEOUT_MS, null).catch(() => null)
        : null;
    const chains = landed !== null && landed.transfers.length >= told ? transfersJson(landed.transfers) : null;
    await store.setAuditOutcome(deps.db, id, outcome, errorCode, chains).catch((err: unknown) => {
      // The row stays `unknown` (see above); the operator hears which one and what it should say.
      deps.log?.error("ledger audit outcome not recorded", { auditId: id, signature: parsed.signature, outcome, error: errorText(err) });
    });
  };
  try {
    const result = await ledger.submit(wire, options);
    await settle("confirmed", null);
    return result;
  } catch (err) {
    const code = err instanceof AppError ? err.code : "INTERNAL_ERROR";
    const reason = reasonOf(err);
    await settle(reason === "execution_failed" ? "failed" : outcomeUnknown(err) ? "unknown" : "rejected", code);
    throw err;
  }
}

/**
 * An audit row for `wire` with the outcome `unknown`: its id, and the transaction parsed. `signed`: the row
 * names the first signature present instead of the transaction's own (its fee payer's, not there yet).
 */
async function insertUnknownAudit(deps: Pick<LedgerDeps, "config" | "db" | "clock">, wire: Uint8Array, reading: AuditReading, signed = false) {
  const { isEmptySignature, parseTransaction, transfersOf } = await import("./transactions.ts");
  const parsed = parseTransaction(wire);
  const present = parsed.signatures.find((s) => !isEmptySignature(s));
  const signature = signed && present !== undefined ? encodeBase58(present) : parsed.signature;
  const read = transfersOf(parsed, reading.tokenAccount ?? (() => null), reading.mintKey, { keepUnresolved: true });
  const transfers = transfersJson(read);
  const id = await store.insertAudit(deps.db, {
    at: deps.clock.now(),
    network: deps.config.network,
    signature,
    feePayer: parsed.accountKeys[0]!,
    transfers,
    outcome: "unknown",
    errorCode: null,
  });
  return { id, parsed, transfers: read.length };
}

/**
 * The same rule for a transfer this service signs or passes on but does not send: an x402 payment, which the
 * paid resource's facilitator settles. On mainnet it is logged, as `unknown` (its outcome is the
 * facilitator's), before it is handed out; if the row cannot be written, it is not handed out. The row names
 * the payer's signature: the transaction's own id is the fee payer's, which the facilitator adds.
 */
export async function auditHandedOut(
  deps: Pick<LedgerDeps, "config" | "db" | "clock"> & { ledger: Pick<Ledger, "tokens"> },
  wire: Uint8Array,
  /** The payment's token accounts, whose owners the row names instead of the accounts. */
  tokenAccount: (address: string) => TokenAccountInfo | null,
): Promise<void> {
  if (deps.config.network === "mainnet") await insertUnknownAudit(deps, wire, await auditReading(deps.ledger, tokenAccount), true);
}

/** The ledger of `deps.config.network`, created (genesis included, on localnet) when first called. */
export function createLedger(deps: LedgerDeps): Ledger {
  let loading: Promise<Ledger> | null = null;
  /** Once loaded, calls go straight to it (no promise to wait for on each call). */
  let loaded: Ledger | null = null;
  let lastPing: { at: number; answer: Promise<boolean> } | null = null;
  const ledger = (): Promise<Ledger> => {
    loading ??= loadLedger(deps).then(
      (l) => (loaded = l),
      (err: unknown) => {
        loading = null; // a failed load (e.g. a locked database) is tried again on the next call
        throw err;
      },
    );
    return loading;
  };
  /** Calls the ledger: at once when it is loaded; a throw becomes a rejection either way. */
  const call = <T>(f: (l: Ledger) => Promise<T>): Promise<T> => {
    if (loaded === null) return ledger().then(f);
    try {
      return f(loaded);
    } catch (err) {
      return Promise.reject(err);
    }
  };
  return {
    network: deps.config.network,
    tokens: () => call((l) => l.tokens()),
    getBalances: (address) => call((l) => l.getBalances(address)),
    accountExists: (address) => call((l) => l.accountExists(address)),
    tokenAccountExists: (address) => call((l) => l.tokenAccountExists(address)),
    programAccount: (address) => call((l) => l.programAccount(address)),
    airdrop: (address, amounts) => call((l) => l.airdrop(address, amounts)),
    latestBlockhash: () => call((l) => l.latestBlockhash()),
    blockhashValid: (blockhash) => call((l) => l.blockhashValid(blockhash)),
    blockHeight: () => call((l) => l.blockHeight()),
    chainTime: () => call((l) => l.chainTime()),
    buildTransfer: (intent) => call((l) => l.buildTransfer(intent)),
    submit: async (wire, options) => {
      if (deps.config.network !== "mainnet") return (await ledger()).submit(wire, options);
      return auditedSubmit(deps, await ledger(), wire, options);
    },
    getTransaction: (signature, options) => call((l) => l.getTransaction(signature, options)),
    transactionStatus: (signature) => call((l) => l.transactionStatus(signature)),
    history: (address, options) => call((l) => l.history(address, options)),
    signatures: (address, options) => call((l) => l.signatures(address, options)),
    ping: () => {
      // Readiness probes come often and must answer fast: a slow RPC counts as down after 2 s, and
      // one answer serves every probe for a second, so probes never pile up on a public endpoint.
      const now = deps.clock.now();
      if (lastPing === null || now - lastPing.at >= PING_CACHE_MS) {
        const answer = (async () => {
          try {
            return await withTimeout((async () => (await ledger()).ping())(), PING_TIMEOUT_MS, false);
          } catch {
            return false;
          }
        })();
        lastPing = { at: now, answer };
      }
      return lastPing.answer;
    },
    stop: async () => {
      if (loading !== null) await (await loading.catch(() => null))?.stop();
    },
  };
}
