// Conversations between a consumer wallet and an agent, and their messages (marketplace.md "Records"):
// start, send from either side, the provider's list, reading with `since`, system messages and replies.
import type { Deps } from "../deps.ts";
import { headWithin } from "../lib/fit.ts";
import { AppError, invalidField, textField, withoutControlCharacters, requirePage } from "../errors.ts";
import { firstCharacters } from "../lib/text.ts";
import { toIso } from "../lib/clock.ts";
import { newId } from "../lib/ids.ts";
import { ownedAgent } from "./agents.ts";
import { AGENT_EVENTS, enqueueAgentEventInWrite } from "./events.ts";
import * as store from "./store.ts";

/** Characters (code points, as JSON Schema's maxLength and SQLite's length() count them) of a message. */
export const MESSAGE_MAX_CHARS = 4000;
export const MESSAGE_PAGE = { default: 100, max: 200 } as const;
export const CONVERSATION_PAGE = { default: 20, max: 100 } as const;

export type Side = "consumer" | "provider";

export type Message = {
  messageId: string;
  conversationId: string;
  from: store.Sender;
  text: string;
  /** the order a system message is about; null on other messages (as an order's absent fields are) */
  orderId: string | null;
  createdAt: string;
};

export type Conversation = {
  conversationId: string;
  agentId: string;
  consumerWallet: string;
  status: store.ConversationStatus;
  createdAt: string;
  lastMessageAt: string;
};

export type ConversationSummary = Conversation & { messageCount: number; lastMessage: Message | null };

/** A conversation as seen by one of its two parties. */
export type ConversationParty = { side: Side; conversation: store.ConversationRow; agent: store.AgentRow };

const notFound = () => new AppError("NOT_FOUND", "no such conversation");

export function messageView(row: Pick<store.MessageRow, "id" | "conversationId" | "from" | "text" | "orderId" | "createdAt">): Message {
  return {
    messageId: row.id,
    conversationId: row.conversationId,
    from: row.from,
    text: row.text,
    orderId: row.orderId,
    createdAt: toIso(row.createdAt),
  };
}

export function conversationView(row: store.ConversationRow): Conversation {
  return {
    conversationId: row.id,
    agentId: row.agentId,
    consumerWallet: row.consumerWallet,
    status: row.status,
    createdAt: toIso(row.createdAt),
    lastMessageAt: toIso(row.lastMessageAt),
  };
}

/** At most MESSAGE_MAX_CHARS characters (code points), never splitting a surrogate pair. */
export function capMessageText(text: string): string {
  return firstCharacters(text, MESSAGE_MAX_CHARS);
}

function checkMessage(text: string, field = "message"): string {
  if (text.trim().length === 0) throw invalidField(field, "must not be empty");
  return textField(text, field, MESSAGE_MAX_CHARS, true);
}

/**
 * Which side `wallet` is on in the conversation: its consumer, or the owner of its agent. Anyone else
 * (and an unknown id) gets NOT_FOUND: a stranger never learns the conversation exists.
 */
export async function conversationParty(deps: Deps, wallet: string, conversationId: string): Promise<ConversationParty> {
  const conversation = await store.findConversation(deps.db, conversationId);
  if (conversation === null) throw notFound();
  const agent = await store.findAgent(deps.db, conversation.agentId);
  if (agent === null) throw notFound();
  if (conversation.consumerWallet === wallet) return { side: "consumer", conversation, agent };
  if (agent.ownerWallet === wallet) return { side: "provider", conversation, agent };
  throw notFound();
}

/** FORBIDDEN when the party is on the other side (a provider using a consumer's action, or the reverse). */
export function requireSide(party: ConversationParty, side: Side): void {
  if (party.side === side) return;
  throw new AppError(
    "FORBIDDEN",
    side === "consumer"
      ? "this is the consumer's action; as the agent's owner use the provider_ tools"
      : "this is the provider's action; as the conversation's consumer use the consumer_ tools",
  );
}

