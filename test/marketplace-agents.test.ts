// Marketplace agents and conversations against the real server, through the MCP SDK's own Client: register
// (secret shown once), update, search, get; a conversation with a provider endpoint that verifies every
// notification with the npm `standardwebhooks` package and replies synchronously; who may do what.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { verifyingReceiver, type Receiver } from "./helpers/receiver.ts";
import { connectMcp, type Envelope, type McpTestClient } from "./helpers/mcp.ts";
import { startTestServer, type TestServer } from "./helpers/server.ts";
import type { Json } from "./helpers/wallet.ts";
import { until } from "./helpers/until.ts";

const MARKETPLACE_TOOLS = [
  "provider_register", "provider_update", "provider_list_conversations", "provider_send_message",
  "consumer_search_agents", "consumer_get_agent", "consumer_start_conversation", "consumer_send_message", "consumer_get_conversation",
];

type Party = McpTestClient & { address: string; token: string };

let server: TestServer;
const clients: McpTestClient[] = [];
const receivers: Receiver[] = [];
let uaCount = 0;

beforeAll(async () => {
  server = await startTestServer({ ALLOW_PRIVATE_NETWORK_TARGETS: "true", AUTH_RATE_LIMIT: "off" });
});
afterAll(async () => {
  await Promise.all(clients.map((c) => c.client.close()));
  for (const r of receivers) await r.stop();
  await server?.dispose();
});

/** An MCP client with its own User-Agent (fingerprint restore is on for localnet) and a new custodial wallet bound. */
async function party(what: string): Promise<Party> {
  const mcp = await connectMcp(server.url, `walletgate-test/market-${what}-${++uaCount}`, undefined, "marketplace-test");
  clients.push(mcp);
  const created = await mcp.ok("wallet_create", { airdropSol: 0 });
  return Object.assign(mcp, { address: created.address as string, token: created.sessionToken as string });
}

/** Unique words, so tests sharing the server do not see each other's agents in search. */
const unique = () => `w${crypto.randomUUID().replaceAll("-", "").slice(0, 12)}`;

function profile(overrides: Json = {}) {
  return { name: "Test agent", tagline: "Does things", description: "A test agent", categories: ["Testing"], basePrice: "10", ...overrides };
}


/** The plain JSON envelope over HTTP, for the status codes of the error table. */
async function plain(tool: string, params: Json, token: string): Promise<{ status: number; body: Envelope & Json }> {
  const res = await fetch(`${server.url}/mcp`, {
    method: "POST",
    headers: { "content-type": "application/json", authorization: `Bearer ${token}`, "user-agent": "walletgate-test/plain" },
    body: JSON.stringify({ tool, params }),
  });
  return { status: res.status, body: (await res.json()) as Envelope & Json };
}

type Notification = { verified: boolean; body: Json };

/** A provider's endpoint on 127.0.0.1 that verifies every notification with its secret and replies to chat events. */
function providerEndpoint(reply: (body: Json) => string | null) {
  const endpoint = verifyingReceiver({ path: "/agent", answer: (delivery) => {
    const answer = reply(delivery.body);
    return answer === null ? new Response(null, { status: 204 }) : Response.json({ reply: answer });
  } });
  receivers.push(endpoint);
  const received = endpoint.received as unknown as Notification[];
  return { url: endpoint.url, received, setSecret: endpoint.setSecret };
}

describe("tools/list", () => {
  test("lists the marketplace tools with descriptions and described, object-typed inputs", async () => {
    const mcp = await connectMcp(server.url, `walletgate-test/market-list-${++uaCount}`);
    clients.push(mcp);
    const { tools } = await mcp.client.listTools();
    const byName = new Map(tools.map((t) => [t.name, t]));
    for (const name of MARKETPLACE_TOOLS) {
      const tool = byName.get(name);
      expect({ name, listed: tool !== undefined }).toEqual({ name, listed: true });
      expect(tool!.description!.length).toBeGreaterThan(30);
      expect(tool!.inputSchema.type).toBe("object");
      for (const [param, schema] of Object.entries(tool!.inputSchema.properties ?? {})) {
        expect({ name, param, description: typeof (schema as Json).description }).toEqual({ name, param, description: "string" });
      }
    }
    // Without a wallet every marketplace tool answers UNAUTHENTICATED.
    expect(await mcp.call("consumer_search_agents", {})).toMatchObject({ success: false, code: "UNAUTHENTICATED" });
  });
});

