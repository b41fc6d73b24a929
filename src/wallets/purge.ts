// The purge's wallet part: wallet_transfer's idempotency keys are kept a day (TRANSFER_KEY_KEPT_MS), then
// deleted; a call with an older key is a new transfer.
import type { Deps } from "../deps.ts";
import { DAY_MS } from "../lib/clock.ts";
import * as store from "./store.ts";

/** How long a transfer's idempotency key is remembered (README: 24 hours). */
export const TRANSFER_KEY_KEPT_MS = DAY_MS;

export async function purgeTransferKeys(deps: Deps, stopping?: AbortSignal): Promise<{ transferKeys: number }> {
  return { transferKeys: await store.purgeTransferKeys(deps.db, deps.clock.now() - TRANSFER_KEY_KEPT_MS, stopping) };
}
