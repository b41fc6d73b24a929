// What orders need of the rest of the marketplace: who the two sides of a conversation are, the
// messages orders write into it, the agent's counters, and the agent's notifications.
import type { Deps } from "../../deps.ts";
import { addOrderMessageInWrite } from "../conversations.ts";
import { enqueueAgentEventInWrite, type AgentEventType } from "../events.ts";
import * as market from "../store.ts";
import type { OrderRow } from "./store.ts";

export type ConversationParties = { agentId: string; consumerWallet: string; providerWallet: string; serviceIds: string[] };

export async function conversationParties(deps: Deps, conversationId: string): Promise<ConversationParties | null> {
  const conversation = await market.findConversation(deps.db, conversationId);
  if (conversation === null) return null;
  const agent = await market.findAgent(deps.db, conversation.agentId);
  if (agent === null) return null;
  const services = await market.listServices(deps.db, [agent.id]);
  return { agentId: agent.id, consumerWallet: conversation.consumerWallet, providerWallet: agent.ownerWallet, serviceIds: services.map((s) => s.id) };
}

/** A `system` message about the order in its conversation. SYNCHRONOUS, inside the order's write. */
export function systemMessageInWrite(deps: Deps, order: OrderRow, text: string): void {
  addOrderMessageInWrite(deps, { conversationId: order.conversationId, text, orderId: order.id });
}

/** What the provider wrote with a change of the order (a delivery's message), as its own message. SYNCHRONOUS, inside the order's write. */
export function providerMessageInWrite(deps: Deps, order: OrderRow, text: string): void {
  addOrderMessageInWrite(deps, { conversationId: order.conversationId, text, orderId: order.id, from: "provider" });
}

/** The agent's completed-order count and rating move with the order. SYNCHRONOUS, inside its write. */
export function orderCompletedInWrite(deps: Deps, agentId: string, rating: number | null): void {
  market.recordOrderCompletedInWrite(deps.db, agentId, rating);
}

/** An `order.*` notification to the agent's endpoint (outbox). SYNCHRONOUS, inside the order's write. */
export function orderEventInWrite(deps: Deps, order: OrderRow, type: AgentEventType, extra: Record<string, unknown>): void {
  enqueueAgentEventInWrite(deps, order.agentId, type, {
    orderId: order.id,
    conversationId: order.conversationId,
    agentId: order.agentId,
    consumerWallet: order.consumerWallet,
    description: order.description,
    price: order.price,
    token: order.token,
    ...extra,
    timestamp: new Date(deps.clock.now()).toISOString(),
  });
}
