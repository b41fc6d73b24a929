// How far the service has read each open checkout's reference (checkout.ts): anyone may put a reference
// seen on chain into transactions of their own, so a look for the payment reads the reference's
// transactions oldest first, a bounded number at a time, and the next look goes on from here instead of
// reading the same ones again. Constant size per checkout; the least recently looked at are forgotten
// first (and read again if looked at).
import type { AppError } from "../errors.ts";

/** Checkouts whose progress is kept (~200 bytes each). */
const CHECKOUTS_KEPT = 20_000;

export type ReferenceProgress = {
  /** The newest of the oldest transactions read, every one of them (this one included) refused for good. */
  through: string;
  /** The newest of those refusals (what a confirm reports when nothing else is found). */
  refusal: AppError;
};

export type ReferenceReads = {
  progress(checkoutId: string): ReferenceProgress | null;
  record(checkoutId: string, progress: ReferenceProgress): void;
  /** Forgets a completed checkout (an expired one is still answered from its progress). */
  forget(checkoutId: string): void;
  /** True the first time a checkout's reference is found too crowded to search (it is logged once). */
  firstCrowded(checkoutId: string): boolean;
};

export function createReferenceReads(kept = CHECKOUTS_KEPT): ReferenceReads {
  const byCheckout = new Map<string, ReferenceProgress>();
  const crowded = new Set<string>();
  return {
    firstCrowded(checkoutId) {
      if (crowded.has(checkoutId)) return false;
      if (crowded.size >= kept) crowded.clear();
      crowded.add(checkoutId);
      return true;
    },
    progress(checkoutId) {
      const progress = byCheckout.get(checkoutId);
      if (progress === undefined) return null;
      byCheckout.delete(checkoutId); // the most recently looked at goes last, and is forgotten last
      byCheckout.set(checkoutId, progress);
      return progress;
    },
    record(checkoutId, progress) {
      byCheckout.delete(checkoutId);
      if (byCheckout.size >= kept) byCheckout.delete(byCheckout.keys().next().value!);
      byCheckout.set(checkoutId, progress);
    },
    forget: (checkoutId) => void byCheckout.delete(checkoutId),
  };
}