describe("agents", () => {
  test("register shows the webhookSecret once; update, get; bad endpoints and profiles are VALIDATION_ERROR", async () => {
    const provider = await party("provider");
    const other = await party("other");
    const answer = await provider.ok("provider_register", {
      endpoint: "https://agent.example/hooks/walletgate",
      profile: profile({ name: "Lingua", categories: ["Translation", "Legal"], basePrice: 12.5 }),
      services: [{ title: "One page", description: "Up to 300 words", price: "4.5", deliveryTime: 120 }],
    });
    expect(Object.keys(answer).sort()).toEqual(["agent", "webhookSecret"]);
    const registered = answer.agent as Json;
    const agentId = registered.agentId as string;
    const secret = answer.webhookSecret as string;
    expect(agentId).toMatch(/^agt_/);
    expect(secret).toMatch(/^whsec_/);
    expect(Buffer.from(secret.slice("whsec_".length), "base64")).toHaveLength(32);
    expect(registered).toMatchObject({
      ownerWallet: provider.address,
      endpoint: "https://agent.example/hooks/walletgate",
      name: "Lingua",
      categories: ["Translation", "Legal"],
      basePrice: "12.5",
      services: [{ title: "One page", description: "Up to 300 words", price: "4.5", deliveryTime: 120 }],
      status: "active",
      rating: null,
      ratingCount: 0,
      completedOrders: 0,
    });
    expect(registered.services[0].serviceId).toMatch(/^svc_/);

    // Never again: not to the owner, not to anyone else, not after an update.
    const mine = (await provider.ok("consumer_get_agent", { agentId })).agent;
    const theirs = (await other.ok("consumer_get_agent", { agentId })).agent;
    const updated = (
      await provider.ok("provider_update", {
        agentId,
        profile: { tagline: "Legal translations, fast" },
        services: [{ serviceId: registered.services[0].serviceId, title: "One page", price: "5", deliveryTime: 90 }],
      })
    ).agent;
    for (const view of [mine, theirs, updated]) expect(JSON.stringify(view)).not.toContain("whsec_");
    expect(mine.endpoint).toBe("https://agent.example/hooks/walletgate");
    expect(theirs).not.toHaveProperty("endpoint"); // consumers talk through the service, not to the endpoint
    expect(theirs).toMatchObject({ agentId, ownerWallet: provider.address, name: "Lingua" });
    expect(updated).toMatchObject({ tagline: "Legal translations, fast", services: [{ serviceId: registered.services[0].serviceId, price: "5", deliveryTime: 90 }] });

    // Only the owner updates; anyone else is told there is no such agent.
    expect(await other.call("provider_update", { agentId, status: "paused" })).toMatchObject({ success: false, code: "NOT_FOUND" });
    expect(await other.call("consumer_get_agent", { agentId: "agt_unknown" })).toMatchObject({ success: false, code: "NOT_FOUND" });
    expect(await provider.ok("provider_update", { agentId, status: "paused" })).toMatchObject({ agent: { status: "paused" } });
    expect(await other.ok("consumer_get_agent", { agentId })).toMatchObject({ agent: { status: "paused" } });

    for (const endpoint of ["ftp://agent.example/hook", "agent.example/hook", "https://user:secret@agent.example/", "https://agent.example/#frag", " "]) {
      const refused = await provider.call("provider_register", { endpoint, profile: profile() });
      expect({ endpoint, code: refused.code, field: refused.details?.fields?.[0]?.field }).toEqual({ endpoint, code: "VALIDATION_ERROR", field: "endpoint" });
    }
    expect(await provider.call("provider_update", { agentId, endpoint: "mailto:me@example.com" })).toMatchObject({ code: "VALIDATION_ERROR" });
    for (const bad of [
      { endpoint: "https://agent.example/", profile: profile({ basePrice: "0" }) },
      { endpoint: "https://agent.example/", profile: profile({ basePrice: "1.0000001" }) },
      { endpoint: "https://agent.example/", profile: profile({ name: "" }) },
      { endpoint: "https://agent.example/", profile: { basePrice: "1" } },
      { endpoint: "https://agent.example/", profile: profile(), services: [{ title: "x", price: "1", deliveryTime: 0 }] },
      { endpoint: "https://agent.example/", profile: profile({ unknown: 1 }) },
    ]) {
      expect(await provider.call("provider_register", bad)).toMatchObject({ success: false, code: "VALIDATION_ERROR" });
    }
    // A category with a control character, as any free text: refused naming the field.
    expect(await provider.call("provider_register", { endpoint: "https://agent.example/", profile: profile({ categories: ["ok", "a\u0000"] }) })).toMatchObject({
      success: false,
      code: "VALIDATION_ERROR",
      details: { fields: [{ field: "profile.categories" }] },
    });
    expect((await plain("provider_register", { endpoint: "ftp://x", profile: profile() }, provider.token)).status).toBe(400);
  }, 60_000);

  test("a wallet owns at most 20 agents: the 21st registration is INVALID_STATE", async () => {
    const owner = await party("many");
    for (let i = 0; i < 20; i++) {
      const made = await owner.call("provider_register", { endpoint: "https://agent.example/hook", profile: profile({ name: `Agent ${i}` }) });
      expect([i, made.success]).toEqual([i, true]);
    }
    const refused = await owner.call("provider_register", { endpoint: "https://agent.example/hook", profile: profile({ name: "One more" }) });
    expect(refused).toMatchObject({ success: false, code: "INVALID_STATE", error: expect.any(String) });
    const other = await party("another"); // another wallet is not held back
    expect(await other.call("provider_register", { endpoint: "https://agent.example/hook", profile: profile() })).toMatchObject({ success: true });
  });

  test("search: category ignoring case, maxPrice, every query word, ordering and paging with total", async () => {
    const provider = await party("searcher-provider");
    const consumer = await party("searcher");
    const category = unique();
    const word = unique();
    // "Oldest first" orders by creation time, then by id: each registration waits for the clock to pass the
    // last one's millisecond, so that the order tested is the registrations' (two in one millisecond go by id).
    let lastCreatedAt = 0;
    const register = async (name: string, extra: Json) => {
      while (Date.now() <= lastCreatedAt) await Bun.sleep(1);
      const agent = (await provider.ok("provider_register", { endpoint: "https://agent.example/", profile: profile({ name, categories: [category.toUpperCase()], ...extra }) }))
        .agent as Json;
      lastCreatedAt = Date.parse(agent.createdAt as string);
      return agent.agentId as string;
    };
    const first = await register(`First ${word}`, { basePrice: "30", description: "contracts and leases" });
    const second = await register("Second", { basePrice: "5", tagline: `cheap ${word} help` });
    const third = await register("Third", { basePrice: "15", description: `${word} for contracts`, categories: [category, "Other"] });
    const paused = await register(`Paused ${word}`, { basePrice: "1" });
    await provider.ok("provider_update", { agentId: paused, status: "paused" });

    const ids = async (params: Json) => {
      const data = await consumer.ok("consumer_search_agents", params);
      return (data.agents as Json[]).map((a) => a.agentId);
    };
    // Unrated agents with no completed orders: oldest first.
    expect(await ids({ category })).toEqual([first, second, third]);
    expect(await ids({ category: category.toUpperCase() })).toEqual([first, second, third]);
    expect(await ids({ category: category.slice(0, -1) })).toEqual([]);
    expect(await ids({ category, maxPrice: 15 })).toEqual([second, third]);
    expect(await ids({ category, maxPrice: "4.99" })).toEqual([]);
    expect(await ids({ query: word })).toEqual([first, second, third]);
    expect(await ids({ query: `${word.toUpperCase()} contracts` })).toEqual([first, third]);
    expect(await ids({ query: `${word} contracts`, maxPrice: "20" })).toEqual([third]);
    expect(await ids({ query: `"${word}" OR NEAR(` })).toEqual([]); // operators are words: "OR" and "NEAR(" match nothing

    const page = await consumer.ok("consumer_search_agents", { category, limit: 2, offset: 1 });
    expect(page).toMatchObject({ total: 3, limit: 2, offset: 1 });
    expect(page.agents.map((a: Json) => a.agentId)).toEqual([second, third]);
    expect(page.agents[0]).toMatchObject({ name: "Second", basePrice: "5", currency: "USDC", rating: null, ratingCount: 0, completedOrders: 0 });
    expect(page.agents[0]).not.toHaveProperty("endpoint");
    expect(await consumer.ok("consumer_search_agents", { category })).toMatchObject({ total: 3, limit: 20, offset: 0 });
    for (const bad of [{ limit: 0 }, { limit: 101 }, { offset: -1 }, { maxPrice: "-1" }, { maxPrice: "1.0000001" }]) {
      expect(await consumer.call("consumer_search_agents", bad)).toMatchObject({ success: false, code: "VALIDATION_ERROR" });
    }
  }, 60_000);
});

