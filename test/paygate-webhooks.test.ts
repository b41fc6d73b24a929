// Webhooks against the real server: a receiver that verifies every delivery with the npm `standardwebhooks`
// package, a failed first attempt retried under the same webhook-id, delivery after kill -9 and restart,
// one owner's silent endpoints not holding back another owner's delivery, the delivery log, test events
// and resend, and the SSRF guard refusing loopback when not allowed.
import { afterAll, describe, expect, test } from "bun:test";
import { createServer, type Socket } from "node:net";
import { columnsHolding } from "./helpers/db-scan.ts";
import { statusAndCode } from "./helpers/errors.ts";
import { verifyingReceiver, type Receiver } from "./helpers/receiver.ts";
import { runCli, startTestServer, type TestServer } from "./helpers/server.ts";
import { call, newWallet, signIn, type Json } from "./helpers/wallet.ts";
import { until } from "./helpers/until.ts";

const servers: TestServer[] = [];
const receivers: Receiver[] = [];
afterAll(async () => {
  for (const r of receivers) await r.stop();
  for (const s of servers) await s.dispose();
});

/** A verifying receiver (test/helpers/receiver.ts); `failFirst` answers 500 that many times first. */
function receiver(options: { failFirst?: number; port?: number } = {}) {
  let failures = options.failFirst ?? 0;
  const hook = verifyingReceiver({
    port: options.port,
    answer: () => (failures-- > 0 ? new Response("try later", { status: 500 }) : new Response("ok")),
  });
  receivers.push(hook);
  return hook;
}

