// A wallet's transfer: a custodial wallet's is signed here and submitted as the service's own transfer
// (a shortfall is INSUFFICIENT_FUNDS and costs nothing); a connected wallet gets it back unsigned, once its
// balances cover it. SOL too little for a new recipient account is VALIDATION_ERROR on amount for both.
// A custodial transfer under an idempotency key is made once, whatever the retries (transferOnce).
import type { Deps } from "../deps.ts";
import { AppError, fieldError } from "../errors.ts";
import { encodeBase58, encodeBase64 } from "../lib/encoding.ts";
import { landingHeightLimit } from "../ledger/landing.ts";
import {
  RENT_EXEMPT_WALLET_LAMPORTS,
  recipientBelowRent,
  type LedgerTransaction,
  type SubmitResult,
  type TransferIntent,
} from "../ledger/ledger.ts";
import { requireWalletRecipient } from "../ledger/recipients.ts";
import { parseTransaction } from "../ledger/transactions.ts";
import { fundsShortfall, requireFundsToSign } from "./funds.ts";
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

/** What a key was used for: a retry must ask the same (the amount in base units, so "1.5" and 1.5 are one). */
const requestOf = ({ to, token, amount, memo }: TransferIntent): string => JSON.stringify({ to, token, amount: amount.toString(), memo: memo ?? null });

/** Calls at once with one key that each find another's transaction in their way; past this, CONFLICT. */
const KEY_ROUNDS = 3;

/**
 * wallet_transfer {idempotencyKey} of a custodial wallet (README, decisions.md): one transfer per key and
 * wallet, however often it is asked. The key's transaction is recorded before it is sent, and carries a
 * reference of the key's own (no other transfer is ever the same bytes). A call with the key then answers
 * that transaction once it landed, sends it again (the same bytes: they land once) while its blockhash lives,
 * and signs a new one only once the chain's height is past the first's landing limit and the ledger's whole
 * history does not know it.
 * A key that asked another transfer is VALIDATION_ERROR; one whose transaction failed on chain answers that
 * failure (its fee was charged): a new transfer needs a new key.
 */
async function transferOnce(deps: Deps, intent: TransferIntent, key: string, signer: Extract<Signer, { kind: "custodial" }>): Promise<SubmitResult> {
  const request = requestOf(intent);
  const signNew = async (reference: string) => {
    await requireWalletRecipient(deps, intent.to, "to");
    await requireRentForNewAccount(deps, intent);
    const wire = await signer.sign(await deps.ledger.buildTransfer({ ...intent, reference }));
    const tx = parseTransaction(wire);
    return { signature: tx.signature, blockhash: tx.recentBlockhash, wire, validHeight: await landingHeightLimit(deps) };
  };
  for (let round = 0; round < KEY_ROUNDS; round++) {
    const kept = await store.findTransferKey(deps.db, intent.from, key);
    if (kept === null) {
      const reference = encodeBase58(deps.random(32));
      const fresh = await signNew(reference);
      if (!(await store.insertTransferKey(deps.db, { wallet: intent.from, key, request, reference, ...fresh, createdAt: deps.clock.now() }))) continue;
      return sendKept(deps, intent, fresh);
    }
    if (kept.request !== request) {
      throw fieldError("idempotencyKey", "this idempotencyKey was used for another transfer (recipient, token, amount or memo); give a new key for a new transfer");
    }
    // The height and the blockhash first: a transaction that lands between those looks and the next is seen by it.
    const height = await deps.ledger.blockHeight();
    const live = await deps.ledger.blockhashValid(kept.blockhash);
    const landed = await deps.ledger.getTransaction(kept.signature);
    if (landed !== null) return landedResult(deps, landed);
    // Sent again as it is: a refused first send (funds short then) lands now if it can, and bytes another call
    // is sending land once.
    if (live) return sendKept(deps, intent, kept);
    // Not judged dead before the chain is past its landing limit (a node behind, whose height is behind too,
    // or a copy another process is sending now: the margin covers both; no wall clock takes part).
    if (height <= kept.validHeight) throw mayStillLandConflict(kept.signature);
    // One "not found" is not proof (a node that pruned it, or one behind another): the whole history is asked.
    const status = await deps.ledger.transactionStatus(kept.signature);
    if (status === "failed") throw failedOnChain(kept.signature, "failed on chain");
    if (status === "processed") throw mayStillLandConflict(kept.signature);
    if (status === "confirmed") {
      throw new AppError("CONFLICT", `this idempotencyKey's transfer (${kept.signature}) was made, but the node cannot show it now; call again later`, {
        details: { signature: kept.signature },
      });
    }
    // It never landed and never will: this key's transfer is still to be made.
    const fresh = await signNew(kept.reference);
    if (!(await store.replaceTransferKeyTransaction(deps.db, intent.from, key, kept.signature, fresh))) continue;
    return sendKept(deps, intent, fresh);
  }
  throw new AppError("CONFLICT", "other calls with this idempotencyKey are sending its transfer at the same time; call again in a few seconds");
}

function mayStillLandConflict(signature: string): AppError {
  return new AppError("CONFLICT", `this idempotencyKey's transfer (${signature}) was sent and may still land; call again in a minute`, { details: { signature } });
}

function failedOnChain(signature: string, why: string): AppError {
  return new AppError("TRANSACTION_REJECTED", `this idempotencyKey's transfer failed: ${why}; its fee was charged (give a new key for a new transfer)`, {
    details: { reason: "execution_failed", signature },
  });
}

/** A key's transaction that the ledger has: its transfer result, or its failure. */
function landedResult(deps: Deps, landed: LedgerTransaction): SubmitResult {
  if (landed.status === "failed") throw failedOnChain(landed.signature, landed.error ?? "failed on chain");
  return { signature: landed.signature, slot: landed.slot, fee: landed.fee, confirmedAt: landed.timestamp > 0 ? landed.timestamp : deps.clock.now() };
}

/**
 * Sends a key's recorded transaction and answers its result. A refusal leaves the key as it is: another call
 * may be sending the same bytes (after funds came, say), and only the rule above says when it can no longer land.
 */
async function sendKept(deps: Deps, intent: TransferIntent, kept: { signature: string; wire: Uint8Array }): Promise<SubmitResult> {
  try {
    return await deps.ledger.submit(kept.wire, { ownTransfer: true });
  } catch (err) {
    if (!(err instanceof AppError)) throw err;
    // The ledger has this very transaction: another call with the key sent it (its reference is the key's
    // own, so no other transfer is these bytes). Its outcome, once it has one.
    if (err.code === "CONFLICT") {
      const landed = await deps.ledger.getTransaction(kept.signature);
      if (landed !== null) return landedResult(deps, landed);
      throw mayStillLandConflict(kept.signature);
    }
    const sentFirst = typeof (err.extra.details as { signature?: unknown } | undefined)?.signature === "string";
    if (err.code === "INSUFFICIENT_FUNDS" && !sentFirst) throw await fundsShortfall(deps, intent, kept.wire, err);
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

