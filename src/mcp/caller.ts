// Who a tool call runs as: the Bearer token's wallet, else the wallet bound to the MCP session.
import { authenticateToken, authenticateTokenId } from "../auth/sessions.ts";
import { walletNamedBy } from "../auth/tokens.ts";
import type { Deps } from "../deps.ts";
import { AppError } from "../errors.ts";
import { explainDeadCustodialToken } from "../wallets/custody.ts";
import type { Binding, Caller } from "./registry.ts";

/**
 * A token in the header wins over a binding, and a bad one is not replaced by the binding: the call
 * then has no wallet and tools that need one answer with the token's own code (mcp.md).
 */
export async function resolveCaller(deps: Deps, bearer: string | null, binding: Binding | null): Promise<Caller> {
  if (bearer !== null) {
    try {
      const s = await authenticateToken(deps, bearer);
      return { kind: "wallet", walletAddress: s.walletAddress, sessionId: s.sessionId, jti: s.jti, token: bearer, issuedAtS: s.issuedAtS, expiresAtS: s.expiresAtS, source: "token" };
    } catch (err) {
      if (err instanceof AppError) return { kind: "anonymous", tokenError: await explainDeadCustodialToken(deps, err, () => walletNamedBy(bearer)) };
      throw err;
    }
  }
  if (binding !== null) {
    try {
      const s = await authenticateTokenId(deps, binding.walletAddress, binding.jti, binding.tokenExpiresAtS);
      return { kind: "wallet", walletAddress: s.walletAddress, sessionId: s.sessionId, jti: s.jti, token: null, issuedAtS: s.issuedAtS, expiresAtS: s.expiresAtS, source: binding.source };
    } catch (err) {
      if (err instanceof AppError) return { kind: "anonymous", tokenError: await explainDeadCustodialToken(deps, err, () => binding.walletAddress), deadBinding: binding };
      throw err;
    }
  }
  return { kind: "anonymous", tokenError: null };
}
