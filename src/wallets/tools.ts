// Tool edge of wallets (mcp.md "Session and wallet"): wallet_create, wallet_get_balance, wallet_transfer,
// wallet_submit_transaction, wallet_get_history. Amounts cross this edge as decimal strings or numbers.
import { z } from "zod";
import { historyHits, transferHits } from "../auth/rate-limit.ts";
import type { Deps } from "../deps.ts";
import { amountField, fieldError, invalidField, textField } from "../errors.ts";
import { amountToNumber, formatAmount } from "../lib/amounts.ts";
import { toIso } from "../lib/clock.ts";
import { decodeBase64Strict } from "../lib/encoding.ts";
import { blockhashExpiresAt, type ParsedTransfer, type SubmitResult, type TokenInfo } from "../ledger/ledger.ts";
import { createPayment } from "../ledger/x402.ts";
import { defineTool, headerStillWins, idempotencyKeyInput, requireWallet, type Tool } from "../mcp/registry.ts";
import { transferFromWallet } from "./transfer.ts";
import {
  checkAirdrop,
  createCustodialWallet,
  fundNewWallet,
  newWalletBalances,
  submitSignedTransaction,
  tokenInfo,
  walletHistory,
  type HistoryEntry,
} from "./wallets.ts";

const SOL_DECIMALS = 9;
const address = (what: string) => z.string().describe(`${what}: a Solana address (base58 of 32 bytes)`);
const amount = z
  .union([z.number(), z.string()])
  .describe('amount in whole tokens, as a number or a decimal string ("1.5"); at most the token\'s decimals');

/** Balances as JSON numbers in whole tokens (spec/README.md: balances are numbers), every token named. */
async function shownBalances(deps: Deps, raw: Record<string, bigint>): Promise<Record<string, number>> {
  const tokens = await deps.ledger.tokens();
  return Object.fromEntries(tokens.map((t) => [t.key, amountToNumber(raw[t.key] ?? 0n, t.decimals)]));
}

/** ledger.md's transfer result (`amount` already in whole tokens, see shownAmount). */
function transferResult(deps: Deps, result: SubmitResult, transfer: { from: string; to: string; token: string; amount: string }) {
  return {
    signature: result.signature,
    from: transfer.from,
    to: transfer.to,
    token: transfer.token,
    amount: transfer.amount,
    fee: formatAmount(result.fee, SOL_DECIMALS),
    status: "confirmed",
    network: deps.config.network,
    slot: result.slot,
    confirmedAt: toIso(result.confirmedAt),
  };
}

/** wallet_create's airdrop bounds in whole tokens (mcp.md): the schema's for numbers, the run's for decimal strings. */
const AIRDROP_MAX = { sol: 2, usdc: 1_000_000 } as const;

export const walletCreate = defineTool({
  name: "wallet_create",
  description:
    "Create a new custodial Solana wallet held by this service, signed in at once (this MCP session is bound to it and a " +
    "session token is returned; over HTTP a session token in the Authorization header still wins over the binding, and " +
    "data.note says so when it names another wallet or is not valid). Off mainnet it is funded from the faucet: airdropSol (0-2, default 1) and, on localnet, " +
    "airdropUsdc. Its key never leaves the service, so it is reached only through its sessions: keep the sessionToken " +
    "and renew it with session_restore in its last hour (REFRESH_THRESHOLD_S); a session lasts at most SESSION_MAX_AGE_S " +
    "(30 days by default), and no one can sign in to this wallet again, so move what it holds before then.",
  input: {
    // A JSON number or a decimal string, as every amount at the edge (spec README "Amounts").
    airdropSol: z
      .union([z.number().min(0).max(AIRDROP_MAX.sol), z.string().max(32)])
      .optional()
      .describe('SOL to airdrop (0-2, a number or a decimal string such as "0.5"); default 1 off mainnet, 0 on mainnet'),
    airdropUsdc: z
      .union([z.number().min(0).max(AIRDROP_MAX.usdc), z.string().max(32)])
      .optional()
      .describe("USDC to airdrop (localnet only), at most 1,000,000, a number or a decimal string"),
    label: z.string().max(64).optional().describe("a name for the wallet, up to 64 characters"),
  },
  needsWallet: false,
  run: async ({ deps, session, client, caller }, input) => {
    const network = deps.config.network;
    const label = input.label === undefined ? null : textField(input.label, "label", 64, false);
    const [sol, usdc] = await Promise.all([tokenInfo(deps, "sol"), tokenInfo(deps, "usdc")]);
    const airdropSol = amountField(input.airdropSol ?? (network === "mainnet" ? 0 : 1), sol.decimals, "airdropSol", { allowZero: true });
    const airdropUsdc = amountField(input.airdropUsdc ?? 0, usdc.decimals, "airdropUsdc", { allowZero: true });
    // The schema bounds the numbers; these bound the decimal strings alike.
    if (airdropSol > BigInt(AIRDROP_MAX.sol) * 10n ** BigInt(sol.decimals)) throw invalidField("airdropSol", `at most ${AIRDROP_MAX.sol}`);
    if (airdropUsdc > BigInt(AIRDROP_MAX.usdc) * 10n ** BigInt(usdc.decimals)) throw invalidField("airdropUsdc", `at most ${AIRDROP_MAX.usdc.toLocaleString("en-US")}`);
    const airdrop = { sol: airdropSol, usdc: airdropUsdc };
    checkAirdrop(deps, airdrop);

    const { walletAddress, issued } = await createCustodialWallet(deps, client, label);
    await session.bind({ walletAddress, sessionId: issued.sessionId, jti: issued.jti, tokenExpiresAtS: issued.expiresAtS });
    const funded = await fundNewWallet(deps, walletAddress, airdrop);
    const fundedFields = funded === null ? {} : "error" in funded ? { airdropError: funded.error } : { airdropSignature: funded.signatures[0], airdropSignatures: funded.signatures };
    const balances = await newWalletBalances(deps, walletAddress, funded !== null && "signatures" in funded ? airdrop : null);
    return {
      address: walletAddress,
      label,
      network,
      balances: await shownBalances(deps, balances.raw),
      ...(balances.error === undefined ? {} : { balancesError: balances.error }),
      sessionToken: issued.token,
      authenticated: true,
      isNewSession: true,
      expiresAt: issued.expiresAt,
      ...fundedFields,
      ...headerStillWins({ session, caller }, walletAddress),
    };
  },
});

