// A wallet's transfer: a custodial wallet's is signed here and submitted as the service's own transfer
// (a shortfall is INSUFFICIENT_FUNDS and costs nothing); a connected wallet gets it back unsigned, once its
// balances cover it. SOL too little for a new recipient account is VALIDATION_ERROR on amount for both.
// A custodial transfer under an idempotency key is made once, whatever the retries (transferOnce).
import type { Deps } from "../deps.ts";
import { AppError, fieldError } from "../errors.ts";
import { formatAmount } from "../lib/amounts.ts";
import { encodeBase64 } from "../lib/encoding.ts";
import { SENT_KEPT_MS } from "../ledger/landing.ts";
import {
  RENT_EXEMPT_TOKEN_ACCOUNT_LAMPORTS,
  RENT_EXEMPT_WALLET_LAMPORTS,
  recipientBelowRent,
  type LedgerTransaction,
  type SubmitResult,
  type TransferIntent,
} from "../ledger/ledger.ts";
import { requireWalletRecipient } from "../ledger/recipients.ts";
import { parseTransaction, transactionFee } from "../ledger/transactions.ts";
import { signerFor, type Signer } from "./signer.ts";
import * as store from "./store.ts";

export type TransferOutcome =
  | { kind: "submitted"; intent: TransferIntent; result: SubmitResult }
  /** Base64 wire bytes for the wallet to sign and submit itself. */
  | { kind: "unsigned"; intent: TransferIntent; transaction: string };

export async function transferFromWallet(deps: Deps, intent: TransferIntent, options: { idempotencyKey?: string | undefined } = {}): Promise<TransferOutcome> {
  const signer = await signerFor(deps, intent.from);
  if (options.idempotencyKey !== undefined) {
    if (signer.kind === "connected") {
      throw fieldError(
        "idempotencyKey",
        "a connected wallet sends its transfer itself, with wallet_submit_transaction (the same signed transaction sent again is refused as a duplicate, CONFLICT, and never pays twice); idempotencyKey is for custodial wallets",
      );
    }
    return { kind: "submitted", intent, result: await transferOnce(deps, intent, options.idempotencyKey, signer) };
  }
  await requireWalletRecipient(deps, intent.to, "to");
  const wire = await deps.ledger.buildTransfer(intent);
  await requireRentForNewAccount(deps, intent);
  if (signer.kind === "connected") {
    await requireFundsToSign(deps, intent, wire);
    return { kind: "unsigned", intent, transaction: encodeBase64(wire) };
  }
  try {
    return { kind: "submitted", intent, result: await deps.ledger.submit(await signer.sign(wire), { ownTransfer: true }) };
  } catch (err) {
    // The ledger's words name token accounts and fee payers; the balances' say what is missing, in tokens.
    if (err instanceof AppError && err.code === "INSUFFICIENT_FUNDS") throw await fundsShortfall(deps, intent, wire, err);
    // A transaction built just now can only be a "duplicate" of another identical request that drew the
    // same compute-unit limit (about one pair in a million): it is a different transfer, so build again.
    if (!(err instanceof AppError) || err.code !== "CONFLICT") throw err;
    const again = await signer.sign(await deps.ledger.buildTransfer(intent));
    return { kind: "submitted", intent, result: await deps.ledger.submit(again, { ownTransfer: true }) };
  }
}

/** The ledger's INSUFFICIENT_FUNDS worded from the balances; only its own refusal replaces the ledger's (a balance read that fails leaves it as it was). */
async function fundsShortfall(deps: Deps, intent: TransferIntent, wire: Uint8Array, err: AppError): Promise<AppError> {
  try {
    await requireFundsToSign(deps, intent, wire);
  } catch (reworded) {
    if (reworded instanceof AppError && reworded.code === "INSUFFICIENT_FUNDS") return reworded;
  }
  return err;
}

/** What a key was used for: a retry must ask the same (the amount in base units, so "1.5" and 1.5 are one). */
const requestOf = ({ to, token, amount, memo }: TransferIntent): string => JSON.stringify({ to, token, amount: amount.toString(), memo: memo ?? null });

