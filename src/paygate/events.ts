// The webhook events of purchases and feature tokens (paygate.md "Webhooks"): payment.completed,
// feature.unlocked and feature.revoked, handed over inside the database write that caused them.
import type { Deps } from "../deps.ts";
import { enqueueEventInWrite } from "../webhooks/outbox.ts";

/** What a completed purchase tells the owner's endpoints; amounts and times already formatted. */
export type PaymentFacts = {
  /** The owner's wallet: whose endpoints hear of it. */
  owner: string;
  productId: string;
  productTitle: string;
  walletAddress: string;
  txHash: string;
  /** Decimal string in whole tokens, e.g. "9.99". */
  amount: string;
  /** "USDC" or the service token's symbol upper-cased. */
  currency: string;
  /** ISO 8601 time of the purchase. */
  timestamp: string;
  /** Solana cluster name. */
  network: string;
  /** feature_unlock only: the issued `ft_` token and the features it unlocks. */
  feature: { accessToken: string; featureIds: string[] } | null;
  /**
   * ISO 8601 end of the access this purchase gives (a pass, or a feature unlock with a duration), passes
   * bought one after another added up as the write computed it; null when it does not end.
   */
  expiresAt: string | null;
};

/** What a revocation tells the owner's endpoints. */
export type RevocationFacts = {
  owner: string;
  productId: string;
  productTitle: string;
  accessToken: string;
  featureIds: string[];
  walletAddress: string;
  txHash: string;
  timestamp: string;
  network: string;
};

/**
 * Called SYNCHRONOUSLY inside the `db.write` that records the purchase, and only when this write created
 * it: `payment.completed` and, for a feature unlock, `feature.unlocked` commit or roll back with it.
 */
export function recordPaymentEvents(deps: Deps, facts: PaymentFacts): void {
  const common = { productId: facts.productId, productTitle: facts.productTitle, walletAddress: facts.walletAddress, txHash: facts.txHash };
  // Sent only when access ends, as /public/access/check answers it: a receiver granting access need not
  // add up passes bought one after another itself.
  const until = facts.expiresAt === null ? {} : { expiresAt: facts.expiresAt };
  enqueueEventInWrite(deps, {
    targetKind: "owner",
    targetId: facts.owner,
    type: "payment.completed",
    payload: { ...common, amount: facts.amount, currency: facts.currency, ...until, timestamp: facts.timestamp, network: facts.network },
  });
  if (facts.feature !== null) {
    enqueueEventInWrite(deps, {
      targetKind: "owner",
      targetId: facts.owner,
      type: "feature.unlocked",
      payload: { ...common, accessToken: facts.feature.accessToken, featureIds: facts.feature.featureIds, ...until, timestamp: facts.timestamp, network: facts.network },
    });
  }
}

/** Called SYNCHRONOUSLY inside the write of the revocation that took effect (never a repeated one). */
export function recordRevocationEvent(deps: Deps, facts: RevocationFacts): void {
  const { owner, ...payload } = facts;
  enqueueEventInWrite(deps, { targetKind: "owner", targetId: owner, type: "feature.revoked", payload });
}
