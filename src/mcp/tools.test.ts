// The whole tool registry: which tools need a wallet (mcp.md), walked tool by tool so that a tool added or
// changed with the wrong needsWallet cannot pass unnoticed.
import { expect, test } from "bun:test";
import { testDeps } from "../../test/helpers/deps.ts";
import { createToolRegistry } from "./tools.ts";

/** mcp.md: every tool needs a wallet except these. */
const OPEN_TOOLS = ["wallet_create", "session_auth", "wallet_connect", "session_restore", "session_info"];

test("every tool but the five that make or describe a session answers UNAUTHENTICATED without a wallet", async () => {
  const { deps } = await testDeps();
  const registry = createToolRegistry(deps);
  const names = registry.tools.map((t) => t.name);
  for (const name of OPEN_TOOLS) expect(names).toContain(name);
  expect(names.length).toBeGreaterThan(OPEN_TOOLS.length + 10);
  const ctx = { deps, caller: { kind: "anonymous" as const, tokenError: null }, session: { id: null, bind: async () => undefined, unbind: async () => undefined }, client: { ip: "192.0.2.30", userAgent: "t" } };
  let called = 0;
  for (const tool of registry.tools) {
    if (OPEN_TOOLS.includes(tool.name)) {
      expect({ name: tool.name, needsWallet: tool.needsWallet }).toEqual({ name: tool.name, needsWallet: false });
    } else if (tool.needsWallet) {
      // The missing wallet is what is answered, before the parameters are looked at (none are sent here).
      expect({ name: tool.name, answer: await registry.call(ctx, tool.name, {}) }).toMatchObject({ name: tool.name, answer: { success: false, code: "UNAUTHENTICATED" } });
      called++;
    } else {
      // wallet_disconnect checks for the wallet itself, as it also signs out of a binding whose token died.
      expect({ name: tool.name, answer: await registry.call(ctx, tool.name, {}) }).toMatchObject({ name: "wallet_disconnect", answer: { success: false, code: "UNAUTHENTICATED" } });
    }
  }
  expect(called).toBeGreaterThan(20);
  // A token that failed is reported instead (its own code), by every tool that needs a wallet.
  const { AppError } = await import("../errors.ts");
  const expired = { ...ctx, caller: { kind: "anonymous" as const, tokenError: new AppError("TOKEN_EXPIRED", "expired") } };
  expect(await registry.call(expired, "wallet_get_balance", {})).toMatchObject({ success: false, code: "TOKEN_EXPIRED" });
  expect(await registry.call(expired, "wallet_get_balance", { extra: 1 })).toMatchObject({ success: false, code: "TOKEN_EXPIRED" });
  expect(await registry.call(expired, "wallet_transfer", {})).toMatchObject({ success: false, code: "TOKEN_EXPIRED" });
});

test("a refusal of what the caller sent stays small: at most 10 fields named, names and messages cut, the tool name too", async () => {
  const { deps } = await testDeps();
  const registry = createToolRegistry(deps);
  const ctx = { deps, caller: { kind: "anonymous" as const, tokenError: null }, session: { id: null, bind: async () => undefined, unbind: async () => undefined }, client: { ip: "192.0.2.31", userAgent: "t" } };
  const params = Object.fromEntries(Array.from({ length: 5000 }, (_, i) => [`extra_${"k".repeat(200)}_${i}`, 1]));
  const unknownParams = await registry.call(ctx, "session_info", params);
  expect(unknownParams).toMatchObject({ success: false, code: "VALIDATION_ERROR" });
  expect(JSON.stringify(unknownParams).length).toBeLessThan(2_000);
  // Many wrong values: ten named, the rest counted (from a caller with a wallet, whose parameters are then judged).
  const services = Array.from({ length: 20 }, () => ({ title: 5, price: "1", deliveryTime: 1 }));
  const caller = { kind: "wallet" as const, walletAddress: "11111111111111111111111111111111", sessionId: "s", jti: "j", token: null, issuedAtS: 0, expiresAtS: 0, source: "binding" as const };
  const wrong = (await registry.call({ ...ctx, caller }, "provider_register", { endpoint: "https://agent.example/", profile: { name: "A", basePrice: "1" }, services })) as {
    error: string;
    details: { fields: unknown[] };
  };
  expect(wrong.details.fields).toHaveLength(10);
  expect(wrong.error).toEndWith("; and 10 more");
  const unknownTool = await registry.call(ctx, "t".repeat(10_000), {});
  expect(unknownTool).toMatchObject({ success: false, code: "NOT_FOUND" });
  expect(JSON.stringify(unknownTool).length).toBeLessThan(300);
});
