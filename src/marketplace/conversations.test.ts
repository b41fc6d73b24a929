// Conversations in-process: start and send with their notifications in the same write, who may do what
// (stranger NOT_FOUND, wrong side FORBIDDEN), reading with `since`, the provider's list, system messages.
import { describe, expect, test } from "bun:test";
import { encodeBase58 } from "../lib/encoding.ts";
import { cryptoRandom } from "../lib/ids.ts";
import * as webhooksStore from "../webhooks/store.ts";
import { eventBody } from "../webhooks/outbox.ts";
import { codeOf } from "../../test/helpers/errors.ts";
import { testDeps } from "../../test/helpers/deps.ts";
import type { Deps } from "../deps.ts";
import { registerAgent, updateAgent } from "./agents.ts";
import {
  addOrderMessageInWrite,
  capMessageText,
  getConversation,
  listProviderConversations,
  sendMessage,
  startConversation,
} from "./conversations.ts";

const wallet = () => encodeBase58(cryptoRandom(32));

async function setup() {
  const { deps, clock, db } = await testDeps();
  const provider = wallet();
  const consumer = wallet();
  const agent = await registerAgent(deps, provider, { endpoint: "https://agent.example/hook", profile: { name: "Agent", basePrice: "1" } });
  return { deps, clock, db, provider, consumer, agent };
}

/** The outbox events of the agent, oldest first, with their bodies parsed. */
async function agentEvents(deps: Deps, agentId: string) {
  const { rows } = await webhooksStore.listDeliveries(deps.db, "agent", agentId, 100, 0);
  const events = await Promise.all(rows.reverse().map(async (d) => ({ row: await webhooksStore.findEvent(deps.db, d.eventId), body: await eventBody(deps, d.eventId) })));
  return events.map((e) => ({ id: e.row!.id, type: e.row!.type, body: JSON.parse(e.body!) as Record<string, unknown> }));
}

describe("start and send", () => {
  test("a conversation starts with the consumer's message and the agent hears conversation.started, then message.received", async () => {
    const { deps, clock, provider, consumer, agent } = await setup();
    const started = await startConversation(deps, consumer, agent.agentId, "  Hello there  ");
    expect(started.conversation).toEqual({
      conversationId: started.conversation.conversationId,
      agentId: agent.agentId,
      consumerWallet: consumer,
      status: "active",
      createdAt: new Date(clock.now()).toISOString(),
      lastMessageAt: new Date(clock.now()).toISOString(),
    });
    expect(started.conversation.conversationId).toMatch(/^conv_/);
    expect(started.message).toMatchObject({ from: "consumer", text: "Hello there", conversationId: started.conversation.conversationId });
    expect(started.message.messageId).toMatch(/^msg_/);
    expect(started.message.orderId).toBeNull(); // present on every message, null when it is about no order
    const conversationId = started.conversation.conversationId;

    clock.advance(1000);
    const sent = await sendMessage(deps, consumer, "consumer", conversationId, "Second");
    clock.advance(1000);
    const answer = await sendMessage(deps, provider, "provider", conversationId, "Answer");

    const events = await agentEvents(deps, agent.agentId);
    expect(events.map((e) => e.type)).toEqual(["conversation.started", "message.received"]); // not the provider's own message
    expect(events[0]!.body).toEqual({
      id: events[0]!.id,
      type: "conversation.started",
      conversationId,
      agentId: agent.agentId,
      consumerWallet: consumer,
      messageId: started.message.messageId,
      from: "consumer",
      text: "Hello there",
      createdAt: started.message.createdAt,
      timestamp: started.message.createdAt,
      network: "localnet",
    });
    expect(events[1]!.body).toMatchObject({ messageId: sent.message.messageId, text: "Second" });

    const read = await getConversation(deps, consumer, conversationId);
    expect(read.messages.map((m) => [m.from, m.text])).toEqual([
      ["consumer", "Hello there"],
      ["consumer", "Second"],
      ["provider", "Answer"],
    ]);
    expect(read.conversation.lastMessageAt).toBe(answer.message.createdAt);
    expect(read).toMatchObject({ hasMore: false, side: "consumer" });
    expect((await getConversation(deps, provider, conversationId)).side).toBe("provider");
  });

  test("a stranger gets NOT_FOUND; the wrong side FORBIDDEN; own, paused and unknown agents are refused", async () => {
    const { deps, provider, consumer, agent } = await setup();
    const { conversation } = await startConversation(deps, consumer, agent.agentId, "hi");
    const id = conversation.conversationId;
    const stranger = wallet();
    expect(await codeOf(sendMessage(deps, stranger, "consumer", id, "x"))).toBe("NOT_FOUND");
    expect(await codeOf(sendMessage(deps, stranger, "provider", id, "x"))).toBe("NOT_FOUND");
    expect(await codeOf(getConversation(deps, stranger, id))).toBe("NOT_FOUND");
    expect(await codeOf(getConversation(deps, consumer, "conv_nope"))).toBe("NOT_FOUND");
    expect(await codeOf(sendMessage(deps, provider, "consumer", id, "x"))).toBe("FORBIDDEN");
    expect(await codeOf(sendMessage(deps, consumer, "provider", id, "x"))).toBe("FORBIDDEN");
    expect(await codeOf(sendMessage(deps, consumer, "consumer", id, "   "))).toBe("VALIDATION_ERROR");
    expect(await codeOf(sendMessage(deps, consumer, "consumer", id, "x".repeat(4001)))).toBe("VALIDATION_ERROR");
    expect(await codeOf(sendMessage(deps, consumer, "consumer", id, "x".repeat(4000)))).toBe("OK");
    // Characters are code points, as the tool's schema (maxLength) counts them: an emoji is one.
    expect(await codeOf(sendMessage(deps, consumer, "consumer", id, "😀".repeat(4000)))).toBe("OK");
    expect(await codeOf(sendMessage(deps, consumer, "consumer", id, "😀".repeat(4001)))).toBe("VALIDATION_ERROR");

    expect(await codeOf(startConversation(deps, provider, agent.agentId, "me"))).toBe("FORBIDDEN");
    expect(await codeOf(startConversation(deps, consumer, "agt_nope", "hi"))).toBe("NOT_FOUND");
    await updateAgent(deps, provider, agent.agentId, { status: "paused" });
    expect(await codeOf(startConversation(deps, consumer, agent.agentId, "hi"))).toBe("INVALID_STATE");
    // A paused agent keeps its conversations.
    expect(await codeOf(sendMessage(deps, consumer, "consumer", id, "still there?"))).toBe("OK");
  });
});

