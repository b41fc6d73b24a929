// Marketplace orders through the MCP SDK Client against the running server (marketplace.md "Order
// states"): the happy path with exact balances of consumer, escrow, provider and fee wallet; decline,
// withdraw, cancel with refund, dispute and `walletgate orders resolve`; every invalid transition; a
// stranger and the wrong side; two racing accepts; too little money; a connected (non-custodial) consumer.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { Keypair } from "@solana/web3.js";
import { verifyingReceiver } from "./helpers/receiver.ts";
import { loadConfig } from "../src/config.ts";
import { withCommandDeps } from "../src/cli/context.ts";
import { escrowWallet } from "../src/marketplace/orders/escrow.ts";
import { signCheckout } from "./helpers/checkout.ts";
import { connectMcp, type McpTestClient } from "./helpers/mcp.ts";
import { runCli, startTestServer, type TestServer } from "./helpers/server.ts";
import { newWallet, signIn, type Json } from "./helpers/wallet.ts";

const FEE_WALLET = Keypair.generate().publicKey.toBase58();
let server: TestServer;
/** The agent's endpoint: every notification is verified with the agent's secret (npm standardwebhooks). */
const hook = verifyingReceiver({ path: "/agent" });
const received = hook.received;
let agentId: string;
/** The agent's one service ("Page"). */
let serviceId: string;
let provider: McpTestClient;
let providerAddress: string;

beforeAll(async () => {
  server = await startTestServer({
    AUTH_RATE_LIMIT: "off",
    ALLOW_PRIVATE_NETWORK_TARGETS: "true",
    MARKETPLACE_FEE_BPS: "250",
    MARKETPLACE_FEE_WALLET: FEE_WALLET,
  });
  provider = await connectMcp(server.url, "provider-agent");
  providerAddress = (await provider.ok("wallet_create", {})).address;
  const registered = await provider.ok("provider_register", {
    endpoint: hook.url,
    profile: { name: "Translator", tagline: "EN⇄FR", description: "Translates documents", categories: ["translation"], basePrice: "10" },
    services: [{ title: "Page", description: "One page", price: "10", deliveryTime: 60 }],
  });
  agentId = registered.agent.agentId;
  serviceId = registered.agent.services[0].serviceId;
  hook.setSecret(registered.webhookSecret);
}, 60_000);
afterAll(async () => {
  await hook.stop();
  await server?.dispose();
});

/** USDC and SOL of any address, read from the server's database as the CLI would. */
async function balances(address: string): Promise<{ usdc: bigint; sol: bigint }> {
  return withCommandDeps(loadConfig({ DATA_DIR: server.dataDir, LOG_LEVEL: "silent" }), async (deps) => {
    const b = await deps.ledger.getBalances(address);
    return { usdc: b.usdc ?? 0n, sol: b.sol ?? 0n };
  });
}
const escrow = () => withCommandDeps(loadConfig({ DATA_DIR: server.dataDir, LOG_LEVEL: "silent" }), (deps) => escrowWallet(deps));
const USDC = 1_000_000n;

/** A custodial consumer with `usdc` whole USDC, in a conversation with the agent. */
async function consumer(usdc: number) {
  const client = await connectMcp(server.url, `consumer-${crypto.randomUUID()}`);
  const address = (await client.ok("wallet_create", { airdropSol: 1, airdropUsdc: usdc })).address as string;
  const started = await client.ok("consumer_start_conversation", { agentId, message: "Hello, can you translate a page?" });
  return { client, address, conversationId: started.conversation.conversationId as string };
}

/** A connected (non-custodial) consumer signed in with its own key, holding 1 SOL and `usdc` USDC, in a conversation with the agent. */
async function connectedConsumer(usdc: number, name: string) {
  const wallet = newWallet();
  const keypair = Keypair.fromSeed(Buffer.from(wallet.privateKey.export({ format: "jwk" }).d!, "base64url"));
  expect((await runCli(["ledger", "airdrop", "--to", wallet.address, "--sol", "1", "--usdc", String(usdc)], { DATA_DIR: server.dataDir })).code).toBe(0);
  const client = await connectMcp(server.url, name, (await signIn(server.url, wallet)).sessionToken as string);
  const conversationId = (await client.ok("consumer_start_conversation", { agentId, message: "hi" })).conversation.conversationId as string;
  return { wallet, keypair, client, conversationId };
}