/** Calls at once with one key that each find another's transaction in their way; past this, CONFLICT. */
const KEY_ROUNDS = 3;

/**
 * wallet_transfer {idempotencyKey} of a custodial wallet (README, decisions.md): one transfer per key and
 * wallet, however often it is asked. The key's transaction is recorded before it is sent; a call with the key
 * then answers that transaction once it landed, sends it again (the same bytes: it can land once) while its
 * blockhash lives, and signs a new one only once the first can no longer land. A key that asked another
 * transfer is VALIDATION_ERROR; one whose transaction failed on chain answers that failure (its fee was
 * charged): a new transfer needs a new key. A refusal before anything was sent (funds) frees the key.
 */
async function transferOnce(deps: Deps, intent: TransferIntent, key: string, signer: Extract<Signer, { kind: "custodial" }>): Promise<SubmitResult> {
  const request = requestOf(intent);
  const signNew = async () => {
    await requireWalletRecipient(deps, intent.to, "to");
    await requireRentForNewAccount(deps, intent);
    const wire = await signer.sign(await deps.ledger.buildTransfer(intent));
    const tx = parseTransaction(wire);
    return { signature: tx.signature, blockhash: tx.recentBlockhash, wire, submittedAt: deps.clock.now() };
  };
  for (let round = 0; round < KEY_ROUNDS; round++) {
    const kept = await store.findTransferKey(deps.db, intent.from, key);
    if (kept === null) {
      const fresh = await signNew();
      if (!(await store.insertTransferKey(deps.db, { wallet: intent.from, key, request, ...fresh, createdAt: fresh.submittedAt }))) continue;
      return sendKept(deps, intent, key, fresh, true);
    }
    if (kept.request !== request) {
      throw fieldError("idempotencyKey", "this idempotencyKey was used for another transfer (recipient, token, amount or memo); give a new key for a new transfer");
    }
    // The blockhash first: a transaction that lands between the two looks is seen by the second.
    const live = await deps.ledger.blockhashValid(kept.blockhash);
    const landed = await deps.ledger.getTransaction(kept.signature);
    if (landed !== null) return landedResult(deps, landed);
    if (live) return sendKept(deps, intent, key, kept, false);
    // A node a few slots behind may not know a fresh blockhash yet: not judged dead so soon after sending.
    if (deps.clock.now() - kept.submittedAt < SENT_KEPT_MS) throw mayStillLandConflict(kept.signature);
    // It never landed and never will: this key's transfer is still to be made.
    const fresh = await signNew();
    if (!(await store.replaceTransferKeyTransaction(deps.db, intent.from, key, kept.signature, fresh))) continue;
    return sendKept(deps, intent, key, fresh, true);
  }
  throw new AppError("CONFLICT", "other calls with this idempotencyKey are sending its transfer at the same time; call again in a few seconds");
}

function mayStillLandConflict(signature: string): AppError {
  return new AppError("CONFLICT", `this idempotencyKey's transfer (${signature}) was sent and may still land; call again in a minute`, { details: { signature } });
}

/** A key's transaction that the ledger has: its transfer result, or its failure. */
function landedResult(deps: Deps, landed: LedgerTransaction): SubmitResult {
  if (landed.status === "failed") {
    throw new AppError("TRANSACTION_REJECTED", `this idempotencyKey's transfer failed: ${landed.error ?? "failed on chain"}; its fee was charged (give a new key for a new transfer)`, {
      details: { reason: "execution_failed", signature: landed.signature },
    });
  }
  return { signature: landed.signature, slot: landed.slot, fee: landed.fee, confirmedAt: landed.timestamp > 0 ? landed.timestamp : deps.clock.now() };
}

