// Tool edge of payment gating: checkout_pay, with which a session's wallet buys a product through the same
// checkout, submit and confirm steps as the checkout page (paygate.md "Checkout"): a custodial wallet in one
// call, a connected wallet in two (the transaction handed out, then sent back signed).
import { z } from "zod";
import { AppError, errorText, fieldError, outcomeUnknown } from "../errors.ts";
import { defineTool, idempotencyKeyInput, requireWallet, type Tool } from "../mcp/registry.ts";
import { signerFor } from "../wallets/signer.ts";
import { decodeBase64Strict, encodeBase64 } from "../lib/encoding.ts";
import { importQuietly } from "../lib/quiet-import.ts";
import { checkoutHits, paymentCheckHits } from "../auth/rate-limit.ts";
import type { CheckoutView } from "./checkout.ts";

export const checkoutPay = defineTool({
  name: "checkout_pay",
  description:
    "Buy a product sold through this service (its productId is in the payment link /pay/<productId>) with this " +
    "session's wallet: pays the price in USDC or the service token and returns the purchase, with the " +
    "feature access token (accessToken) for feature unlocks. A connected wallet gets unsignedTransaction and checkoutId " +
    "first, and completes by calling again with that checkoutId and signedTransaction (the transaction, signed); with " +
    "the checkoutId alone, before anything was sent, it gets a fresh unsignedTransaction (after blockhash_expired). " +
    "After CHAIN_UNAVAILABLE or INTERNAL_ERROR (the payment may have been sent), call it again with the checkoutId " +
    "from the error's details: that call's purchase (or pending, while its payment may still land) is answered and " +
    "nothing is paid again. Without checkoutId it buys anew (extending access), except that a payment of an earlier " +
    "call still open and found landed is answered instead, and while an earlier call's transaction may still land " +
    "it answers pending with that checkoutId and pays nothing. Two calls that meet (the later one comes while the earlier " +
    "is still deciding to pay) pay once: the later waits (up to 30 s) for the earlier's payment and answers its purchase, " +
    "under its checkoutId (CONFLICT if that payment was not made: call again). With currency (and maxAmount, which needs it), a " +
    "product sold in another currency, or above maxAmount, is refused with PAYMENT_MISMATCH before anything is signed " +
    "(with checkoutId, that checkout's own price, when this call would send or hand out its transaction); a purchase " +
    "already made or on its way (a checkoutId's, an earlier call's) is answered as it is. " +
    "Give an idempotencyKey (your own, one per intended purchase) so that a retry after a lost answer (a dropped " +
    "connection, a restarted server: no checkoutId came back) answers that purchase, or completes it if it was never " +
    "paid, instead of paying again; a new key is a new purchase, and a key whose checkout expired unpaid (INVALID_STATE) is spent.",
  input: {
    productId: z.string().max(64).describe("the product's id, prod_…"),
    checkoutId: z.string().max(64).optional().describe("an earlier call's checkoutId: its outcome, never a new payment"),
    idempotencyKey: idempotencyKeyInput("a key you choose for this one purchase (e.g. a UUID): calling again with it, after any error or a lost answer, never pays twice"),
    maxAmount: z
      .union([z.number(), z.string().max(40)])
      .optional()
      .describe('the most this call may pay, in `currency` (e.g. "2.50"); a higher price is refused and nothing is paid'),
    currency: z.string().max(16).optional().describe('the currency the price was seen in ("USDC" or the service token\'s symbol); another one is refused'),
    signedTransaction: z.string().max(1700).optional().describe("connected wallets: the unsignedTransaction of the first call, signed (standard base64), with its checkoutId"),
  },
  needsWallet: true,
  run: async ({ deps, caller, client, requestId }, input) => {
    const wallet = requireWallet(caller);
    const signer = await signerFor(deps, wallet.walletAddress);
    const {
      IdempotencyKeyTaken,
      checkoutKey,
      earlierPurchaseOf,
      followCheckout,
      keyedCheckout,
      readLimits,
      resumeConnectedCheckout,
      resumeCustodialCheckout,
      startCheckout,
      submitCheckout,
      submitOwnCheckout,
      unsignedCheckout,
    } = await importQuietly(() => import("./checkout.ts"));
    // Every call submits or looks for a payment (a resume, a signed payment, or the wallet's earlier submissions
    // whose outcome is unknown; on RPC networks, the operator's RPC quota): counted as POST /pay/:productId/submit
    // and /confirm count it, from the same client network.
    deps.auth.rateLimiter.consume(paymentCheckHits(client.ip), deps.clock.now());
    // Read on every call, held where this call would pay (a new checkout, a key's fresh transaction, a signed one).
    const limits = { maxAmount: input.maxAmount, currency: input.currency };
    await readLimits(deps, input.productId, limits);
    if (input.signedTransaction !== undefined) {
      if (signer.kind === "custodial") throw fieldError("signedTransaction", "signedTransaction is for connected wallets; this session's custodial wallet is signed for here");
      if (input.checkoutId === undefined) throw fieldError("checkoutId", "signedTransaction needs the checkoutId of the call that handed the transaction out");
      return submitOwnCheckout(deps, input.productId, wallet.walletAddress, input.checkoutId, input.signedTransaction, limits);
    }
    if (input.checkoutId !== undefined) {
      // A connected wallet's resume hands out a fresh transaction when nothing it sent can land: its limits hold there.
      if (signer.kind === "custodial") return resumeCustodialCheckout(deps, input.productId, wallet.walletAddress, input.checkoutId);
      return resumeConnectedCheckout(deps, input.productId, wallet.walletAddress, input.checkoutId, limits);
    }
    // With a key the wallet used before: that key's checkout, answered or paid (keyedCheckout); else a new one.
    const key = input.idempotencyKey;
    const keyed = () => (key === undefined ? null : keyedCheckout(deps, input.productId, wallet.walletAddress, key, signer.kind === "custodial", limits));
    let checkout: CheckoutView;
    const resumed = await keyed();
    if (resumed !== null && !("transaction" in resumed)) return resumed;
    if (resumed !== null) checkout = resumed;
    else {
      // Without a key, a naive retry soon after an error that came once the payment had landed answers that
      // purchase. (With one, a retry comes back to its own checkout, above.)
      if (key === undefined) {
        const earlier = await earlierPurchaseOf(deps, input.productId, wallet.walletAddress);
        if (earlier !== null) return earlier;
      }
      // Every checkout opened is a row kept for a week: counted as POST /pay/:productId/checkout counts it.
      deps.auth.rateLimiter.consume(checkoutHits(client.ip), deps.clock.now());
      try {
        checkout = await startCheckout(deps, input.productId, wallet.walletAddress, undefined, { ...limits, idempotencyKey: key });
      } catch (err) {
        if (!(err instanceof IdempotencyKeyTaken)) throw err;
        // Another call with the key opened its checkout a moment ago: that one is the purchase.
        const other = await keyed();
        if (other === null) throw err;
        if (!("transaction" in other)) return other;
        checkout = other;
      }
    }
    // The service holds no key: the wallet signs, then calls again with the checkoutId (mcp.md's non-custodial flow).
    if (signer.kind !== "custodial") return unsignedCheckout(checkout);
    const signed = await signer.sign(decodeBase64Strict(checkout.transaction)!);
    let result;
    try {
      // A call without checkoutId buys anew on purpose (its retry protection is earlierPurchaseOf above).
      result = await submitCheckout(deps, input.productId, checkout.checkoutId, encodeBase64(signed), { answerRecentPurchase: false, otherCheckouts: key === undefined });
    } catch (err) {
      // Only where the payment may have been sent (its outcome unknown) is the checkoutId worth resuming with;
      // a refusal before sending (funds, mismatch, state) leaves nothing that can land.
      if (!outcomeUnknown(err)) throw err;
      if (!(err instanceof AppError)) {
        // Unexpected, so answered INTERNAL_ERROR as any tool's would be, but with the checkoutId to resume with.
        // Logged under the request's id, the checkout by its key: its id would reveal the buyer's token.
        deps.log.error("checkout_pay failed once its payment may have been sent", {
          ...(requestId === undefined ? {} : { requestId }),
          checkoutKey: checkoutKey(checkout.checkoutId),
          error: errorText(err),
        });
        throw new AppError("INTERNAL_ERROR", "internal error", { details: { checkoutId: checkout.checkoutId } });
      }
      const details = typeof err.extra.details === "object" && err.extra.details !== null ? err.extra.details : {};
      throw new AppError(err.code, err.message, { ...err.extra, details: { ...details, checkoutId: checkout.checkoutId } });
    }
    // An earlier call's payment on its way (two calls at once): that checkout's outcome, waited for. With a
    // key, that call was one with the same key, paying this very checkout.
    if (result.status === "pending" && result.checkoutId !== undefined && result.checkoutId !== checkout.checkoutId) {
      return followCheckout(deps, input.productId, wallet.walletAddress, result.checkoutId);
    }
    if (result.status === "pending" && key !== undefined) return followCheckout(deps, input.productId, wallet.walletAddress, checkout.checkoutId);
    return { ...result, checkoutId: checkout.checkoutId, amount: checkout.amount, currency: checkout.currency, payTo: checkout.payTo };
  },
});

export const PAYGATE_TOOLS: readonly Tool[] = [checkoutPay];
