// Tool edge of the marketplace's agents and conversations (mcp.md "Marketplace"): provider_register,
// provider_update, provider_list_conversations, provider_send_message, consumer_search_agents,
// consumer_get_agent, consumer_start_conversation, consumer_send_message, consumer_get_conversation.
import { z } from "zod";
import { ordersOfConversation } from "./orders/orders.ts";
import { defineTool, requireWallet, type Tool, type ToolContext } from "../mcp/registry.ts";
import { messageHits, ownerWriteHits, searchHits } from "../auth/rate-limit.ts";
import { AGENT_LIMITS, getAgent, registerAgent, searchAgents, SEARCH_PAGE, updateAgent } from "./agents.ts";
import {
  CONVERSATION_PAGE,
  getConversation,
  listProviderConversations,
  MESSAGE_MAX_CHARS,
  MESSAGE_PAGE,
  sendMessage,
  startConversation,
} from "./conversations.ts";

/** Counts a message against its wallet's and its network's limits (auth/rate-limit.ts), or refuses it. */
export function countMessage(ctx: ToolContext, wallet: string): void {
  ctx.deps.auth.rateLimiter.consume(messageHits(wallet, ctx.client.ip), ctx.deps.clock.now());
}

const agentId = z.string().max(64).describe("the agent's id, agt_…");
const conversationId = z.string().max(64).describe("the conversation's id, conv_…");
const usdc = (what: string) =>
  z.union([z.number(), z.string()]).describe(`${what} in USDC, as a number or a decimal string ("12.5"), at most 6 decimals, above 0`);
const message = z.string().min(1).max(MESSAGE_MAX_CHARS).describe(`the message text, 1 to ${MESSAGE_MAX_CHARS} characters`);
const endpoint = z
  .string()
  .max(2048)
  .describe("the agent's HTTPS URL (http allowed off mainnet) that receives signed notifications (Standard Webhooks) of conversations, messages and orders");

const profileFields = {
  name: z.string().max(AGENT_LIMITS.name).describe(`display name, 1 to ${AGENT_LIMITS.name} characters`),
  tagline: z.string().max(AGENT_LIMITS.tagline).optional().describe(`one line saying what the agent does, up to ${AGENT_LIMITS.tagline} characters`),
  description: z.string().max(AGENT_LIMITS.description).optional().describe(`what the agent offers, up to ${AGENT_LIMITS.description} characters`),
  categories: z
    .array(z.string().max(AGENT_LIMITS.categoryChars).describe("a category, e.g. translation"))
    .max(AGENT_LIMITS.categories)
    .optional()
    .describe(`up to ${AGENT_LIMITS.categories} categories consumers filter by (matched ignoring case)`),
  basePrice: usdc("the starting price of the agent's work"),
};

const serviceFields = {
  title: z.string().max(AGENT_LIMITS.serviceTitle).describe(`the service's title, 1 to ${AGENT_LIMITS.serviceTitle} characters`),
  description: z.string().max(AGENT_LIMITS.serviceDescription).optional().describe(`what the service delivers, up to ${AGENT_LIMITS.serviceDescription} characters`),
  price: usdc("the service's price"),
  deliveryTime: z.number().int().min(1).max(AGENT_LIMITS.deliveryTime).describe("delivery time in whole minutes"),
};

const services = z
  .array(z.object(serviceFields).strict().describe("a fixed-price service"))
  .max(AGENT_LIMITS.services)
  .describe(`up to ${AGENT_LIMITS.services} fixed-price services; each gets a serviceId`);

const pageLimit = (limits: { default: number; max: number }) =>
  z.number().int().min(1).max(limits.max).optional().describe(`how many, 1-${limits.max} (default ${limits.default})`);
const offset = z.number().int().min(0).optional().describe("how many to skip (default 0)");

export const providerRegister = defineTool({
  name: "provider_register",
  description:
    "Register an agent that sells work on the marketplace, owned by this session's wallet (a wallet may own several). " +
    "Returns {agent, webhookSecret}: the secret (whsec_…) is shown only here; the service signs every notification POSTed " +
    "to the endpoint with it (Standard Webhooks headers). Answering a conversation.started or message.received " +
    'notification with 200 {"reply": "…"} posts the reply in the conversation.',
  input: {
    endpoint,
    profile: z.object(profileFields).strict().describe("what consumers see and search"),
    services: services.optional(),
  },
  needsWallet: true,
  run: async ({ deps, caller, client }, input) => {
    const wallet = requireWallet(caller).walletAddress;
    deps.auth.rateLimiter.consume(ownerWriteHits(wallet, "write", client.ip), deps.clock.now());
    const { webhookSecret, ...agent } = await registerAgent(deps, wallet, input);
    return { agent, webhookSecret };
  },
});

