// Provider notifications in-process: the delivery worker with agentTargets against a local endpoint that
// verifies each request with the npm `standardwebhooks` package; synchronous replies; 410 Gone.
import { afterEach, describe, expect, setSystemTime, test } from "bun:test";
import { Webhook } from "standardwebhooks";
import { encodeBase58 } from "../lib/encoding.ts";
import { cryptoRandom } from "../lib/ids.ts";
import { createDeliveryWorker, type DeliveryWorker } from "../webhooks/outbox.ts";
import { claimDueDeliveries } from "../webhooks/store.ts";
import { testDeps } from "../../test/helpers/deps.ts";
import type { Deps } from "../deps.ts";
import { getAgent, registerAgent, updateAgent } from "./agents.ts";
import { getConversation, sendMessage, startConversation } from "./conversations.ts";
import { agentTargets, replyText } from "./notify.ts";

const wallet = () => encodeBase58(cryptoRandom(32));

const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  setSystemTime();
  for (const f of cleanups.splice(0).reverse()) await f();
});

type Seen = { type: string; verified: boolean; body: Record<string, unknown> };

/** An agent endpoint on 127.0.0.1:0 that verifies with `secret` at the deps' clock and answers with `respond`. */
function endpoint(deps: Deps, secret: () => string, respond: (body: Record<string, unknown>) => Response) {
  const seen: Seen[] = [];
  const server = Bun.serve({
    port: 0,
    hostname: "127.0.0.1",
    async fetch(req) {
      const text = await req.text();
      setSystemTime(new Date(deps.clock.now())); // standardwebhooks checks the timestamp against Date.now()
      let verified = false;
      try {
        new Webhook(secret()).verify(text, Object.fromEntries(req.headers));
        verified = true;
      } catch {
        verified = false;
      }
      setSystemTime();
      const body = JSON.parse(text) as Record<string, unknown>;
      seen.push({ type: String(body.type), verified, body });
      return respond(body);
    },
  });
  cleanups.push(() => server.stop(true));
  return { url: `http://127.0.0.1:${server.port}/agent`, seen };
}

function worker(deps: Deps): DeliveryWorker {
  const w = createDeliveryWorker(deps, { allowPrivate: true, agents: agentTargets(deps) });
  cleanups.push(() => w.stop());
  return w;
}

const json = (value: unknown) => new Response(JSON.stringify(value), { headers: { "content-type": "application/json" } });

/** The agents' endpoints here are local receivers. */
const LOCAL_AGENTS = { ALLOW_PRIVATE_NETWORK_TARGETS: "true" };

