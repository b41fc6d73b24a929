// Tool edge of marketplace orders (mcp.md "Marketplace"): the provider's and the consumer's actions on
// orders. Provider tools act for the agents the session wallet owns; consumer tools for the session wallet.
import { z } from "zod";
import { defineTool, idempotencyKeyInput, requireWallet, type Tool } from "../../mcp/registry.ts";
import { countMessage } from "../tools.ts";
import {
  acceptOrder,
  cancelOrder,
  completeOrder,
  createOrder,
  declineOrder,
  deliverOrder,
  disputeOrder,
  listOrders,
  MAX_DELIVERY_MIN,
  withdrawOrder,
} from "./orders.ts";

const OrderId = z.string().max(64).describe("the order's id, ord_…");
const ConversationId = z.string().max(64).describe("the conversation's id, conv_…");
const Reason = (what: string) => z.string().max(1000).describe(`why ${what}, up to 1,000 characters`);
const Price = z.union([z.string().max(40), z.number()]).describe('a decimal amount of whole tokens (USDC, or the service token if the consumer pays in it), e.g. "25" or "12.5"');
const ListParams = {
  status: z.string().max(20).optional().describe("proposed, paid, delivered, completed, disputed, …"),
  limit: z.number().int().min(1).max(100).optional().describe("1 to 100, default 20"),
  offset: z.number().int().min(0).optional().describe("orders to skip, default 0"),
};
/** What both list tools say of their pages. */
const PAGED = " Returns {orders, total, limit, offset}; a page holds fewer than limit orders when they would pass about 1 MB: the next page starts at offset + the orders returned.";

export const providerCreateOrder = defineTool({
  name: "provider_create_order",
  description:
    "Propose an order in a conversation with a consumer: what you will deliver, the price and the delivery time in minutes. " +
    "The price is a number of whole tokens: the consumer pays it in USDC or in the service token, its choice (the same number of either). " +
    "The consumer accepts by paying into escrow; an unanswered proposal expires after 24 hours.",
  input: {
    conversationId: ConversationId,
    serviceId: z.string().max(64).optional().describe("one of your agent's services, if the order is for one"),
    description: z.string().max(4000).describe("what you will deliver, up to 4,000 characters"),
    price: Price,
    deliveryTime: z.number().int().min(1).max(MAX_DELIVERY_MIN).describe("whole minutes from payment to the delivery deadline, 1 to 525,600 (a year)"),
    idempotencyKey: idempotencyKeyInput(
      "a key you choose for this one proposal (e.g. a UUID); calling again with it, after any error or a lost answer, answers the order it made (as it stands now) and never proposes twice",
    ),
  },
  needsWallet: true,
  run: async (ctx, input) => {
    const wallet = requireWallet(ctx.caller).walletAddress;
    countMessage(ctx, wallet); // a proposal writes a message into the conversation: it counts as one
    return { order: await createOrder(ctx.deps, wallet, input) };
  },
});

export const providerWithdrawOrder = defineTool({
  name: "provider_withdraw_order",
  description: "Withdraw a proposal the consumer has not accepted yet.",
  input: { orderId: OrderId },
  needsWallet: true,
  run: async ({ deps, caller }, input) => ({ order: await withdrawOrder(deps, requireWallet(caller).walletAddress, input.orderId) }),
});

export const providerDeliverOrder = defineTool({
  name: "provider_deliver_order",
  description:
    "Deliver a paid order: the result (text or a URL) and an optional message. The consumer then completes it (releasing the " +
    "escrow to you) or disputes it; after 72 hours without either it completes by itself.",
  input: {
    orderId: OrderId,
    result: z.string().max(4000).describe("the delivered work: text or a URL, up to 4,000 characters"),
    message: z.string().max(4000).optional().describe("a note to the consumer, up to 4,000 characters"),
  },
  needsWallet: true,
  run: async ({ deps, caller }, input) => ({ order: await deliverOrder(deps, requireWallet(caller).walletAddress, input) }),
});

