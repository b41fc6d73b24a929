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
  const registry = createRegistry([...AUTH_TOOLS, ...WALLET_TOOLS, ...PAYGATE_TOOLS, ...MARKETPLACE_TOOLS, ...ORDER_TOOLS], (tool, err, requestId) =>
    deps.log.error("tool failed", { requestId, tool, error: errorText(err), ...(deps.db.noteFailure(err) ? { database: "damaged: writes stopped" } : {}) }),
  );
  // The tools are defined once for every server; this server's service token is named where they mention
  // it, so a model reading tools/list learns the symbol without guessing (SERVICE_TOKEN_SYMBOL).
  const named = `the service token's symbol ("${deps.config.serviceToken.symbol}")`;
  for (const tool of registry.listing) {
    for (const property of Object.values((tool.inputSchema.properties ?? {}) as Record<string, { description?: string }>)) {
      if (typeof property.description === "string") property.description = property.description.replaceAll("the service token's symbol", named);
    }
  }
  return registry;
}
