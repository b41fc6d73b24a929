// Whether the order timers have anything to do, asked without loading orders.ts (and web3.js with it): most
// rounds of most servers find nothing due and nothing in flight.
import type { Deps } from "../../deps.ts";
import * as store from "./store.ts";

export function orderTimersHaveWork(deps: Deps): Promise<boolean> {
  return store.hasTimerWork(deps.db, deps.clock.now());
}
