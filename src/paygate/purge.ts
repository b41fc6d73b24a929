// The purge's checkout part: anyone may open checkouts (paygate.md), so those that expired unpaid are
// deleted a week after their expiry instead of being kept for ever. Open ones stay until the watcher
// has looked at them and found nothing (a payment may still be found by its reference); completed ones
// stay with their purchase.
import type { Deps } from "../deps.ts";
import { DAY_MS } from "../lib/clock.ts";
import * as store from "./store.ts";

/** How long a checkout that expired unpaid is kept: a buyer coming back to it hears "expired", not "not found". */
export const EXPIRED_CHECKOUT_KEPT_MS = 7 * DAY_MS;

export async function purgeCheckouts(deps: Deps, stopping?: AbortSignal): Promise<{ checkouts: number }> {
  // Leases on payments a killed process never gave back (a few rows at most): gone a day after they ran out.
  await store.dropLapsedSubmitLeases(deps.db, deps.clock.now() - DAY_MS);
  return { checkouts: await store.purgeExpiredCheckouts(deps.db, deps.clock.now() - EXPIRED_CHECKOUT_KEPT_MS, stopping) };
}