describe("reading", () => {
  test("since pages exactly by the order of writing, also when times tie; limit and hasMore", async () => {
    const { deps, provider, consumer, agent } = await setup();
    const { conversation, message } = await startConversation(deps, consumer, agent.agentId, "m0");
    const id = conversation.conversationId;
    const ids = [message.messageId];
    for (let i = 1; i < 7; i++) ids.push((await sendMessage(deps, i % 2 ? provider : consumer, i % 2 ? "provider" : "consumer", id, `m${i}`)).message.messageId);

    const texts = (r: { messages: { text: string }[] }) => r.messages.map((m) => m.text);
    expect(texts(await getConversation(deps, consumer, id, { since: ids[2] }))).toEqual(["m3", "m4", "m5", "m6"]);
    expect(texts(await getConversation(deps, provider, id, { since: ids[6] }))).toEqual([]);
    const first = await getConversation(deps, consumer, id, { limit: 3 });
    expect([texts(first), first.hasMore]).toEqual([["m0", "m1", "m2"], true]);
    const next = await getConversation(deps, consumer, id, { limit: 3, since: first.messages.at(-1)!.messageId });
    expect([texts(next), next.hasMore]).toEqual([["m3", "m4", "m5"], true]);
    const last = await getConversation(deps, consumer, id, { limit: 3, since: next.messages.at(-1)!.messageId });
    expect([texts(last), last.hasMore]).toEqual([["m6"], false]);

    const other = await startConversation(deps, consumer, agent.agentId, "elsewhere");
    expect(await codeOf(getConversation(deps, consumer, id, { since: other.message.messageId }))).toBe("VALIDATION_ERROR");
    expect(await codeOf(getConversation(deps, consumer, id, { since: "msg_nope" }))).toBe("VALIDATION_ERROR");
    expect(await codeOf(getConversation(deps, consumer, id, { limit: 201 }))).toBe("VALIDATION_ERROR");
  });

  test("the provider's list: its agents' conversations, latest activity first, with the last message", async () => {
    const { deps, clock, provider, consumer, agent } = await setup();
    const second = await registerAgent(deps, provider, { endpoint: "https://agent.example/2", profile: { name: "Second", basePrice: "1" } });
    const a = await startConversation(deps, consumer, agent.agentId, "to the first");
    clock.advance(10);
    const b = await startConversation(deps, wallet(), second.agentId, "to the second");
    clock.advance(10);
    await sendMessage(deps, provider, "provider", a.conversation.conversationId, "reply on a");
    // Someone else's agent's conversation is not listed.
    const foreign = await registerAgent(deps, wallet(), { endpoint: "https://other.example/", profile: { name: "Other", basePrice: "1" } });
    await startConversation(deps, consumer, foreign.agentId, "not yours");

    const all = await listProviderConversations(deps, provider, {});
    expect(all).toMatchObject({ total: 2, limit: 20, offset: 0 });
    expect(all.conversations.map((c) => c.conversationId)).toEqual([a.conversation.conversationId, b.conversation.conversationId]);
    expect(all.conversations[0]).toMatchObject({ messageCount: 2, lastMessage: { from: "provider", text: "reply on a" } });
    const one = await listProviderConversations(deps, provider, { agentId: second.agentId });
    expect(one.conversations.map((c) => c.conversationId)).toEqual([b.conversation.conversationId]);
    expect(one.total).toBe(1); // total counts that agent's conversations, as the page does: not all of the owner's
    expect((await listProviderConversations(deps, provider, { limit: 1, offset: 1 })).conversations.map((c) => c.conversationId)).toEqual([
      b.conversation.conversationId,
    ]);
    expect(await codeOf(listProviderConversations(deps, provider, { agentId: foreign.agentId }))).toBe("NOT_FOUND");
    expect(await codeOf(listProviderConversations(deps, provider, { limit: 0 }))).toBe("VALIDATION_ERROR");
    expect((await listProviderConversations(deps, consumer, {})).total).toBe(0);
  });
});