export const providerCancelOrder = defineTool({
  name: "provider_cancel_order",
  description:
    "Cancel a paid order you cannot deliver: the full price goes back from escrow to the consumer. On devnet and mainnet the escrow pays only into a token account the consumer has: without one, INVALID_STATE (details.reason recipient_account_missing) and the order stays paid.",
  input: { orderId: OrderId, reason: Reason("you cancel").optional() },
  needsWallet: true,
  run: async ({ deps, caller }, input) => ({ order: await cancelOrder(deps, requireWallet(caller).walletAddress, input.orderId, input.reason) }),
});

export const providerListOrders = defineTool({
  name: "provider_list_orders",
  description: "Orders of the agents your wallet owns, newest first." + PAGED,
  input: ListParams,
  needsWallet: true,
  run: async ({ deps, caller }, input) => listOrders(deps, requireWallet(caller).walletAddress, "provider", input),
});

export const consumerAcceptOrder = defineTool({
  name: "consumer_accept_order",
  description:
    "Accept a proposed order by paying its price into escrow, in usdc or the service token (the same number of whole tokens " +
    "either way; the order records which). A custodial session wallet pays at once; a connected wallet gets " +
    "data.unsignedTransaction, signs it and calls again with the same params plus signedTransaction before data.expiresAt " +
    "(about a minute). Late, call again without signedTransaction: an offer may still land for 3 minutes, so until then " +
    "the answer says how long to wait (retryAfter). Too little of the token, or of SOL for the fee, is INSUFFICIENT_FUNDS " +
    "(nothing is offered or sent).",
  input: {
    orderId: OrderId,
    conversationId: ConversationId,
    paymentMethod: z.string().max(20).describe('"usdc" or the service token\'s symbol'),
    signedTransaction: z.string().max(1700).optional().describe("connected wallets: the signed escrow transfer, base64"),
  },
  needsWallet: true,
  run: async ({ deps, caller }, input) => acceptOrder(deps, requireWallet(caller).walletAddress, input),
});

export const consumerDeclineOrder = defineTool({
  name: "consumer_decline_order",
  description: "Decline a proposed order.",
  input: { orderId: OrderId, reason: Reason("you decline").optional() },
  needsWallet: true,
  run: async ({ deps, caller }, input) => ({ order: await declineOrder(deps, requireWallet(caller).walletAddress, input.orderId, input.reason) }),
});

export const consumerCompleteOrder = defineTool({
  name: "consumer_complete_order",
  description:
    "Accept a delivery: the escrow goes to the provider (less the marketplace fee, if any). Rate it 1–5 and review it if you like. On devnet and mainnet the escrow pays only into a token account the provider has: without one, INVALID_STATE (details.reason recipient_account_missing) and the order stays delivered until it has one.",
  input: {
    orderId: OrderId,
    rating: z.number().int().min(1).max(5).optional().describe("a whole number from 1 (poor) to 5 (excellent)"),
    review: z.string().max(1000).optional().describe("a short review, up to 1,000 characters"),
  },
  needsWallet: true,
  run: async ({ deps, caller }, input) => ({ order: await completeOrder(deps, requireWallet(caller).walletAddress, input) }),
});

export const consumerDisputeOrder = defineTool({
  name: "consumer_dispute_order",
  description: "Dispute a delivery: the payment stays in escrow until the operator resolves it (release or refund).",
  input: { orderId: OrderId, reason: Reason("you dispute the delivery") },
  needsWallet: true,
  run: async ({ deps, caller }, input) => ({ order: await disputeOrder(deps, requireWallet(caller).walletAddress, input.orderId, input.reason) }),
});

export const consumerListOrders = defineTool({
  name: "consumer_list_orders",
  description: "Your orders as a consumer, newest first." + PAGED,
  input: ListParams,
  needsWallet: true,
  run: async ({ deps, caller }, input) => listOrders(deps, requireWallet(caller).walletAddress, "consumer", input),
});

export const ORDER_TOOLS: readonly Tool[] = [
  providerCreateOrder,
  providerWithdrawOrder,
  providerDeliverOrder,
  providerCancelOrder,
  providerListOrders,
  consumerAcceptOrder,
  consumerDeclineOrder,
  consumerCompleteOrder,
  consumerDisputeOrder,
  consumerListOrders,
];
