// The embedded ledger (NETWORK=localnet): a Solana-compatible ledger in the service's own database.
// Each Solana transaction is checked (signatures, blockhash, duplicate, fee) and applied inside one
// database write, so a crash never leaves half a transfer.
import { Keypair, VersionedTransaction } from "@solana/web3.js";
import type { Config } from "../../config.ts";
import type { Db } from "../../db/open.ts";
import { AppError, fieldError } from "../../errors.ts";
import type { Clock } from "../../lib/clock.ts";
import { decodeBase58, encodeBase58, isAddress } from "../../lib/encoding.ts";
import type { Random } from "../../lib/ids.ts";
import type { SignatureVerifier } from "../../lib/verifier.ts";
import { sha256Hex } from "../../lib/hash.ts";
import {
  recipientBelowRent,
  requireHistoryLimit,
  requireTransferAmount,
  type AirdropAmounts,
  type Balances,
  type HistoryOptions,
  type Ledger,
  type LedgerTransaction,
  type SubmitOptions,
  type SubmitResult,
  type TokenInfo,
  type TransferIntent,
} from "../ledger.ts";
import {
  associatedTokenAddress,
  compileTransaction,
  distinctComputeUnitLimit,
  memoOf,
  parseTransaction,
  requireSignatures,
  transactionFee,
  transferInstructions,
  transfersOf,
  type ParsedTransaction,
} from "../transactions.ts";
import { BLOCKHASH_VALID_SLOTS, blockhashes, type Blockhashes } from "./blockhash.ts";
import { RENT_EXEMPT_MINT, RENT_EXEMPT_SYSTEM, RENT_EXEMPT_TOKEN_ACCOUNT, execute } from "./execute.ts";
import * as store from "./store.ts";

export type EmbeddedLedgerDeps = Readonly<{
  config: Pick<Config, "serviceToken">;
  db: Db;
  clock: Clock;
  random: Random;
  verifier: SignatureVerifier;
}>;

/** What genesis gives the faucet: far more than any test or demo needs, well inside 2^63. */
const FAUCET_LAMPORTS = 1_000_000_000n * 1_000_000_000n; // 1e9 SOL
const FAUCET_TOKEN_WHOLE_UNITS = 1_000_000_000_000n; // 1e12 tokens of each mint...
const MAX_FAUCET_TOKEN_BASE_UNITS = 10n ** 18n; // ...but never past what SQLite (and u64) hold

/** The faucet's genesis supply of a mint: 10^12 whole tokens, capped at 10^18 base units (9 decimals: 10^9 tokens). */
export function faucetSupply(decimals: number): bigint {
  const whole = FAUCET_TOKEN_WHOLE_UNITS * 10n ** BigInt(decimals);
  return whole < MAX_FAUCET_TOKEN_BASE_UNITS ? whole : MAX_FAUCET_TOKEN_BASE_UNITS;
}
const USDC_DECIMALS = 6;
const MAX_AIRDROP_LAMPORTS = 2_000_000_000n; // 2 SOL, as devnet's faucet
const MAX_AIRDROP_TOKEN_WHOLE_UNITS = 1_000_000n;

type Genesis = { seed: Uint8Array; genesisMs: number; faucet: Keypair; usdcMint: string; serviceMint: string; serviceDecimals: number };

function rejected(reason: string, message: string, extra: Record<string, unknown> = {}): AppError {
  return new AppError("TRANSACTION_REJECTED", message, { details: { reason, ...extra } });
}

function requireAddress(address: string, what: string): void {
  if (!isAddress(address)) throw new AppError("INVALID_ADDRESS", `${what} must be a base58 address of 32 bytes`);
}

/** A history query checked: its page size, and the sequence number of `before` (null without it). */
async function historyQuery(db: Db, address: string, { limit, before }: HistoryOptions): Promise<{ limit: number; beforeSeq: number | null }> {
  requireAddress(address, "address");
  requireHistoryLimit(limit);
  if (before === undefined) return { limit, beforeSeq: null };
  const row = await store.findTransaction(db, before);
  if (row === null) throw fieldError("before", "before: no transaction has this signature");
  return { limit, beforeSeq: row.seq };
}

