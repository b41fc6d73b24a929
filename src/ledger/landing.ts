// Whether a transaction the service sent and no one can read yet may still land: what a retry must know
// before it sends anything anew (checkout_pay's kept submissions, wallet_transfer's idempotency keys,
// escrow moves in flight).
import type { Deps } from "../deps.ts";

/** How long a sent transaction that is not seen is kept at least, whatever a node says of its blockhash. */
export const SENT_KEPT_MS = 2 * 60_000;

/**
 * A transaction as the service recorded it before sending it; `validHeight`: the block height past which it can
 * no longer land (landingHeightLimit), null where it was not recorded (rows kept before it was).
 */
export type SentTransaction = Readonly<{ signature: string; blockhash: string; submittedAt: number; validHeight: number | null }>;

/**
 * Whether it may still land: sent lately, or its blockhash still valid, or the chain not yet past its landing
 * limit (a node behind says a fresh blockhash is unknown, and its height is behind too). The wall clock only
 * ever adds time (a clock stepped forward or back is judged by the height); without a recorded limit, it is
 * judged by the clock alone, as before.
 */
export async function mayStillLand(deps: Pick<Deps, "clock" | "ledger">, { blockhash, submittedAt, validHeight }: Omit<SentTransaction, "signature">): Promise<boolean> {
  const elapsed = deps.clock.now() - submittedAt;
  if (validHeight === null) return elapsed < SENT_KEPT_MS || (await deps.ledger.blockhashValid(blockhash));
  if (elapsed >= 0 && elapsed < SENT_KEPT_MS) return true;
  return (await deps.ledger.blockhashValid(blockhash)) || (await deps.ledger.blockHeight()) <= validHeight;
}

/**
 * Whether a sent transaction that has not been seen to pay (yet) may still: it may still land, or the ledger
 * has it (a node behind). The blockhash first: a transaction confirmed between the two looks is then seen by
 * the second.
 */
export async function sentMayLand(deps: Pick<Deps, "clock" | "ledger">, sent: SentTransaction): Promise<boolean> {
  return (await mayStillLand(deps, sent)) || (await deps.ledger.getTransaction(sent.signature)) !== null;
}

/** Blocks added to a sent transaction's last valid height before it is given up: a node behind another. */
export const VALID_HEIGHT_MARGIN = 150;

/**
 * A block height past which a transaction built now (on a blockhash no newer than the latest) can no longer
 * land: the latest blockhash's last valid height plus VALID_HEIGHT_MARGIN. Asked after the transaction was
 * built. A node behind has a lower height too, so it never judges such a transaction dead early, and no
 * wall clock (which may be stepped) takes part.
 */
export async function landingHeightLimit(deps: Pick<Deps, "ledger">): Promise<number> {
  return (await deps.ledger.latestBlockhash()).lastValidBlockHeight + VALID_HEIGHT_MARGIN;
}
