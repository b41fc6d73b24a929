// Whether the checkout watcher has anything to look at, asked without loading checkout.ts (and web3.js with
// it): a server that sells nothing, or has no checkout open, never loads them for the watcher.
import type { Deps } from "../deps.ts";
import * as store from "./store.ts";

export function checkoutsToWatch(deps: Deps): Promise<boolean> {
  return store.anyOpenCheckout(deps.db);
}