/** Creates the genesis state once (mints, the faucet and its token accounts); reads it afterwards. */
async function loadGenesis(deps: EmbeddedLedgerDeps): Promise<Genesis> {
  const read = (): Genesis | null => {
    const seed = store.readMeta(deps.db, "seed");
    if (seed === null) return null;
    return {
      seed: decodeBase58(seed)!,
      genesisMs: Number(store.readMeta(deps.db, "genesis_ms")),
      faucet: Keypair.fromSecretKey(decodeBase58(store.readMeta(deps.db, "faucet_secret")!)!),
      usdcMint: store.readMeta(deps.db, "usdc_mint")!,
      serviceMint: store.readMeta(deps.db, "service_mint")!,
      serviceDecimals: Number(store.readMeta(deps.db, "service_decimals")),
    };
  };
  const existing = read();
  if (existing !== null) return existing;
  const faucet = Keypair.generate();
  const faucetAddress = faucet.publicKey.toBase58();
  const usdcMint = encodeBase58(deps.random(32));
  const serviceMint = encodeBase58(deps.random(32));
  const serviceDecimals = deps.config.serviceToken.decimals;
  const accounts: [string, store.AccountRow][] = [[faucetAddress, { kind: "system", lamports: FAUCET_LAMPORTS }]];
  let genesisLamports = FAUCET_LAMPORTS;
  for (const [mint, decimals] of [
    [usdcMint, USDC_DECIMALS],
    [serviceMint, serviceDecimals],
  ] as const) {
    const supply = faucetSupply(decimals);
    accounts.push([mint, { kind: "mint", lamports: RENT_EXEMPT_MINT, decimals, supply }]);
    accounts.push([
      associatedTokenAddress(faucetAddress, mint),
      { kind: "token", lamports: RENT_EXEMPT_TOKEN_ACCOUNT, mint, owner: faucetAddress, amount: supply },
    ]);
    genesisLamports += RENT_EXEMPT_MINT + RENT_EXEMPT_TOKEN_ACCOUNT;
  }
  // Another process (the CLI beside a server) may make genesis first; then its genesis is the one read.
  await store.writeGenesis(deps.db, accounts, {
    // The faucet key signs only airdrops of this local play money; whoever can read the database can
    // already rewrite every balance in it, so encrypting it would protect nothing.
    faucet_secret: encodeBase58(faucet.secretKey),
    seed: encodeBase58(deps.random(32)),
    genesis_ms: String(deps.clock.now()),
    genesis_lamports: String(genesisLamports),
    usdc_mint: usdcMint,
    service_mint: serviceMint,
    service_decimals: String(serviceDecimals),
  });
  return read()!;
}

export type EmbeddedLedger = Ledger &
  Readonly<{
    faucetAddress: string;
    /** The current slot (one per 400 ms since genesis). */
    currentSlot(): number;
  }>;