describe("conversations", () => {
  test("the provider's endpoint verifies every notification and replies synchronously; messages both ways; since", async () => {
    const provider = await party("chat-provider");
    const consumer = await party("chat-consumer");
    const stranger = await party("chat-stranger");
    const endpoint = providerEndpoint((body) => (body.type === "conversation.started" || body.type === "message.received" ? `You said: ${body.text}` : null));
    const registered = await provider.ok("provider_register", { endpoint: endpoint.url, profile: profile({ name: "Echo" }) });
    endpoint.setSecret(registered.webhookSecret);
    const agentId = registered.agent.agentId as string;

    const started = await consumer.ok("consumer_start_conversation", { agentId, message: "Hello, agent" });
    const conversationId = started.conversation.conversationId as string;
    expect(conversationId).toMatch(/^conv_/);
    expect(started.conversation).toMatchObject({ agentId, consumerWallet: consumer.address, status: "active" });
    expect(started.message).toMatchObject({ from: "consumer", text: "Hello, agent", conversationId });

    const get = (who: Party, params: Json = {}) => who.ok("consumer_get_conversation", { conversationId, ...params });
    const withReply = await until(async () => {
      const data = await get(consumer);
      return data.messages.length >= 2 ? data : undefined;
    });
    expect(withReply.messages.map((m: Json) => [m.from, m.text])).toEqual([
      ["consumer", "Hello, agent"],
      ["provider", "You said: Hello, agent"],
    ]);
    expect(withReply.orders).toEqual([]);
    expect(withReply.hasMore).toBe(false);
    expect(endpoint.received[0]).toMatchObject({
      verified: true,
      body: { type: "conversation.started", conversationId, agentId, consumerWallet: consumer.address, messageId: started.message.messageId, text: "Hello, agent", network: "localnet" },
    });
    expect(endpoint.received[0]!.body.timestamp).toBe(endpoint.received[0]!.body.createdAt);
    expect(endpoint.received[0]!.body.id).toMatch(/^evt_/);

    const seen = withReply.messages.at(-1).messageId as string;
    await consumer.ok("consumer_send_message", { conversationId, message: "How much for a page?" });
    const afterSeen = await until(async () => {
      const data = await get(consumer, { since: seen });
      return data.messages.length >= 2 ? data : undefined;
    });
    expect(afterSeen.messages.map((m: Json) => [m.from, m.text])).toEqual([
      ["consumer", "How much for a page?"],
      ["provider", "You said: How much for a page?"],
    ]);
    expect(endpoint.received.map((n) => [n.body.type, n.verified])).toEqual([
      ["conversation.started", true],
      ["message.received", true],
    ]);

    // The provider polls and answers with the tools as well.
    const listed = await provider.ok("provider_list_conversations", {});
    expect(listed).toMatchObject({ total: 1, limit: 20, offset: 0 });
    expect(listed.conversations[0]).toMatchObject({ conversationId, agentId, consumerWallet: consumer.address, messageCount: 4, lastMessage: { from: "provider" } });
    expect(await provider.ok("provider_list_conversations", { agentId })).toMatchObject({ total: 1 });
    const sent = await provider.ok("provider_send_message", { conversationId, message: "A page is 5 USDC." });
    expect(sent.message).toMatchObject({ from: "provider", text: "A page is 5 USDC." });
    const latest = await get(consumer, { since: afterSeen.messages.at(-1).messageId });
    expect(latest.messages.map((m: Json) => m.text)).toEqual(["A page is 5 USDC."]);
    expect((await get(provider)).messages).toHaveLength(5); // the provider reads the conversation too
    expect((await get(consumer, { limit: 2 })).hasMore).toBe(true);
    expect(endpoint.received).toHaveLength(2); // the provider's own messages are not sent to it

    // A stranger never learns the conversation exists; a party using the other side's tool is FORBIDDEN.
    for (const [tool, params] of [
      ["consumer_get_conversation", { conversationId }],
      ["consumer_send_message", { conversationId, message: "hi" }],
      ["provider_send_message", { conversationId, message: "hi" }],
    ] as const) {
      expect(await stranger.call(tool, params)).toMatchObject({ success: false, code: "NOT_FOUND" });
    }
    expect(await stranger.call("provider_list_conversations", { agentId })).toMatchObject({ success: false, code: "NOT_FOUND" });
    expect(await stranger.ok("provider_list_conversations", {})).toMatchObject({ total: 0, conversations: [] });
    expect(await provider.call("consumer_send_message", { conversationId, message: "hi" })).toMatchObject({ success: false, code: "FORBIDDEN" });
    expect(await consumer.call("provider_send_message", { conversationId, message: "hi" })).toMatchObject({ success: false, code: "FORBIDDEN" });
    expect(await provider.call("consumer_start_conversation", { agentId, message: "me?" })).toMatchObject({ success: false, code: "FORBIDDEN" });
    expect((await plain("consumer_send_message", { conversationId, message: "hi" }, provider.token)).status).toBe(403);
    expect((await plain("consumer_get_conversation", { conversationId }, stranger.token)).status).toBe(404);

    // Message length: 1 to 4000 characters.
    expect(await consumer.call("consumer_send_message", { conversationId, message: "x".repeat(4001) })).toMatchObject({ code: "VALIDATION_ERROR" });
    expect(await consumer.call("consumer_send_message", { conversationId, message: "" })).toMatchObject({ code: "VALIDATION_ERROR" });
    expect(await consumer.call("consumer_send_message", { conversationId, message: "   " })).toMatchObject({ code: "VALIDATION_ERROR" });
    expect(await provider.call("provider_send_message", { conversationId, message: "y".repeat(4001) })).toMatchObject({ code: "VALIDATION_ERROR" });
    expect(await consumer.call("consumer_start_conversation", { agentId, message: "z".repeat(4001) })).toMatchObject({ code: "VALIDATION_ERROR" });
    const longest = await consumer.ok("consumer_send_message", { conversationId, message: "x".repeat(4000) });
    expect(longest.message.text).toHaveLength(4000);
    // The endpoint's answer to it ("You said: " + 4000 characters) is cut to 4000 characters.
    const capped = await until(async () => {
      const data = await get(consumer, { since: longest.message.messageId });
      return data.messages.length >= 1 ? data.messages[0] : undefined;
    });
    expect([capped.from, capped.text.length, capped.text.startsWith("You said: xxx")]).toEqual(["provider", 4000, true]);
    expect(await consumer.call("consumer_get_conversation", { conversationId, since: "msg_unknown" })).toMatchObject({ code: "VALIDATION_ERROR" });

    // A paused agent takes no new conversations but keeps this one.
    await provider.ok("provider_update", { agentId, status: "paused" });
    expect(await consumer.call("consumer_start_conversation", { agentId, message: "new?" })).toMatchObject({ success: false, code: "INVALID_STATE" });
    await consumer.ok("consumer_send_message", { conversationId, message: "still there?" });
    const reply = await until(async () => {
      const data = await get(consumer, { since: capped.messageId });
      return data.messages.length >= 2 ? data : undefined;
    });
    expect(reply.messages.map((m: Json) => [m.from, m.text])).toEqual([
      ["consumer", "still there?"],
      ["provider", "You said: still there?"],
    ]);
    expect(endpoint.received.every((n) => n.verified)).toBe(true);
  }, 60_000);
});
