// Whether a transaction the service sent and no one can read yet may still land: what a retry must know
// before it sends anything anew (checkout_pay's kept submissions, wallet_transfer's idempotency keys,
// escrow moves in flight).
import type { Deps } from "../deps.ts";

/** How long a sent transaction that is not seen is kept at least, whatever a node says of its blockhash. */
export const SENT_KEPT_MS = 2 * 60_000;

/** A transaction as the service recorded it before sending it. */
export type SentTransaction = Readonly<{ signature: string; blockhash: string; submittedAt: number }>;

/**
 * Sent lately, or its blockhash still valid: it may still land. Never judged otherwise within SENT_KEPT_MS of
 * its sending: a node a few slots behind may not know a fresh blockhash yet.
 */
export async function mayStillLand(deps: Pick<Deps, "clock" | "ledger">, blockhash: string, submittedAt: number): Promise<boolean> {
  return deps.clock.now() - submittedAt < SENT_KEPT_MS || (await deps.ledger.blockhashValid(blockhash));
}

/**
 * Whether a sent transaction that has not been seen to pay (yet) may still: it may still land, or the ledger
 * has it (a node behind). The blockhash first: a transaction confirmed between the two looks is then seen by
 * the second.
 */
export async function sentMayLand(deps: Pick<Deps, "clock" | "ledger">, { signature, blockhash, submittedAt }: SentTransaction): Promise<boolean> {
  return (await mayStillLand(deps, blockhash, submittedAt)) || (await deps.ledger.getTransaction(signature)) !== null;
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