async function propose(conversationId: string, price = "40", deliveryTime = 60): Promise<string> {
  return (await provider.ok("provider_create_order", { conversationId, description: "Translate one page", price, deliveryTime })).order.orderId;
}

const accept = (c: { client: McpTestClient; conversationId: string }, orderId: string) =>
  c.client.call("consumer_accept_order", { orderId, conversationId: c.conversationId, paymentMethod: "usdc" });

describe("orders", () => {
  test("proposed → paid → delivered → completed: exact balances of consumer, escrow, provider and fee wallet", async () => {
    const c = await consumer(100);
    const orderId = await propose(c.conversationId, "40");
    const before = { provider: await balances(providerAddress), fee: await balances(FEE_WALLET) };
    const paying = Date.now();
    const paid = await accept(c, orderId);
    expect(paid).toMatchObject({ success: true, data: { order: { status: "paid", price: "40", token: "usdc" } } });
    expect(paid.data!.order.escrowTx).toBeString();
    // deadline = the moment of payment (the order's updatedAt) + deliveryTime (60 minutes), to the millisecond.
    const paidAt = Date.parse(paid.data!.order.updatedAt);
    expect(paidAt).toBeGreaterThanOrEqual(paying);
    expect(paidAt).toBeLessThanOrEqual(Date.now());
    expect(paid.data!.order.deadline).toBe(new Date(paidAt + 60 * 60_000).toISOString());
    const escrowAddress = await escrow();
    expect((await balances(c.address)).usdc).toBe(60n * USDC);
    const escrowBefore = (await balances(escrowAddress)).usdc;
    expect(escrowBefore).toBeGreaterThanOrEqual(40n * USDC);
    const delivered = await provider.ok("provider_deliver_order", { orderId, result: "https://example.com/page.fr.pdf", message: "Voilà" });
    expect(delivered.order).toMatchObject({ status: "delivered", result: "https://example.com/page.fr.pdf" });
    // The delivery is a system message; what the provider wrote with it is the provider's own.
    const told = (await c.client.ok("consumer_get_conversation", { conversationId: c.conversationId })).messages.slice(-2);
    expect(told.map((m: Json) => [m.from, m.text, m.orderId])).toEqual([["system", "The provider delivered the order.", orderId], ["provider", "Voilà", orderId]]);
    const done = await c.client.ok("consumer_complete_order", { orderId, rating: 5, review: "Great" });
    expect(done.order).toMatchObject({ status: "completed", rating: 5, review: "Great" });
    expect(done.order.releaseTx).toBeString();
    // 2.5 % of 40 = 1 USDC to the fee wallet, 39 to the provider, nothing left in escrow for this order.
    expect((await balances(providerAddress)).usdc - before.provider.usdc).toBe(39n * USDC);
    expect((await balances(FEE_WALLET)).usdc - before.fee.usdc).toBe(1n * USDC);
    expect(escrowBefore - (await balances(escrowAddress)).usdc).toBe(40n * USDC);
    expect((await balances(c.address)).usdc).toBe(60n * USDC);
    const agent = await c.client.ok("consumer_get_agent", { agentId });
    expect(agent.agent).toMatchObject({ completedOrders: 1, ratingCount: 1, rating: 5 });
    // The agent heard of the payment and the completion, signed under its secret.
    const deadline = Date.now() + 15_000;
    const ofOrder = () => received.filter((r) => r.body.orderId === orderId);
    while (ofOrder().length < 2 && Date.now() < deadline) await Bun.sleep(100);
    expect(ofOrder().map((r) => [r.type, r.verified])).toEqual([["order.accepted", true], ["order.completed", true]]);
    expect(ofOrder().map((r) => [r.body.network, typeof r.body.timestamp])).toEqual([["localnet", "string"], ["localnet", "string"]]);
    const conversation = await c.client.ok("consumer_get_conversation", { conversationId: c.conversationId });
    expect(conversation.orders.map((o: Json) => [o.orderId, o.status])).toEqual([[orderId, "completed"]]);
    expect(conversation.messages.filter((m: Json) => m.from === "system").length).toBeGreaterThanOrEqual(4);
  }, 60_000);

  test("decline and withdraw end a proposal; nothing moves", async () => {
    const c = await consumer(10);
    const a = await propose(c.conversationId, "5");
    expect((await c.client.ok("consumer_decline_order", { orderId: a, reason: "too slow" })).order.status).toBe("declined");
    const b = await propose(c.conversationId, "5");
    expect((await provider.ok("provider_withdraw_order", { orderId: b })).order.status).toBe("withdrawn");
    expect((await balances(c.address)).usdc).toBe(10n * USDC);
    expect(await accept(c, a)).toMatchObject({ success: false, code: "INVALID_STATE" });
    expect(await accept(c, b)).toMatchObject({ success: false, code: "INVALID_STATE" });
  }, 60_000);

  test("the agent hears order.declined and order.disputed, signed, once each, with the order's fields", async () => {
    const c = await consumer(10);
    const declinedId = await propose(c.conversationId, "5");
    const disputedId = await propose(c.conversationId, "4");
    const since = Date.now();
    await c.client.ok("consumer_decline_order", { orderId: declinedId, reason: "too slow" });
    expect((await accept(c, disputedId)).success).toBe(true);
    await provider.ok("provider_deliver_order", { orderId: disputedId, result: "done" });
    await c.client.ok("consumer_dispute_order", { orderId: disputedId, reason: "wrong language" });
    const until = Date.now();
    const ofOrder = (id: string) => received.filter((r) => r.body.orderId === id);
    const deadline = Date.now() + 15_000;
    while ((ofOrder(declinedId).length < 1 || ofOrder(disputedId).length < 2) && Date.now() < deadline) await Bun.sleep(100);
    await Bun.sleep(300); // room for anything else queued with them
    expect(ofOrder(declinedId).map((r) => [r.type, r.verified])).toEqual([["order.declined", true]]);
    expect(ofOrder(disputedId).map((r) => [r.type, r.verified])).toEqual([["order.accepted", true], ["order.disputed", true]]);
    const fields = { conversationId: c.conversationId, agentId, consumerWallet: c.address, description: "Translate one page", token: "usdc", network: "localnet" };
    const [declined] = ofOrder(declinedId);
    const disputed = ofOrder(disputedId)[1]!;
    expect(declined!.body).toEqual({ id: declined!.id, type: "order.declined", orderId: declinedId, ...fields, price: "5", reason: "too slow", timestamp: expect.any(String) });
    expect(disputed.body).toEqual({ id: disputed.id, type: "order.disputed", orderId: disputedId, ...fields, price: "4", reason: "wrong language", timestamp: expect.any(String) });
    for (const r of [declined!, disputed]) {
      const at = Date.parse(r.body.timestamp);
      expect([at >= since, at <= until, new Date(at).toISOString() === r.body.timestamp]).toEqual([true, true, true]);
    }
  }, 60_000);

  test("a paid order cancelled by the provider is refunded in full", async () => {
    const c = await consumer(20);
    const orderId = await propose(c.conversationId, "12.5");
    expect((await accept(c, orderId)).success).toBe(true);
    expect((await balances(c.address)).usdc).toBe(7_500_000n);
    const cancelled = await provider.ok("provider_cancel_order", { orderId, reason: "sick" });
    expect(cancelled.order).toMatchObject({ status: "cancelled" });
    expect(cancelled.order.refundTx).toBeString();
    expect((await balances(c.address)).usdc).toBe(20n * USDC);
  }, 60_000);

  test("a disputed order waits in escrow until the operator resolves it, either way", async () => {
    for (const outcome of ["--refund", "--release"] as const) {
      const c = await consumer(10);
      const orderId = await propose(c.conversationId, "4");
      await accept(c, orderId);
      await provider.ok("provider_deliver_order", { orderId, result: "done" });
      expect((await c.client.ok("consumer_dispute_order", { orderId, reason: "wrong language" })).order.status).toBe("disputed");
      expect(await c.client.call("consumer_complete_order", { orderId })).toMatchObject({ success: false, code: "INVALID_STATE" });
      const providerBefore = (await balances(providerAddress)).usdc;
      // The operator's command runs without the server's fee settings: the fee is the order's, fixed when it was paid.
      const feeBefore = (await balances(FEE_WALLET)).usdc;
      const r = await runCli(["orders", "resolve", orderId, outcome, "--json"], { DATA_DIR: server.dataDir });
      expect({ code: r.code, stderr: r.stderr }).toEqual({ code: 0, stderr: "" });
      const order = JSON.parse(r.stdout).order;
      if (outcome === "--refund") {
        expect(order.status).toBe("refunded");
        expect((await balances(c.address)).usdc).toBe(10n * USDC);
      } else {
        expect(order.status).toBe("completed");
        expect((await balances(providerAddress)).usdc - providerBefore).toBe(3_900_000n); // 4 less 2.5 %
        expect((await balances(FEE_WALLET)).usdc - feeBefore).toBe(100_000n);
      }
      const again = await runCli(["orders", "resolve", orderId, "--refund"], { DATA_DIR: server.dataDir });
      expect(again.code).toBe(1);
      expect(again.stderr).toContain(`cannot resolve an order that is ${order.status}`);
      // With --json too: only a success is JSON on stdout; a refusal is the stderr line and exit 1 (README).
      const refusedJson = await runCli(["orders", "resolve", orderId, "--release", "--json"], { DATA_DIR: server.dataDir });
      expect({ code: refusedJson.code, stdout: refusedJson.stdout }).toEqual({ code: 1, stdout: "" });
      expect(refusedJson.stderr).toContain(`cannot resolve an order that is ${order.status}`);
    }
    expect((await runCli(["orders", "resolve", "ord_x"], { DATA_DIR: server.dataDir })).code).toBe(2);
  }, 60_000);

  test("every invalid transition is INVALID_STATE", async () => {
    const c = await consumer(10);
    const orderId = await propose(c.conversationId, "1");
    const wrong = async (client: McpTestClient, tool: string, args: Json = {}) =>
      expect(await client.call(tool, { orderId, ...args })).toMatchObject({ success: false, code: "INVALID_STATE" });
    // proposed
    await wrong(provider, "provider_deliver_order", { result: "x" });
    await wrong(provider, "provider_cancel_order");
    await wrong(c.client, "consumer_complete_order");
    await wrong(c.client, "consumer_dispute_order", { reason: "x" });
    await accept(c, orderId);
    // paid
    await wrong(provider, "provider_withdraw_order");
    await wrong(c.client, "consumer_decline_order");
    await wrong(c.client, "consumer_complete_order");
    await wrong(c.client, "consumer_dispute_order", { reason: "x" });
    expect(await accept(c, orderId)).toMatchObject({ success: false, code: "INVALID_STATE" });
    await provider.ok("provider_deliver_order", { orderId, result: "r" });
    // delivered
    await wrong(provider, "provider_deliver_order", { result: "again" });
    await wrong(provider, "provider_cancel_order");
    await wrong(provider, "provider_withdraw_order");
    await wrong(c.client, "consumer_decline_order");
    await c.client.ok("consumer_complete_order", { orderId });
    // completed
    await wrong(c.client, "consumer_dispute_order", { reason: "late" });
    await wrong(c.client, "consumer_complete_order");
    await wrong(provider, "provider_cancel_order");
  }, 60_000);

  test("a stranger hears NOT_FOUND; the other side's action is FORBIDDEN", async () => {
    const c = await consumer(10);
    const orderId = await propose(c.conversationId, "1");
    const stranger = await consumer(1);
    for (const tool of ["consumer_decline_order", "provider_withdraw_order"]) {
      expect(await stranger.client.call(tool, { orderId })).toMatchObject({ success: false, code: "NOT_FOUND" });
    }
    expect(await stranger.client.call("consumer_accept_order", { orderId, conversationId: c.conversationId, paymentMethod: "usdc" })).toMatchObject({
      success: false,
      code: "NOT_FOUND",
    });
    expect(await stranger.client.call("provider_create_order", { conversationId: c.conversationId, description: "x", price: "1", deliveryTime: 5 })).toMatchObject({
      success: false,
      code: "NOT_FOUND",
    });
    expect(await c.client.call("provider_withdraw_order", { orderId })).toMatchObject({ success: false, code: "FORBIDDEN" });
    expect(await c.client.call("provider_create_order", { conversationId: c.conversationId, description: "x", price: "1", deliveryTime: 5 })).toMatchObject({
      success: false,
      code: "FORBIDDEN",
    });
    expect(await provider.call("consumer_decline_order", { orderId })).toMatchObject({ success: false, code: "FORBIDDEN" });
    expect(await provider.call("consumer_accept_order", { orderId, conversationId: c.conversationId, paymentMethod: "usdc" })).toMatchObject({
      success: false,
      code: "FORBIDDEN",
    });
  }, 60_000);

  test("the paid and delivered steps too: a stranger hears NOT_FOUND, the other side FORBIDDEN, and nothing moves", async () => {
    const c = await consumer(10);
    const orderId = await propose(c.conversationId, "2");
    expect(await accept(c, orderId)).toMatchObject({ success: true });
    const stranger = await consumer(1);
    const refused = async (client: McpTestClient, tool: string, args: Json, code: string) => {
      const envelope = await client.call(tool, { orderId, ...args });
      expect([tool, envelope.success, envelope.code, typeof envelope.error]).toEqual([tool, false, code, "string"]);
    };
    for (const [tool, args] of [["provider_deliver_order", { result: "r" }], ["provider_cancel_order", {}]] as const) {
      await refused(stranger.client, tool, args, "NOT_FOUND");
      await refused(c.client, tool, args, "FORBIDDEN");
    }
    await provider.ok("provider_deliver_order", { orderId, result: "r" });
    for (const [tool, args] of [["consumer_complete_order", {}], ["consumer_dispute_order", { reason: "late" }]] as const) {
      await refused(stranger.client, tool, args, "NOT_FOUND");
      await refused(provider, tool, args, "FORBIDDEN");
    }
    const order = (await c.client.ok("consumer_list_orders", {})).orders.find((o: Json) => o.orderId === orderId);
    expect(order.status).toBe("delivered");
    expect((await balances(c.address)).usdc).toBe(8n * USDC);
  }, 60_000);

  test("bad params of the order tools are VALIDATION_ERROR naming the field, and change nothing", async () => {
    const c = await consumer(10);
    const field = async (client: McpTestClient, tool: string, args: Json, name: string) => {
      const envelope = await client.call(tool, args);
      expect([tool, envelope.code, envelope.details?.fields?.[0]?.field]).toEqual([tool, "VALIDATION_ERROR", name]);
    };
    const order = { conversationId: c.conversationId, description: "x", price: "1", deliveryTime: 5 };
    await field(provider, "provider_create_order", { ...order, price: "0" }, "price");
    await field(provider, "provider_create_order", { ...order, price: "1.0000001" }, "price");
    await field(provider, "provider_create_order", { ...order, deliveryTime: 0 }, "deliveryTime");
    await field(provider, "provider_create_order", { ...order, deliveryTime: 525_601 }, "deliveryTime");
    await field(provider, "provider_create_order", { ...order, serviceId: "svc_nothing" }, "serviceId");
    await field(provider, "provider_create_order", { ...order, description: " " }, "description");
    const orderId = await propose(c.conversationId, "1");
    await field(c.client, "consumer_accept_order", { orderId, conversationId: c.conversationId, paymentMethod: "sol" }, "paymentMethod");
    // A custodial consumer's escrow payment is signed by the service: a transaction it passes is refused, not ignored.
    await field(c.client, "consumer_accept_order", { orderId, conversationId: c.conversationId, paymentMethod: "usdc", signedTransaction: "abc" }, "signedTransaction");
    expect((await balances(c.address)).usdc).toBe(10n * USDC);
    await field(c.client, "consumer_list_orders", { limit: 0 }, "limit");
    await field(c.client, "consumer_list_orders", { status: "lost" }, "status");
    await field(provider, "provider_list_orders", { limit: 101 }, "limit");
    expect(await accept(c, orderId)).toMatchObject({ success: true });
    await provider.ok("provider_deliver_order", { orderId, result: "r" });
    await field(c.client, "consumer_complete_order", { orderId, rating: 6 }, "rating");
    await field(c.client, "consumer_complete_order", { orderId, rating: 4.5 }, "rating");
    await field(c.client, "consumer_complete_order", { orderId, review: "x".repeat(1001) }, "review");
    await field(c.client, "consumer_dispute_order", { orderId, reason: " " }, "reason");
    const listed = (await c.client.ok("consumer_list_orders", {})).orders.filter((o: Json) => o.conversationId === c.conversationId);
    expect(listed.map((o: Json) => o.status)).toEqual(["delivered"]);
  }, 60_000);

  test("provider_create_order with an idempotencyKey: retries and racing calls make one order; the key asking another is VALIDATION_ERROR", async () => {
    const c = await consumer(100);
    const key = `proposal-${crypto.randomUUID()}`;
    const args = { conversationId: c.conversationId, description: "Translate one page", price: "40", deliveryTime: 60, idempotencyKey: key };
    // Six calls with one key at once (a client retrying over dropped connections): one order, six answers naming it.
    const answers = await Promise.all(Array.from({ length: 6 }, () => provider.call("provider_create_order", args)));
    const orderIds = new Set(answers.map((a) => a.data?.order?.orderId));
    expect([answers.every((a) => a.success), orderIds.size]).toEqual([true, 1]);
    const orderId = String(answers[0]!.data?.order?.orderId);
    const inConversation = async () => (await provider.ok("provider_list_orders", {})).orders.filter((o: Json) => o.conversationId === c.conversationId);
    expect((await inConversation()).map((o: Json) => o.orderId)).toEqual([orderId]);
    const proposedMessages = async () =>
      (await c.client.ok("consumer_get_conversation", { conversationId: c.conversationId })).messages.filter((m: Json) => String(m.text).startsWith("Order proposed"));
    expect(await proposedMessages()).toHaveLength(1);
    // After the consumer paid it, the retry answers the order as it stands: paid, not a new proposal.
    expect(await accept(c, orderId)).toMatchObject({ success: true });
    const again = await provider.ok("provider_create_order", args);
    expect([again.order.orderId, again.order.status]).toEqual([orderId, "paid"]);
    // The key with any other proposal (price, text, delivery time, service, conversation) is refused, and makes nothing.
    const other = await consumer(0);
    for (const changed of [{ price: "41" }, { description: "Translate two pages" }, { deliveryTime: 61 }, { serviceId }, { conversationId: other.conversationId }]) {
      const refused = await provider.call("provider_create_order", { ...args, ...changed });
      expect([changed, refused.code, refused.details?.fields?.[0]?.field]).toEqual([changed, "VALIDATION_ERROR", "idempotencyKey"]);
    }
    const keyTaken = await provider.call("provider_create_order", { ...args, price: "41" });
    expect(keyTaken.details?.fields?.[0]?.field).toBe("idempotencyKey");
    expect(keyTaken.error).toContain(orderId);
    expect((await inConversation()).map((o: Json) => o.orderId)).toEqual([orderId]);
    expect((await provider.ok("provider_list_orders", {})).orders.filter((o: Json) => o.conversationId === other.conversationId)).toEqual([]);
    expect(await proposedMessages()).toHaveLength(1);
    // A new key is a new proposal; a key of letters other than [A-Za-z0-9._:-], or longer than 64, is refused by name.
    const second = await provider.ok("provider_create_order", { ...args, idempotencyKey: `${key}-2` });
    expect(second.order.orderId).not.toBe(orderId);
    for (const bad of ["", "a b", "x".repeat(65)]) {
      const refused = await provider.call("provider_create_order", { ...args, idempotencyKey: bad });
      expect([bad, refused.code, refused.details?.fields?.[0]?.field]).toEqual([bad, "VALIDATION_ERROR", "idempotencyKey"]);
    }
    expect((await inConversation()).length).toBe(2);
    expect((await balances(c.address)).usdc).toBe(60n * USDC);
  }, 60_000);

  test("one idempotencyKey is each provider's own: another provider's proposal under the same key is its own order", async () => {
    const otherProvider = await connectMcp(server.url, "provider-two");
    await otherProvider.ok("wallet_create", {});
    const registered = await otherProvider.ok("provider_register", {
      endpoint: hook.url,
      profile: { name: "Reviewer", tagline: "Reviews", description: "Reviews documents", categories: ["writing"], basePrice: "5" },
    });
    const client = await connectMcp(server.url, `consumer-${crypto.randomUUID()}`);
    await client.ok("wallet_create", {});
    const theirs = (await client.ok("consumer_start_conversation", { agentId: registered.agent.agentId, message: "Hello" })).conversation.conversationId;
    const c = await consumer(0);
    const key = `shared-${crypto.randomUUID()}`;
    const ours = await provider.ok("provider_create_order", { conversationId: c.conversationId, description: "A page", price: "5", deliveryTime: 60, idempotencyKey: key });
    const other = await otherProvider.ok("provider_create_order", { conversationId: theirs, description: "A page", price: "5", deliveryTime: 60, idempotencyKey: key });
    expect(other.order.orderId).not.toBe(ours.order.orderId);
    expect(other.order.conversationId).toBe(theirs);
  }, 60_000);

  test("two racing accepts: one payment, one INVALID_STATE", async () => {
    const c = await consumer(100);
    const orderId = await propose(c.conversationId, "30");
    // Two calls in flight at once from the consumer's session (two HTTP requests racing into the server).
    const results = await Promise.all([accept(c, orderId), accept(c, orderId)]);
    expect(results.map((r) => r.success).sort()).toEqual([false, true]);
    expect(results.find((r) => !r.success)).toMatchObject({ code: "INVALID_STATE" });
    expect((await balances(c.address)).usdc).toBe(70n * USDC);
  }, 60_000);

  test("too little money: INSUFFICIENT_FUNDS and the order stays proposed", async () => {
    const c = await consumer(5);
    const orderId = await propose(c.conversationId, "6");
    const refused = await accept(c, orderId);
    // Said in whole tokens from the consumer's balances, not the ledger's base units and token accounts.
    expect([refused.success, refused.code, refused.error]).toEqual([false, "INSUFFICIENT_FUNDS", `${c.address} holds 5 USDC; this transfer needs 6 USDC`]);
    // Paid in the service token, which it has none of (not even an account): the same words.
    const inWgt = await c.client.call("consumer_accept_order", { orderId, conversationId: c.conversationId, paymentMethod: "wgt" });
    expect([inWgt.code, inWgt.error]).toEqual(["INSUFFICIENT_FUNDS", `${c.address} holds 0 WGT; this transfer needs 6 WGT`]);
    const orders = await c.client.ok("consumer_list_orders", {});
    expect(orders.orders.find((o: Json) => o.orderId === orderId).status).toBe("proposed");
    expect((await balances(c.address)).usdc).toBe(5n * USDC);
  }, 60_000);

  test("a connected consumer is offered no escrow transfer its balances cannot pay: INSUFFICIENT_FUNDS, in tokens, before anything is signed", async () => {
    const { wallet, keypair, client, conversationId } = await connectedConsumer(2, "connected-short");
    const orderId = await propose(conversationId, "3");
    const refused = await client.call("consumer_accept_order", { orderId, conversationId, paymentMethod: "usdc" });
    expect([refused.code, refused.error, refused.data]).toEqual(["INSUFFICIENT_FUNDS", `${wallet.address} holds 2 USDC; this transfer needs 3 USDC`, undefined]);
    // Funded, it gets the offer (none was made before), signs it and pays: no SOL lost to a failed transfer.
    const sol = (await balances(wallet.address)).sol;
    expect((await runCli(["ledger", "airdrop", "--to", wallet.address, "--usdc", "1"], { DATA_DIR: server.dataDir })).code).toBe(0);
    const offer = await client.ok("consumer_accept_order", { orderId, conversationId, paymentMethod: "usdc" });
    expect((await balances(wallet.address)).sol).toBe(sol);
    const paid = await client.ok("consumer_accept_order", { orderId, conversationId, paymentMethod: "usdc", signedTransaction: signCheckout(offer.unsignedTransaction, keypair) });
    expect(paid.order.status).toBe("paid");
    expect((await balances(wallet.address)).usdc).toBe(0n);
  }, 60_000);

  test("a connected consumer gets the escrow transfer unsigned, signs it, and pays with signedTransaction", async () => {
    const { wallet, keypair, client, conversationId } = await connectedConsumer(10, "connected-consumer");
    const orderId = await propose(conversationId, "3");
    const first = await client.ok("consumer_accept_order", { orderId, conversationId, paymentMethod: "usdc" });
    expect(first.order.status).toBe("proposed");
    expect(first.unsignedTransaction).toBeString();
    // A signed transfer of a different amount is refused, and nothing moves.
    const wrongAmount = signCheckout(
      (await client.ok("wallet_transfer", { to: await escrow(), amount: 2, token: "usdc" })).unsignedTransaction,
      keypair,
    );
    expect(await client.call("consumer_accept_order", { orderId, conversationId, paymentMethod: "usdc", signedTransaction: wrongAmount })).toMatchObject({
      success: false,
      code: "PAYMENT_MISMATCH",
    });
    expect((await balances(wallet.address)).usdc).toBe(10n * USDC);
    const signed = signCheckout(first.unsignedTransaction, keypair);
    // The offer was for USDC: the same signed transfer presented as a payment in another token is refused.
    expect(await client.call("consumer_accept_order", { orderId, conversationId, paymentMethod: "wgt", signedTransaction: signed })).toMatchObject({
      success: false,
      code: "PAYMENT_MISMATCH",
    });
    const paid = await client.ok("consumer_accept_order", { orderId, conversationId, paymentMethod: "usdc", signedTransaction: signed });
    expect(paid.order.status).toBe("paid");
    expect((await balances(wallet.address)).usdc).toBe(7n * USDC);
  }, 60_000);

  test("a connected consumer that sent the escrow transfer itself: the accept with it finishes the order, paid once", async () => {
    const { wallet, keypair, client, conversationId } = await connectedConsumer(10, "self-sending-consumer");
    const orderId = await propose(conversationId, "4");
    const offer = await client.ok("consumer_accept_order", { orderId, conversationId, paymentMethod: "usdc" });
    const signed = signCheckout(offer.unsignedTransaction, keypair);
    await client.ok("wallet_submit_transaction", { transaction: signed });
    const paid = await client.ok("consumer_accept_order", { orderId, conversationId, paymentMethod: "usdc", signedTransaction: signed });
    expect(paid.order).toMatchObject({ status: "paid" });
    expect((await balances(wallet.address)).usdc).toBe(6n * USDC);
  }, 60_000);
});