export const walletGetBalance = defineTool({
  name: "wallet_get_balance",
  description: "Balances of this session's wallet in whole tokens: sol, usdc and the service token.",
  input: {},
  needsWallet: true,
  run: async ({ deps, caller }) => {
    const wallet = requireWallet(caller);
    return { address: wallet.walletAddress, network: deps.config.network, balances: await shownBalances(deps, await deps.ledger.getBalances(wallet.walletAddress)) };
  },
});

export const walletTransfer = defineTool({
  name: "wallet_transfer",
  description:
    "Send sol, usdc or the service token from this session's wallet to `to` (creating the recipient's token account if " +
    "needed, paid by the sender). A custodial wallet's transfer is signed and confirmed here; a connected wallet gets " +
    "data.unsignedTransaction (base64) to sign and pass to wallet_submit_transaction before data.expiresAt (its blockhash lives " +
    "about a minute; after that, ask for a new one). Give a custodial wallet's transfer an idempotencyKey (your own, one " +
    "per intended transfer) so that a retry after any error or a lost answer (a dropped connection, a restarted server) " +
    "answers that transfer instead of sending it again: it is sent at most once (CONFLICT while it may still land: call " +
    "again); keys are kept for 24 hours. Without a key, a transfer whose answer was lost may have been made: look for it " +
    "(a memo of your own) with wallet_get_history before sending again.",
  input: {
    to: address("recipient"),
    amount,
    token: z.string().describe("sol, usdc or the service token's symbol"),
    memo: z
      .string()
      .max(200)
      .optional()
      .describe("a note recorded on chain with the transfer, up to 200 characters (a transaction holds 1,232 bytes: a long memo of multi-byte characters may not fit, and is refused)"),
    idempotencyKey: idempotencyKeyInput("custodial wallets: a key you choose for this one transfer (e.g. a UUID); calling again with it, after any error or a lost answer, never sends twice"),
  },
  needsWallet: true,
  run: async ({ deps, caller, client }, input) => {
    const wallet = requireWallet(caller);
    deps.auth.rateLimiter.consume(transferHits(wallet.walletAddress, client.ip), deps.clock.now());
    const token = await tokenInfo(deps, input.token);
    const value = amountField(input.amount, token.decimals, "amount");
    const builtAt = deps.clock.now();
    const intent = { from: wallet.walletAddress, to: input.to, token: token.key, amount: value, memo: input.memo };
    const outcome = await transferFromWallet(deps, intent, { idempotencyKey: input.idempotencyKey });
    if (outcome.kind === "unsigned") {
      return {
        unsignedTransaction: outcome.transaction,
        from: wallet.walletAddress,
        to: input.to,
        token: token.key,
        amount: formatAmount(value, token.decimals),
        network: deps.config.network,
        expiresAt: blockhashExpiresAt(builtAt),
        next: "sign unsignedTransaction with this wallet and call wallet_submit_transaction {transaction} before expiresAt (about a minute); after it, call wallet_transfer again",
      };
    }
    return transferResult(deps, outcome.result, { from: wallet.walletAddress, to: input.to, token: token.key, amount: formatAmount(value, token.decimals) });
  },
});

/**
 * A transfer's token and amount in whole tokens (spec/README.md: never base units). One of the service's
 * tokens is named by its key; another mint by its address, scaled by the decimals the transaction or
 * the ledger gives (TransferChecked, the node's token balances). Without them (a plain Token Transfer
 * of accounts no ledger knows as token accounts: it can only have failed, so nothing moved) the amount
 * is "0", never a guess.
 */
