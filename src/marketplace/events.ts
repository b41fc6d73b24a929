// The notifications an agent's endpoint receives (marketplace.md "Provider notifications"), handed to the
// webhooks outbox inside the database write that caused them.
import type { Deps } from "../deps.ts";
import { enqueueEventInWrite } from "../webhooks/outbox.ts";
import { clusterName } from "../ledger/ledger.ts";
import { findAgentOwnerInWrite } from "./store.ts";

export const AGENT_EVENTS = {
  conversationStarted: "conversation.started",
  messageReceived: "message.received",
  orderAccepted: "order.accepted",
  orderDeclined: "order.declined",
  orderCompleted: "order.completed",
  orderDisputed: "order.disputed",
  orderExpired: "order.expired",
} as const;

export type AgentEventType = (typeof AGENT_EVENTS)[keyof typeof AGENT_EVENTS];

/** The events an endpoint may answer with `200 {"reply": "…"}`, recorded as the provider's message. */
export const REPLYABLE_EVENTS: readonly string[] = [AGENT_EVENTS.conversationStarted, AGENT_EVENTS.messageReceived];

/**
 * Queues `type` for the agent's endpoint; the body sent is `{id, type, ...payload, network}` (the cluster, as
 * paygate's webhooks name it: an endpoint serving several instances can tell them apart), signed with the agent's
 * webhookSecret. `options.eventId` is an `evt_` id made beforehand (to store alongside). SYNCHRONOUS, to be called inside the caller's `db.write(() => …)` so the notification
 * commits (or not) with the change. Returns the event id (`evt_…`), the `webhook-id` the endpoint sees.
 * The notification shares the delivery worker's slots of the wallet that owns the agent.
 */
export function enqueueAgentEventInWrite(
  deps: Deps,
  agentId: string,
  type: AgentEventType,
  payload: Record<string, unknown>,
  options: { eventId?: string } = {},
): string {
  const event = {
    targetKind: "agent" as const,
    targetId: agentId,
    agentOwner: findAgentOwnerInWrite(deps.db, agentId),
    type,
    payload: { ...payload, network: clusterName(deps.config.network) },
    ...(options.eventId === undefined ? {} : { id: options.eventId }),
  };
  return enqueueEventInWrite(deps, event);
}
