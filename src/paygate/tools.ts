// Tool edge of payment gating: checkout_pay, with which an agent's custodial session wallet buys a product
// through the same checkout, submit and confirm steps as the checkout page (paygate.md "Checkout").
import { z } from "zod";
import { AppError } from "../errors.ts";
import { defineTool, requireWallet, type Tool } from "../mcp/registry.ts";
import { signerFor } from "../wallets/signer.ts";
import { decodeBase64Strict, encodeBase64 } from "../lib/encoding.ts";
import { importQuietly } from "../lib/quiet-import.ts";

export const checkoutPay = defineTool({
  name: "checkout_pay",
  description:
    "Buy a product sold through this service (its productId is in the payment link /pay/<productId>) with this " +
    "session's custodial wallet: pays the price in USDC or the service token and returns the purchase, with the " +
    "feature access token (accessToken) for feature unlocks. A connected wallet pays on the checkout page instead.",
  input: { productId: z.string().max(64).describe("the product's id, prod_…") },
  needsWallet: true,
  run: async ({ deps, caller }, input) => {
    const wallet = requireWallet(caller);
    const signer = await signerFor(deps, wallet.walletAddress);
    if (signer.kind !== "custodial") {
      throw new AppError("NOT_SUPPORTED", "checkout_pay pays with a custodial wallet; a connected wallet pays on the checkout page (paymentUrl)");
    }
    const { startCheckout, submitCheckout } = await importQuietly(() => import("./checkout.ts"));
    const checkout = await startCheckout(deps, input.productId, wallet.walletAddress);
    const signed = await signer.sign(decodeBase64Strict(checkout.transaction)!);
    const result = await submitCheckout(deps, input.productId, checkout.checkoutId, encodeBase64(signed));
    return { ...result, checkoutId: checkout.checkoutId, amount: checkout.amount, currency: checkout.currency, payTo: checkout.payTo };
  },
});

export const PAYGATE_TOOLS: readonly Tool[] = [checkoutPay];
