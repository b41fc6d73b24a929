// wallet_create under the sign-in rate limits, in-process through the registry: a refused call stores nothing.
import { expect, test } from "bun:test";
import { testDeps } from "../../test/helpers/deps.ts";
import { createToolRegistry } from "../mcp/tools.ts";

test("wallet_create refused by the verification limit leaves no wallet behind", async () => {
  const { deps } = await testDeps({ AUTH_RATE_LIMIT: "on" });
  const registry = createToolRegistry(deps);
  const ctx = {
    deps,
    caller: { kind: "anonymous" as const, tokenError: null },
    session: { id: null, bind: async () => undefined, unbind: async () => undefined },
    client: { ip: "203.0.113.9", userAgent: "limits" },
  };
  const codes: string[] = [];
  for (let i = 0; i < 52; i++) {
    const envelope = await registry.call(ctx, "wallet_create", { airdropSol: 0 });
    codes.push(envelope.success ? "OK" : envelope.code);
  }
  // 50 verifications per network per 15 minutes (auth.md): the rest are refused before anything is stored.
  expect(codes.filter((c) => c === "OK")).toHaveLength(50);
  expect(codes.slice(50)).toEqual(["RATE_LIMITED", "RATE_LIMITED"]);
  expect(deps.db.sqlite.query("SELECT COUNT(*) AS n FROM custodial_wallets").get()).toEqual({ n: 50 });
});