describe("lastMessageAt", () => {
  test("never moves back: a message written after the wall clock was stepped back leaves it at the latest message's time", async () => {
    const { deps, clock, provider, consumer, agent } = await setup();
    const { conversation } = await startConversation(deps, consumer, agent.agentId, "first");
    const latest = clock.now();
    clock.set(latest - 60_000); // an NTP correction
    await sendMessage(deps, provider, "provider", conversation.conversationId, "after the step");
    const read = await getConversation(deps, consumer, conversation.conversationId);
    expect(read.conversation.lastMessageAt).toBe(new Date(latest).toISOString());
    expect((await listProviderConversations(deps, provider, {})).conversations[0]!.lastMessageAt).toBe(new Date(latest).toISOString());
  });
});

describe("system messages", () => {
  test("are written inside the caller's write with their order id, and roll back with it", async () => {
    const { deps, consumer, agent } = await setup();
    const { conversation } = await startConversation(deps, consumer, agent.agentId, "hi");
    const id = conversation.conversationId;
    const written = await deps.db.write(() => addOrderMessageInWrite(deps, { conversationId: id, text: "Order proposed", orderId: "ord_1" }));
    expect(written).toMatchObject({ from: "system", text: "Order proposed", orderId: "ord_1" });
    await expect(
      deps.db.write(() => {
        addOrderMessageInWrite(deps, { conversationId: id, text: "lost" });
        throw new Error("the order's change failed");
      }),
    ).rejects.toThrow("the order's change failed");
    const read = await getConversation(deps, consumer, id);
    expect(read.messages.map((m) => m.text)).toEqual(["hi", "Order proposed"]);
    expect(read.messages[1]).toMatchObject({ orderId: "ord_1" });
  });

  test("text is cut to 4000 characters (code points) without splitting a surrogate pair", () => {
    expect(capMessageText("a".repeat(4001))).toHaveLength(4000);
    expect(capMessageText("a".repeat(3999) + "😀b")).toBe("a".repeat(3999) + "😀");
    expect(capMessageText("😀".repeat(4001))).toBe("😀".repeat(4000));
    expect(capMessageText("short")).toBe("short");
  });
});

/** What the MCP registry hands a tool called by `wallet`'s session from `ip`. */
function toolContext(deps: Deps, wallet: string, ip: string) {
  return {
    deps,
    caller: { kind: "wallet" as const, walletAddress: wallet, sessionId: "s", jti: "j", token: null, issuedAtS: 0, expiresAtS: 2_000_000_000, source: "binding" as const },
    session: { id: null, bind: async () => undefined, unbind: async () => undefined },
    client: { ip, userAgent: "t" },
  };
}