function messageEventPayload(conversation: store.ConversationRow, message: store.NewMessage): Record<string, unknown> {
  return {
    conversationId: conversation.id,
    agentId: conversation.agentId,
    consumerWallet: conversation.consumerWallet,
    messageId: message.id,
    from: message.from,
    text: message.text,
    createdAt: toIso(message.createdAt),
    // Every event body has a `timestamp` (paygate's and the order events alike); here it is the message's time.
    timestamp: toIso(message.createdAt),
  };
}

/**
 * consumer_start_conversation: a new conversation with an active agent and its first message; the agent
 * hears `conversation.started` (in the same write). Your own agent: FORBIDDEN; a paused one: INVALID_STATE.
 */
export async function startConversation(
  deps: Deps,
  consumerWallet: string,
  agentId: string,
  text: string,
): Promise<{ conversation: Conversation; message: Message }> {
  const agent = await store.findAgent(deps.db, agentId);
  if (agent === null) throw new AppError("NOT_FOUND", "no such agent");
  if (agent.ownerWallet === consumerWallet) throw new AppError("FORBIDDEN", "a wallet cannot start a conversation with its own agent");
  if (agent.status !== "active") throw new AppError("INVALID_STATE", "this agent is paused and takes no new conversations");
  const now = deps.clock.now();
  const conversation: store.ConversationRow = {
    id: newId("conv", deps.random),
    agentId,
    consumerWallet,
    status: "active",
    createdAt: now,
    lastMessageAt: now,
  };
  const eventId = newId("evt", deps.random);
  const message: store.NewMessage = { id: newId("msg", deps.random), conversationId: conversation.id, from: "consumer", text: checkMessage(text), eventId, createdAt: now };
  await store.insertConversation(deps.db, conversation, message, () => {
    enqueueAgentEventInWrite(deps, agentId, AGENT_EVENTS.conversationStarted, messageEventPayload(conversation, message), { eventId });
  });
  deps.log.info("marketplace conversation started", { conversationId: conversation.id, agentId });
  return { conversation: conversationView(conversation), message: messageView({ ...message, orderId: null }) };
}

/**
 * consumer_send_message / provider_send_message: a message from `side`; a consumer's message also goes
 * to the agent as `message.received`. A stranger: NOT_FOUND; the other side's tool: FORBIDDEN.
 */
export async function sendMessage(deps: Deps, wallet: string, side: Side, conversationId: string, text: string): Promise<{ message: Message }> {
  const party = await conversationParty(deps, wallet, conversationId);
  requireSide(party, side);
  if (party.conversation.status !== "active") throw new AppError("INVALID_STATE", "this conversation is archived");
  const now = deps.clock.now();
  const eventId = side === "consumer" ? newId("evt", deps.random) : null;
  const message: store.NewMessage = { id: newId("msg", deps.random), conversationId, from: side, text: checkMessage(text), eventId, createdAt: now };
  await store.insertMessage(deps.db, message, () => {
    if (eventId === null) return;
    enqueueAgentEventInWrite(deps, party.agent.id, AGENT_EVENTS.messageReceived, messageEventPayload(party.conversation, message), { eventId });
  });
  return { message: messageView({ ...message, orderId: null }) };
}

/** provider_list_conversations: conversations of the agents `ownerWallet` owns (or of one), most recently active first. */
export async function listProviderConversations(
  deps: Deps,
  ownerWallet: string,
  input: { agentId?: string | undefined; limit?: number | undefined; offset?: number | undefined },
): Promise<{ conversations: ConversationSummary[]; total: number; limit: number; offset: number }> {
  const { limit, offset } = requirePage(input, CONVERSATION_PAGE);
  if (input.agentId !== undefined) await ownedAgent(deps, ownerWallet, input.agentId);
  const { rows, total } = await store.listOwnerConversations(deps.db, ownerWallet, input.agentId ?? null, limit, offset);
  const conversations = rows.map((r) => ({
    ...conversationView(r),
    messageCount: r.messageCount,
    lastMessage:
      r.lastMessageId === null
        ? null
        : messageView({ id: r.lastMessageId, conversationId: r.id, from: r.lastMessageFrom!, text: r.lastMessageText!, orderId: r.lastMessageOrderId, createdAt: r.lastMessageCreatedAt! }),
  }));
  return { conversations, total, limit, offset };
}

