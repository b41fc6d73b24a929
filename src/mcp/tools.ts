// Every tool the service offers, in the order tools/list shows them: one registry for all adapters.
import { AUTH_TOOLS } from "../auth/tools.ts";
import type { Deps } from "../deps.ts";
import { errorText } from "../errors.ts";
import { WALLET_TOOLS } from "../wallets/tools.ts";
import { PAYGATE_TOOLS } from "../paygate/tools.ts";
import { MARKETPLACE_TOOLS } from "../marketplace/tools.ts";
import { ORDER_TOOLS } from "../marketplace/orders/tools.ts";
import { createRegistry, type Registry } from "./registry.ts";

export function createToolRegistry(deps: Deps): Registry {
  return createRegistry([...AUTH_TOOLS, ...WALLET_TOOLS, ...PAYGATE_TOOLS, ...MARKETPLACE_TOOLS, ...ORDER_TOOLS], (tool, err, requestId) =>
    deps.log.error("tool failed", { requestId, tool, error: errorText(err), ...(deps.db.noteFailure(err) ? { database: "damaged: writes stopped" } : {}) }),
  );
}