test("messages are limited per wallet (60 a minute) and per client network (300): each is a row kept and an event posted", async () => {
  const { deps, clock } = await testDeps({ AUTH_RATE_LIMIT: "on" });
  const { createToolRegistry } = await import("../mcp/tools.ts");
  const registry = createToolRegistry(deps);
  const owner = encodeBase58(cryptoRandom(32));
  const agent = await registerAgent(deps, owner, { endpoint: "https://agent.example/hook", profile: { name: "Agent", basePrice: "1" } });
  const as = (wallet: string, ip: string) => toolContext(deps, wallet, ip);
  const consumer = encodeBase58(cryptoRandom(32));
  const started = await registry.call(as(consumer, "192.0.2.1"), "consumer_start_conversation", { agentId: agent.agentId, message: "hello" });
  if (!started.success) throw new Error(JSON.stringify(started));
  const conversationId = (started.data as { conversation: { conversationId: string } }).conversation.conversationId;
  for (let i = 1; i < 60; i++) expect((await registry.call(as(consumer, "192.0.2.1"), "consumer_send_message", { conversationId, message: `m${i}` })).success).toBe(true);
  const limited = await registry.call(as(consumer, "192.0.2.1"), "consumer_send_message", { conversationId, message: "one too many" });
  expect(limited).toMatchObject({ success: false, code: "RATE_LIMITED" });
  // The agent's owner answering is its own wallet's count; a minute later the consumer may write again.
  expect((await registry.call(as(owner, "198.51.100.1"), "provider_send_message", { conversationId, message: "hi" })).success).toBe(true);
  clock.advance(60_000);
  expect((await registry.call(as(consumer, "192.0.2.1"), "consumer_send_message", { conversationId, message: "again" })).success).toBe(true);
  // Many wallets from one network: 300 a minute in all.
  let refused = 0;
  for (let i = 0; i < 320; i++) {
    const r = await registry.call(as(encodeBase58(cryptoRandom(32)), "203.0.113.7"), "consumer_start_conversation", { agentId: agent.agentId, message: "hi" });
    if (!r.success && r.code === "RATE_LIMITED") refused++;
  }
  expect(refused).toBe(20);
  // A proposal writes a message into the conversation: it counts as one of its provider's.
  clock.advance(60_000);
  const propose = () => registry.call(as(owner, "198.51.100.1"), "provider_create_order", { conversationId, description: "work", price: "1", deliveryTime: 60 });
  for (let i = 0; i < 60; i++) expect((await registry.call(as(owner, "198.51.100.1"), "provider_send_message", { conversationId, message: `p${i}` })).success).toBe(true);
  expect(await propose()).toMatchObject({ success: false, code: "RATE_LIMITED" });
});

test("agent searches are limited per wallet (60 a minute) and per client network (120): a page may be ~1 MB", async () => {
  const { deps, clock } = await testDeps({ AUTH_RATE_LIMIT: "on" });
  const { createToolRegistry } = await import("../mcp/tools.ts");
  const registry = createToolRegistry(deps);
  const search = (wallet: string, ip: string) => registry.call(toolContext(deps, wallet, ip), "consumer_search_agents", { query: "translation" });
  const one = encodeBase58(cryptoRandom(32));
  for (let i = 0; i < 60; i++) expect([i, (await search(one, "192.0.2.1")).success]).toEqual([i, true]);
  expect(await search(one, "192.0.2.1")).toMatchObject({ success: false, code: "RATE_LIMITED" });
  expect((await search(encodeBase58(cryptoRandom(32)), "192.0.2.1")).success).toBe(true); // another wallet of that network
  clock.advance(60_000);
  expect((await search(one, "192.0.2.1")).success).toBe(true);
  // Many wallets from one network: 120 a minute in all.
  clock.advance(60_000);
  let refused = 0;
  for (let i = 0; i < 130; i++) if ((await search(encodeBase58(cryptoRandom(32)), "203.0.113.7")).success === false) refused++;
  expect(refused).toBe(10);
});

test("agent searches from one IPv6 /64 share its network's limit (120 a minute), whatever the addresses inside it", async () => {
  const { deps } = await testDeps({ AUTH_RATE_LIMIT: "on" });
  const { createToolRegistry } = await import("../mcp/tools.ts");
  const registry = createToolRegistry(deps);
  // One client holds a whole /64: a new address (and wallet) for each call must not buy a new budget.
  let refused = 0;
  for (let i = 1; i <= 130; i++) {
    const r = await registry.call(toolContext(deps, encodeBase58(cryptoRandom(32)), `2001:db8:1:2::${i.toString(16)}`), "consumer_search_agents", { query: "translation" });
    if (!r.success && r.code === "RATE_LIMITED") refused++;
  }
  expect(refused).toBe(10);
  // Another /64 has its own budget.
  expect((await registry.call(toolContext(deps, encodeBase58(cryptoRandom(32)), "2001:db8:1:3::1"), "consumer_search_agents", { query: "translation" })).success).toBe(true);
});

describe("pages bounded by size", () => {
  test("a conversation's page stops at about 1 MB of messages, says hasMore, and the next page goes on from the last one", async () => {
    const { deps, consumer, agent } = await setup();
    const text = '"'.repeat(4000); // 8,000 characters once escaped
    const { conversation } = await startConversation(deps, consumer, agent.agentId, text);
    for (let i = 1; i < 200; i++) await sendMessage(deps, consumer, "consumer", conversation.conversationId, text);
    const first = await getConversation(deps, consumer, conversation.conversationId, { limit: 200 });
    expect(first.messages.length).toBeLessThan(200);
    expect(JSON.stringify(first.messages).length).toBeLessThanOrEqual(1_000_000);
    expect(first.hasMore).toBe(true);
    const rest = await getConversation(deps, consumer, conversation.conversationId, { limit: 200, since: first.messages.at(-1)!.messageId });
    expect(first.messages.length + rest.messages.length).toBe(200);
    expect(rest.hasMore).toBe(false);
  });
});