/**
 * A conversation and its messages in the order they were written: after the message `since` when given
 * (so a poller passes the last id it saw), at most `limit` (default 100, ≤ 200), `hasMore` when more
 * follow. Either party may read it; a stranger gets NOT_FOUND. The orders module adds the orders.
 */
export async function getConversation(
  deps: Deps,
  wallet: string,
  conversationId: string,
  input: { since?: string | undefined; limit?: number | undefined } = {},
): Promise<{ conversation: Conversation; messages: Message[]; hasMore: boolean; side: Side }> {
  const { limit } = requirePage({ limit: input.limit }, MESSAGE_PAGE);
  const party = await conversationParty(deps, wallet, conversationId);
  let afterSeq = 0;
  if (input.since !== undefined) {
    const seq = await store.findMessageSeq(deps.db, conversationId, input.since);
    if (seq === null) throw invalidField("since", "not a message of this conversation");
    afterSeq = seq;
  }
  const rows = await store.listMessages(deps.db, conversationId, afterSeq, limit + 1);
  // Read after the messages, so lastMessageAt covers every message returned.
  const conversation = (await store.findConversation(deps.db, conversationId)) ?? party.conversation;
  // At most PAGE_MAX_CHARS of messages (lib/fit.ts): 200 of 4,000 characters each, escaped, are MBs.
  const messages = headWithin(rows.slice(0, limit).map(messageView));
  return { conversation: conversationView(conversation), messages, hasMore: rows.length > messages.length, side: party.side };
}

/**
 * A message about an order written inside the caller's write, so it commits with the change it reports:
 * the service's own (`system`, the default), or what the provider sent with it (its delivery's message).
 * SYNCHRONOUS. The text is trimmed and cut to 4000 characters.
 */
export function addOrderMessageInWrite(
  deps: Deps,
  input: { conversationId: string; text: string; orderId?: string | null; from?: "system" | "provider" },
): Message {
  const row = {
    id: newId("msg", deps.random),
    conversationId: input.conversationId,
    from: input.from ?? "system",
    text: capMessageText(input.text.trim()) || "(no text)",
    orderId: input.orderId ?? null,
    createdAt: deps.clock.now(),
  };
  store.insertMessageInWrite(deps.db, row);
  return messageView(row);
}

/**
 * A synchronous `{"reply": …}` to the notification `eventId` sent to `agentId`, as the write that records
 * it as the provider's message in that conversation: the delivery worker runs it inside the write of the
 * delivery's attempt. Recorded once (a second answer to the same event writes nothing). Null when there
 * is nothing to record: empty text, an event about no consumer message of this agent, or an archived
 * conversation.
 */
export async function agentReplyWrite(deps: Deps, input: { eventId: string; agentId: string; text: string }): Promise<(() => void) | null> {
  // From the agent's server: its control characters (an escape sequence, a NUL) are dropped, as a user's are refused.
  const text = capMessageText(withoutControlCharacters(input.text).trim());
  if (text.length === 0) return null;
  const answered = await store.findMessageByEvent(deps.db, input.eventId);
  if (answered === null || answered.from !== "consumer") return null;
  const conversation = await store.findConversation(deps.db, answered.conversationId);
  if (conversation === null || conversation.agentId !== input.agentId || conversation.status !== "active") return null;
  const row = { id: newId("msg", deps.random), conversationId: conversation.id, from: "provider" as const, text, orderId: null, replyTo: answered.id, createdAt: deps.clock.now() };
  return () => {
    // null: the message was answered already (a duplicate delivery); nothing is written
    if (store.insertMessageInWrite(deps.db, row) === null) return;
    deps.log.info("marketplace agent replied synchronously", { conversationId: conversation.id, agentId: input.agentId, messageId: row.id });
  };
}