export const providerUpdate = defineTool({
  name: "provider_update",
  description:
    "Change an agent this session's wallet owns: any profile fields, the whole services list (an item with a serviceId " +
    "keeps that service; services left out are removed), the endpoint, or the status (paused agents leave search and " +
    "take no new conversations, but keep their conversations and orders).",
  input: {
    agentId,
    profile: z.object(profileFields).partial().strict().optional().describe("only the fields to change"),
    services: z
      .array(
        z
          .object({ serviceId: z.string().max(64).optional().describe("keep this existing service (svc_…); leave out for a new one"), ...serviceFields })
          .strict()
          .describe("a fixed-price service"),
      )
      .max(AGENT_LIMITS.services)
      .optional()
      .describe(`the new list of services (up to ${AGENT_LIMITS.services}), replacing the old one`),
    endpoint: endpoint.optional(),
    status: z.enum(["active", "paused"]).optional().describe("active: listed and open to new conversations; paused: not"),
  },
  needsWallet: true,
  run: async ({ deps, caller, client }, input) => {
    const { agentId: id, ...patch } = input;
    const wallet = requireWallet(caller).walletAddress;
    deps.auth.rateLimiter.consume(ownerWriteHits(wallet, "write", client.ip), deps.clock.now());
    return { agent: await updateAgent(deps, wallet, id, patch) };
  },
});

export const providerListConversations = defineTool({
  name: "provider_list_conversations",
  description:
    "Conversations with the agents this session's wallet owns (or with one, by agentId), most recently active first, " +
    "each with its last message. Read one with consumer_get_conversation and answer with provider_send_message.",
  input: { agentId: agentId.optional(), limit: pageLimit(CONVERSATION_PAGE), offset },
  needsWallet: true,
  run: async ({ deps, caller }, input) => listProviderConversations(deps, requireWallet(caller).walletAddress, input),
});

export const providerSendMessage = defineTool({
  name: "provider_send_message",
  description: "As the owner of the conversation's agent, send a message to the consumer.",
  input: { conversationId, message },
  needsWallet: true,
  run: async (ctx, input) => {
    const wallet = requireWallet(ctx.caller).walletAddress;
    countMessage(ctx, wallet);
    return sendMessage(ctx.deps, wallet, "provider", input.conversationId, input.message);
  },
});

export const consumerSearchAgents = defineTool({
  name: "consumer_search_agents",
  description:
    "Find active agents to hire: by category (exact, ignoring case), maxPrice (base price at most this, USDC) and " +
    "query (words in name, tagline or description; all must match, word beginnings count). Best rated first, then " +
    "most completed orders. Returns {agents, total, limit, offset}; a page holds fewer than limit agents when they " +
    "would pass about 1 MB: the next page starts at offset + the agents returned, and total says where the list ends.",
  input: {
    category: z.string().max(AGENT_LIMITS.categoryChars).optional().describe("a category, e.g. translation"),
    maxPrice: usdc("the highest base price").optional(),
    query: z.string().max(200).optional().describe("words to look for, e.g. \"german legal translation\""),
    limit: pageLimit(SEARCH_PAGE),
    offset,
  },
  needsWallet: true,
  run: async ({ deps, caller, client }, input) => {
    deps.auth.rateLimiter.consume(searchHits(requireWallet(caller).walletAddress, client.ip), deps.clock.now());
    return searchAgents(deps, input);
  },
});

export const consumerGetAgent = defineTool({
  name: "consumer_get_agent",
  description: "An agent ({agent}): profile, services (with serviceIds and prices), status, rating and completed orders.",
  input: { agentId },
  needsWallet: true,
  run: async ({ deps, caller }, input) => ({ agent: await getAgent(deps, input.agentId, requireWallet(caller).walletAddress) }),
});

export const consumerStartConversation = defineTool({
  name: "consumer_start_conversation",
  description:
    "Start a conversation with an active agent with a first message, as this session's wallet. The agent is notified " +
    "and may answer at once; read answers with consumer_get_conversation.",
  input: { agentId, message },
  needsWallet: true,
  run: async (ctx, input) => {
    const wallet = requireWallet(ctx.caller).walletAddress;
    countMessage(ctx, wallet);
    return startConversation(ctx.deps, wallet, input.agentId, input.message);
  },
});

export const consumerSendMessage = defineTool({
  name: "consumer_send_message",
  description: "Send a message to the agent in one of this session's wallet's conversations; the agent is notified.",
  input: { conversationId, message },
  needsWallet: true,
  run: async (ctx, input) => {
    const wallet = requireWallet(ctx.caller).walletAddress;
    countMessage(ctx, wallet);
    return sendMessage(ctx.deps, wallet, "consumer", input.conversationId, input.message);
  },
});

export const consumerGetConversation = defineTool({
  name: "consumer_get_conversation",
  description:
    "A conversation of this session's wallet (as consumer, or as owner of its agent): its messages oldest first and its " +
    "newest 100 orders (ordersTotal counts all; the list_orders tools page through them). Poll for new messages with " +
    "since = the last messageId seen; hasMore says a further page follows.",
  input: {
    conversationId,
    since: z.string().max(64).optional().describe("a messageId (msg_…): only messages after it"),
    limit: pageLimit(MESSAGE_PAGE),
  },
  needsWallet: true,
  run: async ({ deps, caller }, input) => {
    const { conversation, messages, hasMore } = await getConversation(deps, requireWallet(caller).walletAddress, input.conversationId, input);
    return { conversation, messages, hasMore, ...(await ordersOfConversation(deps, input.conversationId)) };
  },
});

export const MARKETPLACE_TOOLS: readonly Tool[] = [
  providerRegister,
  providerUpdate,
  providerListConversations,
  providerSendMessage,
  consumerSearchAgents,
  consumerGetAgent,
  consumerStartConversation,
  consumerSendMessage,
  consumerGetConversation,
];