describe("agent notifications", () => {
  test("signed with the agent's secret; a 200 {reply} becomes the provider's message, once", async () => {
    const { deps } = await testDeps(LOCAL_AGENTS);
    let secret = "";
    const ep = endpoint(deps, () => secret, (body) => json({ reply: `echo: ${String(body.text)}` }));
    const agent = await registerAgent(deps, wallet(), { endpoint: ep.url, profile: { name: "Echo", basePrice: "1" } });
    secret = agent.webhookSecret;
    const consumer = wallet();
    const { conversation } = await startConversation(deps, consumer, agent.agentId, "hello");
    const w = worker(deps);
    expect(await w.runOnce()).toBe(1);
    await sendMessage(deps, consumer, "consumer", conversation.conversationId, "again");
    expect(await w.runOnce()).toBe(1);

    expect(ep.seen.map((s) => [s.type, s.verified])).toEqual([
      ["conversation.started", true],
      ["message.received", true],
    ]);
    const read = await getConversation(deps, consumer, conversation.conversationId);
    expect(read.messages.map((m) => [m.from, m.text])).toEqual([
      ["consumer", "hello"],
      ["provider", "echo: hello"],
      ["consumer", "again"],
      ["provider", "echo: again"],
    ]);

    // The same answer to the same event again (a duplicate delivery) records nothing more.
    const targets = agentTargets(deps);
    const eventId = String(ep.seen[0]!.body.id);
    const write = await targets.answerWrite!({ deliveryId: "whd_x", eventId, type: "conversation.started", agentId: agent.agentId }, { status: 200, body: '{"reply":"twice"}' });
    await deps.db.write(() => write?.());
    expect((await getConversation(deps, consumer, conversation.conversationId)).messages).toHaveLength(4);
  });

  test("an agent's notifications use the delivery worker's slots of the wallet that owns the agent", async () => {
    const { deps } = await testDeps(LOCAL_AGENTS);
    const ep = endpoint(deps, () => "", () => new Response("ok"));
    const provider = wallet();
    const agent = await registerAgent(deps, provider, { endpoint: ep.url, profile: { name: "Shared", basePrice: "1" } });
    await startConversation(deps, wallet(), agent.agentId, "hello");
    const now = deps.clock.now();
    const claim = { now, leaseUntil: now + 75_000, limit: 16, kinds: ["agent" as const], perEndpoint: 1 };
    // The provider already holds its share of the slots with its own endpoints' deliveries: nothing to claim.
    expect(await claimDueDeliveries(deps.db, { ...claim, token: "claim_1", perOwner: 4, ownerLoad: { [provider]: 4 } })).toEqual([]);
    const claimed = await claimDueDeliveries(deps.db, { ...claim, token: "claim_2", perOwner: 4, ownerLoad: { [provider]: 3 } });
    expect(claimed.map((d) => [d.endpointId, d.owner])).toEqual([[agent.agentId, provider]]);
  });

  test("answers that are not a reply are ignored; control characters are dropped from a reply; a long reply is cut to 4000 characters", async () => {
    const { deps } = await testDeps(LOCAL_AGENTS);
    // Each delivery counts as delivered, once, whatever its answer. Control characters (a NUL, which would
    // cut the text short in SQLite's length(); an escape sequence; a bell) are dropped, as a user's are refused.
    // Also replies of 4,000 characters in their longest spellings: emoji escaped to ASCII (as Python's json.dumps
    // writes them: 12 bytes each), and 12,000 CJK characters as UTF-8 (36 KB), cut to 4,000.
    const emoji = "\u{1F600}".repeat(4000);
    const asciiEscaped = JSON.stringify({ reply: emoji }).replace(/[\u{10000}-\u{10FFFF}]/gu, (c) => c.split("").map((u) => `\\u${u.charCodeAt(0).toString(16)}`).join(""));
    const answers = ["ok", "[1]", '{"reply": 5}', '{"reply": "   "}', '{"text": "hi"}', '{"reply": "\\u0000hi"}', '{"reply": "a\\u0000b\\u001b[31mc\\u0007\\td\\ne"}', JSON.stringify({ reply: "y".repeat(5000) }), asciiEscaped, JSON.stringify({ reply: "\u4e2d".repeat(12_000) })];
    let n = 0;
    const ep = endpoint(deps, () => "", () => new Response(answers[n++] ?? "ok"));
    const agent = await registerAgent(deps, wallet(), { endpoint: ep.url, profile: { name: "Odd", basePrice: "1" } });
    const consumer = wallet();
    const { conversation } = await startConversation(deps, consumer, agent.agentId, "m0");
    const w = worker(deps);
    await w.runOnce();
    for (let i = 1; i < answers.length; i++) {
      await sendMessage(deps, consumer, "consumer", conversation.conversationId, `m${i}`);
      await w.runOnce();
    }
    expect(ep.seen).toHaveLength(answers.length);
    expect(deps.db.sqlite.query("SELECT count(*) AS n FROM webhook_deliveries WHERE status = 'succeeded'").get()).toEqual({ n: answers.length });
    const provider = (await getConversation(deps, consumer, conversation.conversationId)).messages.filter((m) => m.from === "provider");
    expect(provider.map((m) => m.text)).toEqual(["hi", "ab[31mc\td\ne", "y".repeat(4000), emoji, "\u4e2d".repeat(4000)]);
    expect(asciiEscaped.length).toBeGreaterThan(48_000); // all ASCII: one byte a character
    expect(replyText('{"reply":"hi"}')).toBe("hi");
    expect(replyText("not json")).toBeNull();
  });

  test("a paused agent still hears about its conversations; 410 Gone pauses it and stops notifications until its owner changes the endpoint", async () => {
    const { deps } = await testDeps(LOCAL_AGENTS);
    let gone = false;
    const ep = endpoint(deps, () => "", () => (gone ? new Response("gone", { status: 410 }) : new Response("ok")));
    const owner = wallet();
    const agent = await registerAgent(deps, owner, { endpoint: ep.url, profile: { name: "Flaky", basePrice: "1" } });
    const consumer = wallet();
    const { conversation } = await startConversation(deps, consumer, agent.agentId, "hi");
    const w = worker(deps);
    await w.runOnce();
    await updateAgent(deps, owner, agent.agentId, { status: "paused" });
    await sendMessage(deps, consumer, "consumer", conversation.conversationId, "while paused");
    await w.runOnce();
    expect(ep.seen.map((s) => s.body.text)).toEqual(["hi", "while paused"]);

    await updateAgent(deps, owner, agent.agentId, { status: "active" });
    gone = true;
    await sendMessage(deps, consumer, "consumer", conversation.conversationId, "anyone?");
    await w.runOnce();
    expect(await getAgent(deps, agent.agentId, owner)).toMatchObject({ status: "paused", endpointGone: true });
    await sendMessage(deps, consumer, "consumer", conversation.conversationId, "not sent");
    await w.runOnce();
    expect(ep.seen).toHaveLength(3);

    gone = false;
    await updateAgent(deps, owner, agent.agentId, { endpoint: ep.url });
    expect(await getAgent(deps, agent.agentId, owner)).toMatchObject({ status: "paused", endpointGone: false });
    await sendMessage(deps, consumer, "consumer", conversation.conversationId, "back");
    await w.runOnce();
    expect(ep.seen.map((s) => s.body.text)).toEqual(["hi", "while paused", "anyone?", "back"]);
  });

  test("after 410 Gone, the owner setting a status (the endpoint unchanged) lets notifications flow again", async () => {
    const { deps } = await testDeps(LOCAL_AGENTS);
    let gone = true;
    const ep = endpoint(deps, () => "", () => (gone ? new Response("gone", { status: 410 }) : new Response("ok")));
    const owner = wallet();
    const agent = await registerAgent(deps, owner, { endpoint: ep.url, profile: { name: "Gone", basePrice: "1" } });
    const consumer = wallet();
    const { conversation } = await startConversation(deps, consumer, agent.agentId, "hi");
    const w = worker(deps);
    await w.runOnce();
    expect(await getAgent(deps, agent.agentId, owner)).toMatchObject({ status: "paused", endpointGone: true });
    gone = false;
    await updateAgent(deps, owner, agent.agentId, { status: "active" });
    expect(await getAgent(deps, agent.agentId, owner)).toMatchObject({ status: "active", endpointGone: false });
    await sendMessage(deps, consumer, "consumer", conversation.conversationId, "back");
    await w.runOnce();
    expect(ep.seen.map((s) => s.body.text)).toEqual(["hi", "back"]);
  });

  test("only a 200 whose body is a JSON object with a non-empty string reply is a reply", async () => {
    const { deps } = await testDeps(LOCAL_AGENTS);
    // Other 2xx answers carrying a reply count as delivered, and record nothing.
    const statuses = [201, 202];
    let n = 0;
    const ep = endpoint(deps, () => "", () => new Response(JSON.stringify({ reply: "not a 200" }), { status: statuses[n++] ?? 200 }));
    const agent = await registerAgent(deps, wallet(), { endpoint: ep.url, profile: { name: "Picky", basePrice: "1" } });
    const consumer = wallet();
    const { conversation } = await startConversation(deps, consumer, agent.agentId, "m0");
    const w = worker(deps);
    await w.runOnce();
    await sendMessage(deps, consumer, "consumer", conversation.conversationId, "m1");
    await w.runOnce();
    expect(ep.seen).toHaveLength(2);
    expect(deps.db.sqlite.query("SELECT count(*) AS n FROM webhook_deliveries WHERE status = 'succeeded'").get()).toEqual({ n: 2 });
    expect((await getConversation(deps, consumer, conversation.conversationId)).messages.filter((m) => m.from === "provider")).toEqual([]);
    // The answer's own judgement, for an event a reply could answer (still unanswered).
    const targets = agentTargets(deps);
    const delivery = { deliveryId: "whd_x", eventId: String(ep.seen[0]!.body.id), type: "conversation.started", agentId: agent.agentId };
    const judged = (status: number, body: string) => targets.answerWrite!(delivery, { status, body });
    for (const body of ['[{"reply":"hi"}]', '{"reply":["hi"]}', '{"reply":{"text":"hi"}}', '{"reply":""}', '{"reply":" \\u0000 "}', '{"reply":null}']) {
      expect([body, await judged(200, body)]).toEqual([body, null]);
    }
    for (const status of [201, 204, 500]) expect([status, await judged(status, '{"reply":"hi"}')]).toEqual([status, null]);
    expect(await judged(200, '{"reply":"hi"}')).toEqual(expect.any(Function)); // the one answer that is a reply
  });

  test("a 410 that arrives after the owner moved the agent's endpoint pauses nothing: the new endpoint gets the next notification", async () => {
    const { deps } = await testDeps(LOCAL_AGENTS);
    const heard = Promise.withResolvers<void>();
    const answer = Promise.withResolvers<void>();
    // The old endpoint holds its answer (a 410) until the owner has moved the agent.
    const old = endpoint(deps, () => "", () => {
      heard.resolve();
      return new Response(new ReadableStream({ start: (c) => void answer.promise.then(() => c.close()) }), { status: 410 });
    });
    const moved = endpoint(deps, () => "", () => new Response("ok"));
    const owner = wallet();
    const agent = await registerAgent(deps, owner, { endpoint: old.url, profile: { name: "Moving", basePrice: "1" } });
    const consumer = wallet();
    const { conversation } = await startConversation(deps, consumer, agent.agentId, "hi");
    const w = worker(deps);
    const round = w.runOnce();
    await heard.promise;
    await updateAgent(deps, owner, agent.agentId, { endpoint: moved.url });
    answer.resolve();
    await round;
    expect(await getAgent(deps, agent.agentId, owner)).toMatchObject({ status: "active", endpointGone: false });
    await sendMessage(deps, consumer, "consumer", conversation.conversationId, "still there?");
    await w.runOnce();
    expect(moved.seen.map((s) => s.body.text)).toEqual(["still there?"]);
  });
});