/** A server on 127.0.0.1 that accepts connections and never answers: each attempt to it lasts the whole timeout. */
async function silentReceiver(): Promise<{ url: (path: string) => string; stop(): Promise<void> }> {
  const sockets = new Set<Socket>();
  const server = createServer((socket) => {
    sockets.add(socket);
    socket.on("close", () => sockets.delete(socket));
    socket.on("error", () => undefined);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as { port: number };
  const stop = async () => {
    for (const socket of sockets) socket.destroy();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  };
  receivers.push({ url: "", port, received: [], setSecret: () => undefined, stop });
  return { url: (path) => `http://127.0.0.1:${port}${path}`, stop };
}

async function ownerOn(server: TestServer) {
  const wallet = newWallet();
  const token = (await signIn(server.url, wallet)).sessionToken;
  const dash = (path: string, init: { method?: string; body?: unknown } = {}) => call(server.url, `/dashboard/api${path}`, { ...init, token });
  return { wallet, token, dash };
}

const product = { title: "Pro", description: "", type: "feature_unlock", price: "5", featureIds: ["pro"] };

describe("webhooks", () => {
  test("product events reach a verifying receiver; a failed first attempt is retried with the same webhook-id", async () => {
    const server = await startTestServer({ ALLOW_PRIVATE_NETWORK_TARGETS: "true" });
    servers.push(server);
    // The guard is off: said at start (a server with the guard on says nothing of it, below).
    expect(server.output()).toContain('"level":"warn","msg":"ALLOW_PRIVATE_NETWORK_TARGETS=true');
    const hook = receiver({ failFirst: 1 });
    const { dash } = await ownerOn(server);
    const endpoint = await dash("/webhooks", { body: { url: hook.url, events: ["product.created", "product.archived"] } });
    expect(endpoint).toMatchObject({ status: 201, body: { url: hook.url, events: ["product.created", "product.archived"], enabled: true } });
    expect(endpoint.body.secret).toMatch(/^whsec_/);
    hook.setSecret(endpoint.body.secret);

    const created = await dash("/products", { body: product });
    const attempts = await until(() => (hook.received.length >= 2 ? hook.received : undefined), 12_000);
    expect(attempts.map((a) => a.verified)).toEqual([true, true]);
    expect(attempts[0]!.id).toBe(attempts[1]!.id); // the same webhook-id on the retry
    expect(attempts[0]!.id).toMatch(/^evt_/);
    expect(attempts[1]!.body).toMatchObject({ id: attempts[0]!.id, type: "product.created", productId: created.body.productId, network: "localnet" });

    const deliveries = await dash(`/webhooks/${endpoint.body.endpointId}/deliveries`);
    expect(deliveries.body.deliveries[0]).toMatchObject({ eventId: attempts[0]!.id, type: "product.created", status: "succeeded", attempts: 2, lastStatusCode: 200 });
    // Each attempt as the receiver answered it: status, time taken and (up to 1 KiB of) the body.
    const detail = await dash(`/deliveries/${deliveries.body.deliveries[0].deliveryId}/attempts`);
    expect(detail.status).toBe(200);
    expect(detail.body.attempts).toMatchObject([
      { attempt: 1, statusCode: 500, response: "try later", error: null, durationMs: expect.any(Number), at: expect.stringMatching(/Z$/) },
      { attempt: 2, statusCode: 200, response: "ok", error: null },
    ]);

    // A test event goes to the endpoint whatever it subscribes to; resend repeats an event's id.
    const sent = await dash(`/webhooks/${endpoint.body.endpointId}/test`, { method: "POST" });
    const test = await until(() => hook.received.find((r) => r.body.type === "webhook.test"), 5_000);
    expect(test.verified).toBe(true);
    const resent = await dash(`/deliveries/${sent.body.deliveryId}/resend`, { method: "POST" });
    expect(resent.status).toBe(200);
    await until(() => (hook.received.filter((r) => r.id === test.id).length === 2 ? true : undefined), 5_000);

    // Rotation: both signatures while the old secret lasts, so a receiver still on the old one verifies.
    const rotated = await dash(`/webhooks/${endpoint.body.endpointId}/rotate-secret`, { method: "POST" });
    expect(rotated.body.secret).not.toBe(endpoint.body.secret);
    await dash(`/products/${created.body.productId}/archive`, { method: "POST" });
    const archived = await until(() => hook.received.find((r) => r.body.type === "product.archived"), 5_000);
    expect(archived.verified).toBe(true); // verified with the old secret

    // Secrets are sealed at rest: neither secret, nor its key bytes, is in any column, nor in the log.
    for (const secret of [endpoint.body.secret as string, rotated.body.secret as string]) {
      for (const text of [secret, secret.slice("whsec_".length), Buffer.from(secret.slice("whsec_".length), "base64").toString("hex")]) {
        expect(columnsHolding(`${server.dataDir}/walletgate.db`, text)).toEqual([]);
        expect(server.output()).not.toContain(text);
      }
    }

    // A second rotation within the day does not cut the first old secret's day short: the receiver,
    // still on the very first secret, verifies. Four replaced secrets sign at most; a fifth rotation waits.
    for (let i = 0; i < 3; i++) expect((await dash(`/webhooks/${endpoint.body.endpointId}/rotate-secret`, { method: "POST" })).status).toBe(200);
    const full = await dash(`/webhooks/${endpoint.body.endpointId}/rotate-secret`, { method: "POST" });
    expect([full.status, full.body.code]).toEqual([429, "RATE_LIMITED"]);
    expect(full.body.retryAfter).toBeGreaterThan(23 * 3600);
    expect(full.headers.get("retry-after")).toBe(String(full.body.retryAfter));
    await dash("/products", { body: { ...product, title: "Pro 2" } });
    const later = await until(() => hook.received.filter((r) => r.body.type === "product.created").at(1), 5_000);
    expect(later.verified).toBe(true); // with the first secret, four rotations later
  }, 60_000);

  test("test events and resends are limited per owner (each is a delivery): the 31st in a minute is 429", async () => {
    const server = await startTestServer({ ALLOW_PRIVATE_NETWORK_TARGETS: "true" });
    servers.push(server);
    const hook = receiver();
    const { dash } = await ownerOn(server);
    const endpoint = await dash("/webhooks", { body: { url: hook.url, events: ["product.created"] } });
    for (let i = 0; i < 30; i++) expect((await dash(`/webhooks/${endpoint.body.endpointId}/test`, { method: "POST" })).status).toBe(200);
    const limited = await dash(`/webhooks/${endpoint.body.endpointId}/test`, { method: "POST" });
    expect([limited.status, limited.body.code]).toEqual([429, "RATE_LIMITED"]);
    expect(limited.headers.get("retry-after")).toBe(String(limited.body.retryAfter));
    // Another owner is not held back.
    const other = await ownerOn(server);
    const theirs = await other.dash("/webhooks", { body: { url: hook.url, events: ["product.created"] } });
    const sent = await other.dash(`/webhooks/${theirs.body.endpointId}/test`, { method: "POST" });
    expect(sent.status).toBe(200);
    // Resends count the same way: with the test event, 30 sends a minute, then 429.
    for (let i = 0; i < 29; i++) expect((await other.dash(`/deliveries/${sent.body.deliveryId}/resend`, { method: "POST" })).status).toBe(200);
    const resendLimited = await other.dash(`/deliveries/${sent.body.deliveryId}/resend`, { method: "POST" });
    expect([resendLimited.status, resendLimited.body.code]).toEqual([429, "RATE_LIMITED"]);
  }, 60_000);

  test("an event committed before kill -9 is delivered after the restart", async () => {
    const server = await startTestServer({ ALLOW_PRIVATE_NETWORK_TARGETS: "true" });
    servers.push(server);
    const first = receiver();
    const { dash } = await ownerOn(server);
    const endpoint = await dash("/webhooks", { body: { url: first.url, events: ["product.created"] } });
    await first.stop(); // the receiver is down when the event is made
    const created = await dash("/products", { body: product });
    expect(created.status).toBe(201);
    await server.kill9();
    const back = receiver({ port: first.port }); // the same URL answers again
    back.setSecret(endpoint.body.secret);
    servers.push(await server.restart());
    const delivered = await until(() => back.received.find((r) => r.body.type === "product.created"), 15_000);
    expect(delivered).toMatchObject({ verified: true, body: { productId: created.body.productId } });
    expect(delivered.id).toMatch(/^evt_/);
  }, 60_000);

  test("a delivery in flight at kill -9 is sent again once any attempt would have ended, ahead of its endpoint's later events", async () => {
    const server = await startTestServer({ ALLOW_PRIVATE_NETWORK_TARGETS: "true" });
    servers.push(server);
    // Until the kill, the receiver answers with headers and a body that never ends: the attempt is in flight.
    let hang = true;
    const hook = verifyingReceiver({ answer: () => (hang ? new Response(new ReadableStream({ start: () => undefined })) : new Response("ok")) });
    receivers.push(hook);
    const { dash } = await ownerOn(server);
    const endpoint = await dash("/webhooks", { body: { url: hook.url, events: ["product.created"] } });
    hook.setSecret(endpoint.body.secret);
    const first = await dash("/products", { body: { ...product, title: "First" } });
    const second = await dash("/products", { body: { ...product, title: "Second" } });
    const held = await until(() => hook.received.find((r) => r.body.productId === first.body.productId), 5_000);
    await server.kill9();
    hang = false;
    const before = hook.received.length;
    servers.push(await server.restart());
    const restarted = performance.now();
    const after = await until(() => {
      const got = hook.received.slice(before);
      return got.length >= 2 ? got : undefined;
    }, 60_000);
    // Given back once an attempt of a live process would have ended (the 15-s timeout and a 5-s margin), not
    // after the rest of the dead process's lease (75 s); the second waited for it.
    expect(performance.now() - restarted).toBeLessThan(27_000);
    expect(after.map((r) => [r.body.productId, r.verified])).toEqual([
      [first.body.productId, true],
      [second.body.productId, true],
    ]);
    expect(after[0]!.id).toBe(held.id); // the same webhook-id
  }, 60_000);

  // Two workers on one database (a system where the servers' lock cannot be taken) are src/webhooks/outbox.test.ts's.
  test("a second server on the same database is refused while the first sends a delivery, which goes out once", async () => {
    const first = await startTestServer({ ALLOW_PRIVATE_NETWORK_TARGETS: "true" });
    servers.push(first);
    // The first attempt's answer ends 6 s after it began (well within the 15-s timeout).
    const hook = verifyingReceiver({ answer: () => new Response(new ReadableStream({ start: (c) => void Bun.sleep(6_000).then(() => c.close()) })) });
    receivers.push(hook);
    const { dash } = await ownerOn(first);
    const endpoint = await dash("/webhooks", { body: { url: hook.url, events: ["product.created"] } });
    hook.setSecret(endpoint.body.secret);
    await dash("/products", { body: { ...product, title: "Once" } });
    await until(() => hook.received[0], 5_000);
    const second = await runCli(["serve"], { ...first.env, PORT: "0" });
    expect({ code: second.code, refused: (second.stdout + second.stderr).includes("another walletgate serve is already using") }).toEqual({ code: 1, refused: true });
    await Bun.sleep(8_000); // past the first attempt's end
    expect(hook.received.map((r) => r.body.title ?? r.body.productId)).toHaveLength(1);
    const [delivery] = (await dash(`/webhooks/${endpoint.body.endpointId}/deliveries`)).body.deliveries;
    expect(delivery).toMatchObject({ status: "succeeded", attempts: 1 });
  }, 60_000);

  test("a 410 from the URL an endpoint had when the attempt began does not disable it once its owner moved it", async () => {
    const server = await startTestServer({ ALLOW_PRIVATE_NETWORK_TARGETS: "true" });
    servers.push(server);
    // The old receiver answers 410, but holds the answer's end until the owner has moved the endpoint.
    const answer = Promise.withResolvers<void>();
    const old = verifyingReceiver({ answer: () => new Response(new ReadableStream({ start: (c) => void answer.promise.then(() => c.close()) }), { status: 410 }) });
    const moved = receiver();
    receivers.push(old);
    const { dash } = await ownerOn(server);
    const endpoint = await dash("/webhooks", { body: { url: old.url, events: ["product.created"] } });
    old.setSecret(endpoint.body.secret);
    moved.setSecret(endpoint.body.secret);
    await dash("/products", { body: { ...product, title: "First" } });
    await until(() => old.received[0], 5_000);
    expect((await dash(`/webhooks/${endpoint.body.endpointId}`, { method: "PATCH", body: { url: moved.url } })).status).toBe(200);
    answer.resolve();
    const deliveries = `/webhooks/${endpoint.body.endpointId}/deliveries`;
    await until(async () => ((await dash(deliveries)).body.deliveries[0]?.lastStatusCode === 410 ? true : undefined), 5_000);
    const listed = (await dash("/webhooks")).body.endpoints.find((e: Json) => e.endpointId === endpoint.body.endpointId);
    expect(listed).toMatchObject({ url: moved.url, enabled: true });
    const second = await dash("/products", { body: { ...product, title: "Second" } });
    const got = await until(() => moved.received.find((r) => r.body.productId === second.body.productId), 5_000);
    expect(got.verified).toBe(true);
  }, 60_000);

  test("an owner whose 20 endpoints never answer holds a bounded share of the worker: another owner's delivery goes at once", async () => {
    const server = await startTestServer({ ALLOW_PRIVATE_NETWORK_TARGETS: "true" });
    servers.push(server);
    const silent = await silentReceiver();
    const a = await ownerOn(server);
    for (let i = 0; i < 20; i++) {
      expect((await a.dash("/webhooks", { body: { url: silent.url(`/a${i}`), events: ["product.created"] } })).status).toBe(201);
    }
    // 40 deliveries queued before B's, to more endpoints than the worker has slots, each held for 15 s.
    for (let i = 0; i < 2; i++) expect((await a.dash("/products", { body: { ...product, title: `A ${i}` } })).status).toBe(201);
    const hook = receiver();
    const b = await ownerOn(server);
    const endpoint = await b.dash("/webhooks", { body: { url: hook.url, events: ["product.created"] } });
    hook.setSecret(endpoint.body.secret);
    await Bun.sleep(1_500); // the worker (polling every second) has taken A's deliveries, whose requests now hang
    const created = await b.dash("/products", { body: product });
    // Polled every second and at once when a slot is free: well within the 15 s A's requests take.
    const delivered = await until(() => hook.received.find((r) => r.body.productId === created.body.productId), 4_000);
    expect(delivered.verified).toBe(true);
  }, 60_000);

  test("a private address literal or localhost is refused as a webhook URL unless ALLOW_PRIVATE_NETWORK_TARGETS is set", async () => {
    const server = await startTestServer({ NETWORK: "localnet" });
    servers.push(server);
    expect(server.output()).not.toContain("ALLOW_PRIVATE_NETWORK_TARGETS=true"); // the guard is on: no warning
    const { dash } = await ownerOn(server);
    const hook = receiver();
    for (const url of [hook.url, "http://localhost:9/x", "http://api.localhost/x", "http://[::1]/x", "http://10.1.2.3/x", "http://169.254.169.254/latest", "http://0x7f.1/x", "http://[::ffff:192.168.0.1]/x"]) {
      const refused = await dash("/webhooks", { body: { url, events: ["product.created"] } });
      expect([url, refused.status, refused.body.code]).toEqual([url, 400, "VALIDATION_ERROR"]);
      expect(refused.body.details.fields[0]).toMatchObject({ field: "url", message: expect.stringContaining("ALLOW_PRIVATE_NETWORK_TARGETS=true") });
    }
    // A name is judged when sent, after DNS (its addresses can change); a public literal is fine.
    for (const url of ["https://hooks.example.com/x", "https://93.184.216.34/hook"]) {
      expect((await dash("/webhooks", { body: { url, events: ["product.created"] } })).status).toBe(201);
    }
  });

  test("the guard refuses loopback targets when sending unless ALLOW_PRIVATE_NETWORK_TARGETS is set", async () => {
    // The endpoint was made while private targets were allowed; the server then restarted without that.
    const allowed = await startTestServer({ NETWORK: "localnet", ALLOW_PRIVATE_NETWORK_TARGETS: "true" });
    servers.push(allowed);
    const hook = receiver();
    const owner = await ownerOn(allowed);
    const endpoint = await owner.dash("/webhooks", { body: { url: hook.url, events: ["product.created"] } });
    expect(endpoint.status).toBe(201);
    const server = await allowed.restart({ ALLOW_PRIVATE_NETWORK_TARGETS: "false" });
    servers.push(server);
    // Signed in again: the restarted server has another port, so another BASE_URL (the tokens' issuer).
    const token = (await signIn(server.url, owner.wallet)).sessionToken;
    const dash = (path: string, init: { method?: string; body?: unknown } = {}) => call(server.url, `/dashboard/api${path}`, { ...init, token });
    expect((await dash(`/webhooks/${endpoint.body.endpointId}/test`, { method: "POST" })).status).toBe(200);
    const deadline = Date.now() + 5_000;
    let delivery: Json | undefined;
    while (Date.now() < deadline) {
      delivery = (await dash(`/webhooks/${endpoint.body.endpointId}/deliveries`)).body.deliveries[0];
      if (delivery?.attempts >= 1) break;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    expect(delivery).toMatchObject({ status: "pending", attempts: 1 });
    expect(delivery!.lastStatusCode ?? null).toBeNull(); // never sent: refused before connecting
    expect(hook.received).toEqual([]);
    const other = await ownerOn(server);
    expect((await other.dash(`/webhooks/${endpoint.body.endpointId}/deliveries`)).status).toBe(404);
    // Saved before private targets were refused: its events can still change with its URL sent as it is
    // (as the dashboard sends it), while another private URL is refused.
    const path = `/webhooks/${endpoint.body.endpointId}`;
    expect(await dash(path, { method: "PATCH", body: { url: hook.url, events: ["product.created", "product.updated"] } })).toMatchObject({ status: 200, body: { events: ["product.created", "product.updated"] } });
    expect((await dash(path, { method: "PATCH", body: { url: "http://127.0.0.2/hook" } })).status).toBe(400);
  }, 60_000);

  test("every error of the webhook routes over HTTP: validation, another owner's ids (404), a disabled endpoint (409)", async () => {
    const server = await startTestServer({ ALLOW_PRIVATE_NETWORK_TARGETS: "true" });
    servers.push(server);
    const hook = receiver();
    const a = await ownerOn(server);
    const b = await ownerOn(server);
    const code = async (p: ReturnType<typeof a.dash>) => statusAndCode(await p);
    expect(await code(a.dash("/webhooks", { body: { url: "ftp://example.com/", events: ["product.created"] } }))).toEqual([400, "VALIDATION_ERROR"]);
    expect(await code(a.dash("/webhooks", { body: { url: hook.url, events: ["no.such.event"] } }))).toEqual([400, "VALIDATION_ERROR"]);
    expect(await code(a.dash("/webhooks", { body: { url: hook.url } }))).toEqual([400, "VALIDATION_ERROR"]);
    const endpoint = (await a.dash("/webhooks", { body: { url: hook.url, events: ["product.created"] } })).body;
    const id = endpoint.endpointId as string;
    const sent = (await a.dash(`/webhooks/${id}/test`, { method: "POST" })).body;
    await until(() => hook.received.find((r) => r.body.type === "webhook.test"), 5_000);

    // Another owner's endpoint and delivery are not there for it.
    for (const [method, path, body] of [
      ["PATCH", `/webhooks/${id}`, { enabled: false }],
      ["DELETE", `/webhooks/${id}`, undefined],
      ["POST", `/webhooks/${id}/rotate-secret`, undefined],
      ["GET", `/webhooks/${id}/secret`, undefined],
      ["POST", `/webhooks/${id}/test`, undefined],
      ["GET", `/webhooks/${id}/deliveries`, undefined],
      ["POST", `/deliveries/${sent.deliveryId}/resend`, undefined],
      ["GET", `/deliveries/${sent.deliveryId}/attempts`, undefined],
      ["GET", `/deliveries/dlv_unknown/attempts`, undefined],
    ] as const) {
      expect([path, method, await code(b.dash(path, { method, ...(body === undefined ? {} : { body }) }))]).toEqual([path, method, [404, "NOT_FOUND"]]);
    }
    expect(await code(a.dash(`/webhooks/${id}`, { method: "PATCH", body: { url: "http://" } }))).toEqual([400, "VALIDATION_ERROR"]);
    expect(await code(a.dash(`/webhooks/${id}/deliveries?limit=0`))).toEqual([400, "VALIDATION_ERROR"]);
    expect(await code(a.dash(`/webhooks/${"w".repeat(65)}`, { method: "DELETE" }))).toEqual([400, "VALIDATION_ERROR"]);
    expect(await code(a.dash(`/deliveries/${"d".repeat(65)}/attempts`))).toEqual([400, "VALIDATION_ERROR"]);
    expect((await a.dash(`/deliveries/${sent.deliveryId}/attempts`)).status).toBe(200);

    // At most 20 endpoints an owner: the 21st is refused until one is deleted.
    const more: string[] = [];
    for (let i = 1; i < 20; i++) {
      const made = await b.dash("/webhooks", { body: { url: `${hook.url}?n=${i}`, events: ["product.created"] } });
      expect([i, made.status]).toEqual([i, 201]);
      more.push(made.body.endpointId as string);
    }
    expect((await b.dash("/webhooks", { body: { url: hook.url, events: ["product.created"] } })).status).toBe(201);
    expect(await code(b.dash("/webhooks", { body: { url: hook.url, events: ["product.created"] } }))).toEqual([409, "INVALID_STATE"]);
    expect((await b.dash(`/webhooks/${more[0]}`, { method: "DELETE" })).status).toBe(200);
    expect((await b.dash("/webhooks", { body: { url: hook.url, events: ["product.created"] } })).status).toBe(201);

    // Disabled: no test event and no resend until it is enabled again.
    expect((await a.dash(`/webhooks/${id}`, { method: "PATCH", body: { enabled: false } })).body.enabled).toBe(false);
    expect(await code(a.dash(`/webhooks/${id}/test`, { method: "POST" }))).toEqual([409, "INVALID_STATE"]);
    expect(await code(a.dash(`/deliveries/${sent.deliveryId}/resend`, { method: "POST" }))).toEqual([409, "INVALID_STATE"]);
    await a.dash(`/webhooks/${id}`, { method: "PATCH", body: { enabled: true } });
    expect((await a.dash(`/deliveries/${sent.deliveryId}/resend`, { method: "POST" })).status).toBe(200);
  }, 60_000);
});
