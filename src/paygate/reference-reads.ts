// What the service has already read of checkouts' references (checkout.ts): the refusal of each transaction
// read, so that a stranger's transaction carrying a checkout's reference (public once the reference is on
// chain) is read once, not at every look for the payment.
import type { AppError } from "../errors.ts";

/** Checkouts whose refusals are kept; past it the oldest are forgotten (and read again if looked at). */
const CHECKOUTS_KEPT = 1_000;

export type ReferenceReads = {
  /** Why a transaction already read was refused for this checkout; undefined when it was not read yet. */
  refusal(checkoutId: string, signature: string): AppError | undefined;
  /** Records a refusal that reading the transaction again would repeat (not an undecided one). */
  refuse(checkoutId: string, signature: string, error: AppError): void;
  /** Forgets a completed checkout (an expired one is still answered from what was read). */
  forget(checkoutId: string): void;
};

export function createReferenceReads(kept = CHECKOUTS_KEPT): ReferenceReads {
  const byCheckout = new Map<string, Map<string, AppError>>();
  return {
    refusal: (checkoutId, signature) => byCheckout.get(checkoutId)?.get(signature),
    refuse(checkoutId, signature, error) {
      let refusals = byCheckout.get(checkoutId);
      if (refusals === undefined) {
        if (byCheckout.size >= kept) byCheckout.delete(byCheckout.keys().next().value!);
        refusals = new Map();
        byCheckout.set(checkoutId, refusals);
      }
      refusals.set(signature, error);
    },
    forget: (checkoutId) => void byCheckout.delete(checkoutId),
  };
}
