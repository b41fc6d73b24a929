// checkout_pay through the tool registry: an agent's custodial wallet buys a product end to end.
import { expect, test } from "bun:test";
import { Keypair } from "@solana/web3.js";
import { testDeps } from "../../test/helpers/deps.ts";
import { createToolRegistry } from "../mcp/tools.ts";
import type { Caller } from "../mcp/registry.ts";
import { createCustodialWallet } from "../wallets/custody.ts";
import { createProduct } from "./products.ts";
import { checkAccess } from "./purchases.ts";
import { verifyFeatureToken } from "./tokens.ts";

test("checkout_pay: a custodial buyer pays, gets the purchase and its token; others are refused clearly", async () => {
  const { deps } = await testDeps();
  const registry = createToolRegistry(deps);
  const owner = Keypair.generate().publicKey.toBase58();
  const product = await createProduct(deps, owner, { title: "Pro", description: "", type: "feature_unlock", price: "2.5", featureIds: ["pro"] });
  const buyer = (await createCustodialWallet(deps)).address;
  await deps.ledger.airdrop(buyer, { sol: 1_000_000_000n, usdc: 10_000_000n });
  const as = (walletAddress: string): Caller => ({
    kind: "wallet",
    walletAddress,
    sessionId: "s",
    jti: "j",
    token: null,
    issuedAtS: 0,
    expiresAtS: 2_000_000_000,
    source: "binding",
  });
  const ctx = (caller: Caller) => ({ deps, caller, session: { id: null, bind: async () => undefined, unbind: async () => undefined }, client: { ip: "192.0.2.9", userAgent: "t" } });

  const paid = await registry.call(ctx(as(buyer)), "checkout_pay", { productId: product.productId });
  if (!paid.success) throw new Error(JSON.stringify(paid));
  expect(paid.data).toMatchObject({ status: "completed", amount: "2.5", currency: "USDC", payTo: owner });
  expect(await checkAccess(deps, owner, product.productId, buyer)).toMatchObject({ hasAccess: true, txHash: paid.data.txHash });
  expect(await verifyFeatureToken(deps, owner, paid.data.accessToken as string)).toMatchObject({ valid: true, features: ["pro"], walletAddress: buyer });
  expect((await deps.ledger.getBalances(buyer)).usdc).toBe(7_500_000n);

  const connected = Keypair.generate().publicKey.toBase58();
  expect(await registry.call(ctx(as(connected)), "checkout_pay", { productId: product.productId })).toMatchObject({ success: false, code: "NOT_SUPPORTED" });
  expect(await registry.call(ctx(as(buyer)), "checkout_pay", { productId: "prod_nothing" })).toMatchObject({ success: false, code: "NOT_FOUND" });
  expect(await registry.call(ctx({ kind: "anonymous", tokenError: null }), "checkout_pay", { productId: product.productId })).toMatchObject({
    success: false,
    code: "UNAUTHENTICATED",
  });
});