function shownAmount(transfer: ParsedTransfer, tokens: readonly TokenInfo[]): { token: string; amount: string } {
  const known = tokens.find((t) => t.key === transfer.token);
  if (known !== undefined) return { token: known.key, amount: formatAmount(transfer.amount, known.decimals) };
  // A mint the ledger knows no decimals of, and the transaction names none: shown in its smallest units as
  // whole ones would be a guess, so nothing moved of it is shown (transfersOf leaves out what has no mint).
  if (transfer.decimals === undefined) return { token: transfer.mint ?? transfer.token, amount: "0" };
  return { token: transfer.mint ?? transfer.token, amount: formatAmount(transfer.amount, transfer.decimals) };
}

export const walletSubmitTransaction = defineTool({
  name: "wallet_submit_transaction",
  description:
    "Submit a transaction signed by this session's (connected) wallet, e.g. the unsignedTransaction of wallet_transfer " +
    "after signing it. Returns the confirmed transfer.",
  input: { transaction: z.string().describe("the signed transaction: standard base64 of its wire bytes") },
  needsWallet: true,
  run: async ({ deps, caller, client }, input) => {
    const wallet = requireWallet(caller);
    deps.auth.rateLimiter.consume(transferHits(wallet.walletAddress, client.ip), deps.clock.now());
    const wire = decodeBase64Strict(input.transaction);
    if (wire === null) throw fieldError("transaction", "transaction must be standard base64");
    const { result, transfer } = await submitSignedTransaction(deps, wallet.walletAddress, wire);
    const tokens = await deps.ledger.tokens();
    return transferResult(deps, result, {
      from: transfer?.from ?? wallet.walletAddress,
      to: transfer?.to ?? wallet.walletAddress,
      // A transaction that moved nothing of the wallet's (a memo) shows 0 SOL.
      ...(transfer === null ? { token: "sol", amount: "0" } : shownAmount(transfer, tokens)),
    });
  },
});

function historyItem({ tx, transfer, direction, counterparty }: HistoryEntry, tokens: readonly TokenInfo[]) {
  return {
    signature: tx.signature,
    // A block time the node does not give (0: unknown) is null, not 1970.
    timestamp: tx.timestamp === 0 ? null : toIso(tx.timestamp),
    direction,
    ...(transfer === null ? { token: "sol", amount: "0" } : shownAmount(transfer, tokens)),
    counterparty,
    fee: formatAmount(tx.fee, SOL_DECIMALS),
    status: tx.status,
    ...(tx.memo === null ? {} : { memo: tx.memo }),
  };
}

export const walletGetHistory = defineTool({
  name: "wallet_get_history",
  description: "This session's wallet's transactions, newest first (limit 1-100, default 20; page with before = the last signature seen).",
  input: {
    limit: z.number().int().min(1).max(100).optional().describe("how many, 1-100 (default 20)"),
    before: z.string().optional().describe("a signature: list transactions older than it"),
  },
  needsWallet: true,
  run: async ({ deps, caller, client }, input) => {
    const wallet = requireWallet(caller);
    deps.auth.rateLimiter.consume(historyHits(wallet.walletAddress, client.ip), deps.clock.now());
    const [tokens, entries] = await Promise.all([deps.ledger.tokens(), walletHistory(deps, wallet.walletAddress, { limit: input.limit ?? 20, before: input.before })]);
    return { address: wallet.walletAddress, network: deps.config.network, transactions: entries.map((entry) => historyItem(entry, tokens)) };
  },
});

export const paymentCreate = defineTool({
  name: "payment_create",
  description:
    "Pay for an HTTP resource that answers 402 (x402 'exact' scheme on Solana): returns the header to send " +
    "(X-PAYMENT for x402 v1, the default, or PAYMENT-SIGNATURE for v2) with its base64 value. Pass one entry of the " +
    "402 answer's accepts[] as requirements, or to/amount/token/feePayer yourself. The transaction is signed by this " +
    "session's wallet only and never submitted here: the resource's facilitator settles it. A connected wallet gets " +
    "data.unsignedTransaction: sign it and call again with the same params plus signedTransaction.",
  input: {
    to: address("recipient (payTo)").optional(),
    amount: amount.optional(),
    token: z.string().optional().describe("usdc or the service token's symbol (sol is not possible with x402 exact)"),
    feePayer: address("the facilitator's fee payer").optional(),
    memo: z.string().max(200).optional().describe("memo; 32 random hex characters when absent"),
    x402Version: z.union([z.literal(1), z.literal(2)]).optional().describe("1 (X-PAYMENT, default) or 2 (PAYMENT-SIGNATURE)"),
    requirements: z.record(z.string(), z.unknown()).optional().describe("one entry of the 402 answer's accepts[]"),
    signedTransaction: z.string().optional().describe("connected wallets: the unsignedTransaction, signed"),
  },
  needsWallet: true,
  run: async ({ deps, caller }, input) => {
    // The amount is read with the decimals of the token named by `token` or by the requirements' asset.
    return { ...(await createPayment(deps, requireWallet(caller).walletAddress, input)) };
  },
});

export const WALLET_TOOLS: readonly Tool[] = [walletCreate, walletGetBalance, walletTransfer, walletSubmitTransaction, walletGetHistory, paymentCreate];