/** Sends a key's recorded transaction (`first`: signed just now, never sent before) and answers its result. */
async function sendKept(deps: Deps, intent: TransferIntent, key: string, kept: { signature: string; wire: Uint8Array }, first: boolean): Promise<SubmitResult> {
  try {
    return await deps.ledger.submit(kept.wire, { ownTransfer: true });
  } catch (err) {
    if (!(err instanceof AppError)) throw err;
    // The ledger has this very transaction: another call with the key sent it. Its outcome, once it has one.
    if (err.code === "CONFLICT") {
      const landed = await deps.ledger.getTransaction(kept.signature);
      if (landed !== null) return landedResult(deps, landed);
      throw mayStillLandConflict(kept.signature);
    }
    // Refused before it was ever sent (a refusal after sending names its signature): it can never land, and
    // the key is free again. A copy sent again is never judged so: the first may have landed on another node.
    const sentFirst = typeof (err.extra.details as { signature?: unknown } | undefined)?.signature === "string";
    if (first && !sentFirst && (err.code === "TRANSACTION_REJECTED" || err.code === "INSUFFICIENT_FUNDS")) {
      await store.dropTransferKey(deps.db, intent.from, key, kept.signature);
      if (err.code === "INSUFFICIENT_FUNDS") throw await fundsShortfall(deps, intent, kept.wire, err);
    }
    throw err;
  }
}

/**
 * SOL sent to an address without an account must make it rent exempt (0.00089088 SOL), else the
 * transaction fails: VALIDATION_ERROR on amount before anything is signed or handed out, as for an
 * airdrop below the rent. Asked of the ledger only for amounts below that minimum.
 */
async function requireRentForNewAccount(deps: Deps, intent: TransferIntent): Promise<void> {
  if (intent.amount >= RENT_EXEMPT_WALLET_LAMPORTS) return;
  const token = (await deps.ledger.tokens()).find((t) => t.key === intent.token);
  if (token?.kind === "native" && !(await deps.ledger.accountExists(intent.to))) throw recipientBelowRent(intent.to);
}

/**
 * A connected wallet signs and sends its transfer itself, and one it cannot pay for would fail on chain and
 * still cost its fee. So before it is handed out, as the service's own transfers are tried before they run:
 * the sender must hold the amount, and the fee payer the fee and the rent of any token account the
 * transaction creates, leaving SOL at 0 or at least the rent-exempt minimum; else INSUFFICIENT_FUNDS.
 * A custodial transfer the ledger refused for funds is worded by it too.
 */
async function requireFundsToSign(deps: Deps, intent: TransferIntent, wire: Uint8Array): Promise<void> {
  const tokens = await deps.ledger.tokens();
  const token = tokens.find((t) => t.key === intent.token)!;
  const sol = tokens.find((t) => t.kind === "native")!;
  const tx = parseTransaction(wire);
  const payer = intent.feePayer ?? intent.from;
  const newAccounts = BigInt(tx.instructions.filter((ix) => ix.program === "ata").length);
  const amount = intent.amount + (intent.split?.amount ?? 0n);
  const needs = new Map<string, Map<string, bigint>>();
  const need = (owner: string, key: string, value: bigint) => {
    const of = needs.get(owner) ?? new Map<string, bigint>();
    of.set(key, (of.get(key) ?? 0n) + value);
    needs.set(owner, of);
  };
  need(intent.from, token.key, amount);
  need(payer, sol.key, transactionFee(tx) + newAccounts * RENT_EXEMPT_TOKEN_ACCOUNT_LAMPORTS);
  for (const [owner, of] of needs) {
    const balances = await deps.ledger.getBalances(owner);
    for (const [key, needed] of of) {
      const held = balances[key] ?? 0n;
      const decimals = key === token.key ? token.decimals : sol.decimals;
      const say = (v: bigint) => `${formatAmount(v, decimals)} ${key.toUpperCase()}`;
      if (held < needed) {
        throw new AppError("INSUFFICIENT_FUNDS", `${owner} holds ${say(held)}; this transfer needs ${say(needed)}${key === sol.key ? " with its fee" : ""}`);
      }
      const left = held - needed;
      if (key === sol.key && left > 0n && left < RENT_EXEMPT_WALLET_LAMPORTS) {
        throw new AppError("INSUFFICIENT_FUNDS", `${owner} would keep ${say(left)}, less than the rent-exempt minimum of 0.00089088 SOL; send all of it or less`);
      }
    }
  }
}
