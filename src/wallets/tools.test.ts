// Wallet tools in-process through the registry: wallet_create under the sign-in rate limits (a refused
// call stores nothing), and how wallet_transfer answers a recipient that would be left below the rent.
import { expect, test } from "bun:test";
import { Keypair } from "@solana/web3.js";
import { testDeps } from "../../test/helpers/deps.ts";
import type { Deps } from "../deps.ts";
import { formatAmount } from "../lib/amounts.ts";
import { createToolRegistry } from "../mcp/tools.ts";
import { createCustodialWallet } from "./custody.ts";

const SOL = 1_000_000_000n;

/** A call context running as `walletAddress` (as a verified session token would make it). */
function walletContext(deps: Deps, walletAddress: string) {
  return {
    deps,
    caller: { kind: "wallet" as const, walletAddress, sessionId: "session", jti: "jti", token: null, issuedAtS: 0, expiresAtS: 2 ** 31, source: "token" as const },
    session: { id: null, bind: async () => undefined, unbind: async () => undefined },
    client: { ip: "203.0.113.10", userAgent: "tools" },
  };
}

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

test("wallet_transfer: SOL too little for a new recipient account is VALIDATION_ERROR on amount; the sender's own shortfall stays INSUFFICIENT_FUNDS", async () => {
  const { deps } = await testDeps();
  const registry = createToolRegistry(deps);
  const { address } = await createCustodialWallet(deps);
  await deps.ledger.airdrop(address, { sol: 2n * SOL });
  const ctx = walletContext(deps, address);
  const fresh = Keypair.generate().publicKey.toBase58();

  const tooLittle = await registry.call(ctx, "wallet_transfer", { to: fresh, amount: "0.0001", token: "sol" });
  expect(tooLittle).toMatchObject({ success: false, code: "VALIDATION_ERROR", details: { fields: [{ field: "amount" }] } });
  if (tooLittle.success) throw new Error("refused");
  expect(tooLittle.error).toContain("0.00089088 SOL");
  expect((await deps.ledger.getBalances(address)).sol).toBe(2n * SOL); // nothing sent or charged

  // To an account that exists, any amount is fine; the rent minimum is enough for a new one.
  expect(await registry.call(ctx, "wallet_transfer", { to: fresh, amount: "0.00089088", token: "sol" })).toMatchObject({ success: true });
  expect(await registry.call(ctx, "wallet_transfer", { to: fresh, amount: "0.0001", token: "sol" })).toMatchObject({ success: true });

  // Leaving the sender itself below the rent is its shortfall.
  const balance = (await deps.ledger.getBalances(address)).sol!;
  const drain = ((balance - 10_000n) / 1000n) * 1000n;
  const drained = await registry.call(ctx, "wallet_transfer", { to: fresh, amount: formatAmount(drain, 9), token: "sol" });
  expect(drained).toMatchObject({ success: false, code: "INSUFFICIENT_FUNDS" });
});