export async function createEmbeddedLedger(deps: EmbeddedLedgerDeps): Promise<EmbeddedLedger> {
  const genesis = await loadGenesis(deps);
  const hashes: Blockhashes = blockhashes(genesis.seed, genesis.genesisMs, deps.clock);
  const faucetAddress = genesis.faucet.publicKey.toBase58();
  const tokenList: readonly TokenInfo[] = Object.freeze([
    { key: "sol", kind: "native", decimals: 9, mint: null },
    { key: "usdc", kind: "spl", decimals: USDC_DECIMALS, mint: genesis.usdcMint },
    { key: deps.config.serviceToken.symbol, kind: "spl", decimals: genesis.serviceDecimals, mint: genesis.serviceMint },
  ]);
  const mintKeys = new Map(tokenList.filter((t) => t.mint !== null).map((t) => [t.mint!, t.key]));

  const tokenOf = (key: string): TokenInfo => {
    const token = tokenList.find((t) => t.key === key);
    if (token === undefined) throw fieldError("token", `unknown token "${key}"; one of ${tokenList.map((t) => t.key).join(", ")}`);
    return token;
  };

  type Recorded = { result: SubmitResult; failure: string | null };

  async function submit(wire: Uint8Array, options: SubmitOptions = {}): Promise<SubmitResult> {
    const tx = parseTransaction(wire);
    const fee = transactionFee(tx);
    const messageHash = sha256Hex(tx.messageBytes);
    await requireSignatures(deps.verifier, tx);
    const recorded = await store.applyTransaction(deps.db, (reader) => {
      // By its message too, as a cluster does: the fee payer could sign another party's once-signed
      // message again, and replay that party's transfer under a new signature. Before the blockhash: bytes
      // that landed, sent again after their blockhash expired (a lost answer), are a duplicate, not "unknown".
      if (reader.transactionExists(tx.signature, messageHash)) {
        throw new AppError("CONFLICT", "this transaction was already submitted", { details: { signature: tx.signature } });
      }
      const blockhash = hashes.check(tx.recentBlockhash);
      if (!blockhash.ok) {
        throw rejected(blockhash.reason, blockhash.reason === "blockhash_expired" ? "the blockhash has expired; build the transaction again" : "unknown blockhash");
      }
      const outcome = execute(tx, fee, reader.account);
      if (outcome.kind === "rejected" || (outcome.kind === "failed" && options.ownTransfer)) {
        if (options.ownTransfer && outcome.funds) throw new AppError("INSUFFICIENT_FUNDS", `insufficient funds: ${outcome.message}`);
        if (options.ownTransfer && outcome.kind === "failed" && outcome.belowRent !== null) throw recipientBelowRent(outcome.belowRent);
        if (outcome.kind === "rejected") throw rejected(outcome.reason, outcome.message);
        // The service's own transfer is tried before it is kept, as the RPC ledger simulates it: one that
        // would fail is not execution_failed (recorded, charged) but refused, free, like a failed preflight.
        throw rejected("preflight_failed", `the transfer would fail (${outcome.message}); it was not sent, recorded or charged`);
      }
      const slot = hashes.currentSlot();
      const now = deps.clock.now();
      const transfers = transfersOf(
        tx,
        (address) => {
          const account = reader.account(address);
          if (account?.kind !== "token") return null;
          const mint = reader.account(account.mint);
          return { mint: account.mint, owner: account.owner, decimals: mint?.kind === "mint" ? mint.decimals : undefined };
        },
        (mint) => mintKeys.get(mint) ?? null,
      );
      const failure = outcome.kind === "failed" ? outcome.message : null;
      const record: store.TransactionRow = {
        signature: tx.signature,
        wire,
        slot,
        blockTime: now,
        status: failure === null ? "confirmed" : "failed",
        error: failure,
        fee,
        feePayer: tx.accountKeys[0]!,
        transfers: JSON.stringify(transfers, (_, v) => (typeof v === "bigint" ? v.toString() : v)),
        memo: memoOf(tx),
      };
      const write = {
        accounts: outcome.accounts,
        record,
        messageHash,
        addresses: [...tx.accountKeys, ...transfers.flatMap((t) => [t.from, t.to])],
        alongside: failure === null && options.alongside !== undefined ? () => options.alongside!({ signature: tx.signature, transfers }) : undefined,
      };
      return { write, result: { result: { signature: tx.signature, slot, confirmedAt: now, fee }, failure } satisfies Recorded };
    });
    if (recorded.failure !== null) {
      throw rejected("execution_failed", `the transaction failed: ${recorded.failure}; its fee was charged`, { signature: tx.signature });
    }
    return recorded.result;
  }

  function toLedgerTransaction(row: store.TransactionRow): LedgerTransaction {
    const transfers = (JSON.parse(row.transfers) as { token: string; mint: string | null; from: string; to: string; amount: string; decimals?: number }[]).map(
      (t) => ({ ...t, amount: BigInt(t.amount) }),
    );
    return {
      signature: row.signature,
      slot: row.slot,
      timestamp: row.blockTime,
      status: row.status,
      error: row.error,
      fee: row.fee,
      feePayer: row.feePayer,
      transfers,
      memo: row.memo,
      wire: row.wire,
      loadedAddresses: null, // lookup tables are refused here
    };
  }

  async function balanceOf(owner: string, token: TokenInfo): Promise<bigint> {
    if (token.mint === null) return (await store.findAccount(deps.db, owner))?.lamports ?? 0n;
    const account = await store.findAccount(deps.db, associatedTokenAddress(owner, token.mint));
    return account?.kind === "token" ? account.amount : 0n;
  }

  /** Signs `wire` with the faucet key and submits it. */
  async function submitFromFaucet(wire: Uint8Array): Promise<string> {
    const tx = VersionedTransaction.deserialize(wire);
    tx.sign([genesis.faucet]);
    return (await submit(tx.serialize())).signature;
  }

  const ledger: EmbeddedLedger = {
    network: "localnet",
    faucetAddress,
    currentSlot: () => hashes.currentSlot(),
    tokens: async () => tokenList,

    async getBalances(address) {
      requireAddress(address, "address");
      const balances: Balances = {};
      for (const token of tokenList) balances[token.key] = await balanceOf(address, token);
      return balances;
    },

    async accountExists(address) {
      requireAddress(address, "address");
      return (await store.findAccount(deps.db, address)) !== null;
    },

    async tokenAccountExists(address) {
      requireAddress(address, "address");
      return (await store.findAccount(deps.db, address))?.kind === "token";
    },

    async programAccount(address) {
      requireAddress(address, "address");
      const kind = (await store.findAccount(deps.db, address))?.kind;
      return kind === "token" || kind === "mint" ? kind : null;
    },

    async airdrop(address: string, amounts: AirdropAmounts) {
      requireAddress(address, "address");
      const sol = amounts.sol ?? 0n;
      if (sol < 0n || sol > MAX_AIRDROP_LAMPORTS) throw fieldError("sol", "a SOL airdrop is at most 2 SOL");
      if (sol > 0n && sol < RENT_EXEMPT_SYSTEM && (await balanceOf(address, tokenList[0]!)) === 0n) {
        throw fieldError("sol", "an empty account needs at least 0.00089088 SOL (the rent-exempt minimum)");
      }
      const splDrops: [TokenInfo, bigint][] = [
        [tokenList[1]!, amounts.usdc ?? 0n],
        [tokenList[2]!, amounts.token ?? 0n],
      ];
      for (const [token, amount] of splDrops) {
        if (amount < 0n || amount > MAX_AIRDROP_TOKEN_WHOLE_UNITS * 10n ** BigInt(token.decimals)) {
          throw fieldError(token.key, `a ${token.key} airdrop is at most ${MAX_AIRDROP_TOKEN_WHOLE_UNITS} ${token.key}`);
        }
      }
      const signatures: string[] = [];
      if (sol > 0n) signatures.push(await submitFromFaucet(await ledger.buildTransfer({ from: faucetAddress, to: address, token: "sol", amount: sol })));
      for (const [token, amount] of splDrops) {
        if (amount > 0n) {
          signatures.push(await submitFromFaucet(await ledger.buildTransfer({ from: faucetAddress, to: address, token: token.key, amount })));
        }
      }
      return signatures;
    },

    async blockhashValid(blockhash) {
      return hashes.check(blockhash).ok;
    },

    async blockHeight() {
      return hashes.currentSlot();
    },

    async chainTime() {
      return deps.clock.now(); // the clock its blocks are stamped with
    },

    async latestBlockhash() {
      const slot = hashes.currentSlot();
      return { blockhash: hashes.hashOf(slot), lastValidBlockHeight: slot + BLOCKHASH_VALID_SLOTS };
    },

    async buildTransfer(intent: TransferIntent) {
      requireAddress(intent.from, "from");
      requireAddress(intent.to, "to");
      const feePayer = intent.feePayer ?? intent.from;
      requireAddress(feePayer, "feePayer");
      if (intent.reference !== undefined) requireAddress(intent.reference, "reference");
      const token = tokenOf(intent.token);
      requireTransferAmount(intent.amount);
      // Not a token account yet (lamports alone may be there: a cluster still creates the account).
      const missing = async (owner: string) => token.mint !== null && (await store.findAccount(deps.db, associatedTokenAddress(owner, token.mint)))?.kind !== "token";
      const createRecipientAccount = intent.openRecipientAccount !== false && (await missing(intent.to));
      if (intent.split !== undefined) {
        requireAddress(intent.split.to, "split.to");
        requireTransferAmount(intent.split.amount);
      }
      const instructions = transferInstructions({
        from: intent.from,
        to: intent.to,
        feePayer,
        amount: intent.amount,
        spl: token.mint === null ? null : { mint: token.mint, decimals: token.decimals },
        createRecipientAccount,
        memo: intent.memo ?? null,
        split: intent.split === undefined ? null : { ...intent.split, createRecipientAccount: await missing(intent.split.to) },
        computeUnitLimit: distinctComputeUnitLimit(deps.random),
        reference: intent.reference ?? null,
      });
      return compileTransaction(instructions, feePayer, (await ledger.latestBlockhash()).blockhash);
    },

    submit,

    async getTransaction(signature) {
      const row = await store.findTransaction(deps.db, signature);
      return row === null ? null : toLedgerTransaction(row);
    },

    async transactionStatus(signature) {
      const row = await store.findTransaction(deps.db, signature);
      return row === null ? null : toLedgerTransaction(row).status;
    },

    // `finalized` asks nothing more here: an accepted transaction is final at once.
    async history(address, query) {
      const { limit, beforeSeq } = await historyQuery(deps.db, address, query);
      return (await store.listTransactions(deps.db, address, limit, beforeSeq)).map(toLedgerTransaction);
    },

    async signatures(address, query) {
      const { limit, beforeSeq } = await historyQuery(deps.db, address, query);
      return store.listSignatures(deps.db, address, limit, beforeSeq);
    },

    ping: async () => deps.db.ping(),
    stop: async () => undefined,
  };
  return ledger;
}

/** Genesis lamports and what is held and burned now: held + fees = genesis, always (tests, diagnostics). */
export async function embeddedLedgerTotals(db: Db): Promise<{ genesisLamports: bigint } & Awaited<ReturnType<typeof store.ledgerTotals>>> {
  return { genesisLamports: BigInt(store.readMeta(db, "genesis_lamports") ?? "0"), ...(await store.ledgerTotals(db)) };
}
