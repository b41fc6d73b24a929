// The outbox and its delivery worker end to end, against a real local receiver that verifies every
// request with the npm `standardwebhooks` package; retries on the manual clock, leases, restarts.
import { afterEach, describe, expect, setSystemTime, test } from "bun:test";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Webhook } from "standardwebhooks";
import { loadConfig } from "../config.ts";
import { migrate } from "../db/migrate.ts";
import { MIGRATIONS } from "../db/migrations.ts";
import { openDatabase, type Db } from "../db/open.ts";
import { createDeps, type Deps } from "../deps.ts";
import { DAY_MS, manualClock } from "../lib/clock.ts";
import { encodeBase58 } from "../lib/encoding.ts";
import { cryptoRandom } from "../lib/ids.ts";
import { createLogger } from "../log.ts";
import { codeOf } from "../../test/helpers/errors.ts";
import { testDeps } from "../../test/helpers/deps.ts";
import { until } from "../../test/helpers/until.ts";
import { createEndpoint, rotateEndpointSecret, updateEndpoint, deleteEndpoint, getEndpoint } from "./endpoints.ts";
import {
  createDeliveryWorker,
  enqueueEventInWrite,
  eventBody,
  listDeliveries,
  listDeliveryAttempts,
  moveRetriesWithClock,
  resendDelivery,
  RETRY_SCHEDULE_MS,
  sendTestEvent,
  type DeliveryWorker,
} from "./outbox.ts";
import { newWebhookSecret } from "./signing.ts";
import { DEFAULT_TIMEOUT_MS } from "./guarded-fetch.ts";
import { purgeWebhooks } from "./purge.ts";
import * as store from "./store.ts";
import { STEP_ROWS } from "../db/steps.ts";

type Clock = ReturnType<typeof manualClock>;

// Endpoints here are local receivers (the delivery worker is told allowPrivate itself).
const setup = () => testDeps({ ALLOW_PRIVATE_NETWORK_TARGETS: "true" });

const wallet = () => encodeBase58(cryptoRandom(32));

/**
 * `count` deliveries of one event to the owner endpoint `endpointId`, written as the outbox writes them, a
 * millisecond apart from `at` (ids whd_00000, whd_00001, …): pending unless `failed(i)`.
 */
function queuedDeliveries(db: Db, at: number, endpointId: string, count: number, failed: (i: number) => boolean = () => false): Promise<void> {
  return db.write(() => {
    db.sqlite.query("INSERT INTO outbox_events (id, target_kind, target_id, type, payload, created_at) VALUES ('evt_queued', 'owner', 'o', 'payment.completed', 'x', ?)").run(at);
    const delivery = db.sqlite.query(
      `INSERT INTO webhook_deliveries (id, event_id, endpoint_kind, endpoint_id, status, attempts, next_attempt_at, created_at, updated_at)
       VALUES (?, 'evt_queued', 'owner_endpoint', ?, ?, 0, ?, ?, ?)`,
    );
    for (let i = 0; i < count; i++) {
      delivery.run(`whd_${String(i).padStart(5, "0")}`, endpointId, failed(i) ? "failed" : "pending", failed(i) ? null : at, at + i, at);
    }
  });
}

type Received = {
  path: string;
  id: string;
  timestamp: number;
  signatures: string[];
  body: string;
  contentType: string | null;
  /** per secret given to the receiver: did standardwebhooks accept the request with it */
  verified: boolean[];
};

const cleanups: (() => void | Promise<void>)[] = [];
afterEach(async () => {
  setSystemTime();
  for (const f of cleanups.splice(0).reverse()) await f();
});

/**
 * A receiver on 127.0.0.1:0. Each request is checked with standardwebhooks against every secret the
 * test names, at the worker's (manual) time, and answered by `respond` (200 by default).
 */
function startReceiver(clock: Clock, secrets: () => string[], respond: (n: number, r: Received) => Response | Promise<Response> = () => new Response("ok")) {
  const received: Received[] = [];
  const server = Bun.serve({
    port: 0,
    hostname: "127.0.0.1",
    async fetch(req) {
      const body = await req.text();
      const headers = Object.fromEntries(req.headers);
      // standardwebhooks compares the timestamp with Date.now(): let "now" be the worker's clock.
      setSystemTime(new Date(clock.now()));
      const verified = secrets().map((secret) => {
        try {
          new Webhook(secret).verify(body, headers);
          return true;
        } catch {
          return false;
        }
      });
      setSystemTime();
      const r: Received = {
        path: new URL(req.url).pathname,
        id: headers["webhook-id"] ?? "",
        timestamp: Number(headers["webhook-timestamp"]),
        signatures: (headers["webhook-signature"] ?? "").split(" "),
        body,
        contentType: headers["content-type"] ?? null,
        verified,
      };
      received.push(r);
      return respond(received.length, r);
    },
  });
  cleanups.push(() => server.stop(true));
  return { received, url: (path = "/hook") => `http://127.0.0.1:${server.port}${path}` };
}

function worker(deps: Deps, options: Partial<Parameters<typeof createDeliveryWorker>[1]> = {}): DeliveryWorker {
  const w = createDeliveryWorker(deps, { allowPrivate: true, ...options });
  cleanups.push(() => w.stop());
  return w;
}

function enqueue(deps: Deps, owner: string, type = "payment.completed", payload: Record<string, unknown> = { productId: "prod_1", amount: "9.99", network: "localnet" }): Promise<string> {
  return deps.db.write(() => enqueueEventInWrite(deps, { targetKind: "owner", targetId: owner, type, payload }));
}

/** An owner with one endpoint (a receiver answering 200) subscribed to payment.completed, and one such event queued. */
async function queuedForOneEndpoint(deps: Deps, db: Db, clock: Clock) {
  const owner = wallet();
  const rx = startReceiver(clock, () => []);
  const ep = await createEndpoint(deps, owner, { url: rx.url(), events: ["payment.completed"] });
  await enqueue(deps, owner);
  return { owner, rx, ep };
}

/** An endpoint of `owner` for `events` at a receiver that verifies every request with that endpoint's secret. */
async function verifiedEndpoint(
  deps: Deps,
  clock: Clock,
  owner: string,
  events: string[],
  respond?: (n: number, r: Received) => Response | Promise<Response>,
  path?: string,
) {
  let secret = "";
  const rx = startReceiver(clock, () => [secret], respond);
  const ep = await createEndpoint(deps, owner, { url: rx.url(path), events });
  secret = ep.secret;
  return { rx, ep };
}

async function deliveriesOf(deps: Deps, owner: string, endpointId: string) {
  return (await listDeliveries(deps, owner, endpointId, { limit: 100 })).deliveries;
}

describe("delivery", () => {
  test("the first attempt goes at once, signed per Standard Webhooks, with the stored body byte for byte", async () => {
    const { deps, clock } = await setup();
    const owner = wallet();
    const { rx, ep } = await verifiedEndpoint(deps, clock, owner, ["payment.completed"]);
    const eventId = await enqueue(deps, owner);

    expect(await worker(deps).runOnce()).toBe(1);
    expect(rx.received).toHaveLength(1);
    const r = rx.received[0]!;
    expect(r).toMatchObject({ path: "/hook", id: eventId, timestamp: Math.floor(clock.now() / 1000), contentType: "application/json", verified: [true] });
    expect(JSON.parse(r.body)).toEqual({ id: eventId, type: "payment.completed", productId: "prod_1", amount: "9.99", network: "localnet" });
    expect(r.body).toBe((await eventBody(deps, eventId))!);

    const [d] = await deliveriesOf(deps, owner, ep.endpointId);
    expect(d).toEqual({
      deliveryId: expect.stringMatching(/^whd_/),
      eventId,
      type: "payment.completed",
      status: "succeeded",
      attempts: 1,
      lastStatusCode: 200,
      nextAttemptAt: null,
      createdAt: "2026-11-22T00:00:00.000Z",
    });
    expect((await listDeliveryAttempts(deps, owner, d!.deliveryId)).attempts).toEqual([
      { attempt: 1, at: "2026-11-22T00:00:00.000Z", statusCode: 200, durationMs: expect.any(Number), response: "ok", error: null },
    ]);
    expect(await worker(deps).runOnce()).toBe(0);
  });

  test("fan-out: only the owner's enabled endpoints subscribed to the type receive it", async () => {
    const { deps, clock } = await setup();
    const owner = wallet();
    const rx = startReceiver(clock, () => []);
    const paid = await createEndpoint(deps, owner, { url: rx.url("/paid"), events: ["payment.completed"] });
    const products = await createEndpoint(deps, owner, { url: rx.url("/products"), events: ["product.created"] });
    const off = await createEndpoint(deps, owner, { url: rx.url("/off"), events: ["payment.completed"] });
    await updateEndpoint(deps, owner, off.endpointId, { enabled: false });
    const stranger = wallet();
    await createEndpoint(deps, stranger, { url: rx.url("/stranger"), events: ["payment.completed"] });

    await enqueue(deps, owner);
    await worker(deps).runOnce();
    expect(rx.received.map((r) => r.path)).toEqual(["/paid"]);
    expect(await deliveriesOf(deps, owner, products.endpointId)).toEqual([]);
    expect(await deliveriesOf(deps, owner, off.endpointId)).toEqual([]);
    expect(await deliveriesOf(deps, owner, paid.endpointId)).toHaveLength(1);
  });

  test("a redirect (3xx) is no success: not followed, and retried as a failure", async () => {
    const { deps, clock } = await setup();
    const owner = wallet();
    const { rx, ep } = await verifiedEndpoint(deps, clock, owner, ["payment.completed"], (n) =>
      n === 1 ? new Response(null, { status: 308, headers: { location: "https://elsewhere.example/hook" } }) : new Response("ok"),
    );
    await enqueue(deps, owner);
    const w = worker(deps);
    expect(await w.runOnce()).toBe(1);
    expect((await deliveriesOf(deps, owner, ep.endpointId))[0]).toMatchObject({ status: "pending", attempts: 1, lastStatusCode: 308, nextAttemptAt: new Date(clock.now() + 5000).toISOString() });
    clock.advance(5000);
    expect(await w.runOnce()).toBe(1);
    expect(rx.received).toHaveLength(2); // both to the endpoint itself
    expect((await deliveriesOf(deps, owner, ep.endpointId))[0]).toMatchObject({ status: "succeeded", attempts: 2, lastStatusCode: 200 });
  });

  test("any 2xx is success, to the last one (202, 299)", async () => {
    for (const [code, status] of [[202, "succeeded"], [299, "succeeded"]] as const) {
      const { deps, clock } = await setup();
      const owner = wallet();
      const { ep } = await verifiedEndpoint(deps, clock, owner, ["payment.completed"], () => new Response(null, { status: code }));
      await enqueue(deps, owner);
      expect(await worker(deps).runOnce()).toBe(1);
      expect({ code, ...(await deliveriesOf(deps, owner, ep.endpointId))[0] }).toMatchObject({ code, status, attempts: 1, lastStatusCode: code });
    }
  });

  test("an attempt's default time limit is paygate.md's 15 s (the tests pass shorter ones)", () => {
    expect(DEFAULT_TIMEOUT_MS).toBe(15_000);
  });

  test("a failed first attempt (500) is retried 5 s later with the same webhook-id and a new timestamp", async () => {
    const { deps, clock } = await setup();
    const owner = wallet();
    const { rx, ep } = await verifiedEndpoint(deps, clock, owner, ["payment.completed"], (n) => new Response(n === 1 ? "boom" : "ok", { status: n === 1 ? 500 : 200 }));
    const eventId = await enqueue(deps, owner);
    const w = worker(deps);

    expect(await w.runOnce()).toBe(1);
    let [d] = await deliveriesOf(deps, owner, ep.endpointId);
    expect(d).toMatchObject({ status: "pending", attempts: 1, lastStatusCode: 500, nextAttemptAt: new Date(clock.now() + 5000).toISOString() });

    clock.advance(4999);
    expect(await w.runOnce()).toBe(0);
    clock.advance(1);
    expect(await w.runOnce()).toBe(1);
    expect(rx.received.map((r) => r.id)).toEqual([eventId, eventId]);
    expect(rx.received[1]!.timestamp - rx.received[0]!.timestamp).toBe(5);
    expect(rx.received.every((r) => r.verified[0])).toBe(true);
    [d] = await deliveriesOf(deps, owner, ep.endpointId);
    expect(d).toMatchObject({ status: "succeeded", attempts: 2, lastStatusCode: 200, nextAttemptAt: null });
    // GET /metrics counts the attempts by result.
    const metrics = deps.metrics.registry.render();
    expect(metrics).toContain('walletgate_webhook_attempts_total{result="failure"} 1\n');
    expect(metrics).toContain('walletgate_webhook_attempts_total{result="success"} 1\n');
    // ... and the deliveries by how they ended: one, delivered at its second attempt.
    expect(metrics).toContain('walletgate_webhook_deliveries_total{result="succeeded"} 1\n');
    expect(metrics).not.toContain('walletgate_webhook_deliveries_total{result="failed"}');
  });

  test("a step of the wall clock moves a retry with it: set back an hour, the retry still goes 5 s after the failure", async () => {
    const { deps, clock } = await setup();
    const owner = wallet();
    const { rx, ep } = await verifiedEndpoint(deps, clock, owner, ["payment.completed"], (n) => new Response(n === 1 ? "boom" : "ok", { status: n === 1 ? 500 : 200 }));
    await enqueue(deps, owner);
    const w = worker(deps);
    expect(await w.runOnce()).toBe(1);
    clock.advance(1_000);
    clock.set(clock.now() - 3_600_000); // NTP sets the clock back an hour, a second after the failure
    expect(await moveRetriesWithClock(deps, -3_600_000, clock.now())).toBe(1);
    const [d] = await deliveriesOf(deps, owner, ep.endpointId);
    expect(d).toMatchObject({ status: "pending", nextAttemptAt: new Date(clock.now() + 4000).toISOString() });
    clock.advance(3999);
    expect(await w.runOnce()).toBe(0);
    clock.advance(1);
    expect(await w.runOnce()).toBe(1);
    expect(rx.received).toHaveLength(2);
    expect(rx.received.every((r) => r.verified[0])).toBe(true); // signed at the clock's new time
  });

  test("a step moves only pending attempts still to come: each waits what it had left, one the step made due is due now", async () => {
    const { deps, clock, db } = await setup();
    const at = clock.now();
    await queuedDeliveries(db, at, "whe_step", 5, (i) => i === 4);
    const due = (id: string, t: number) => db.write(() => db.sqlite.query("UPDATE webhook_deliveries SET next_attempt_at = ? WHERE id = ?").run(t, id));
    await due("whd_00000", at - 1_000); // already due
    await due("whd_00001", at + 30_000); // due in 30 s
    await due("whd_00002", at + 7_200_000); // due in 2 h
    await due("whd_00003", at + 600_000); // due in 10 min
    const times = () =>
      Object.fromEntries((db.sqlite.query("SELECT id, next_attempt_at AS t FROM webhook_deliveries ORDER BY id").all() as { id: string; t: number | null }[]).map((r) => [r.id, r.t]));

    // Set back an hour: the waits stay; the one already due stays due (moved by the step alone, it would wait
    // 59 min 59 s), at the clock's new time.
    const back = at - 3_600_000;
    expect(await moveRetriesWithClock(deps, -3_600_000, back)).toBe(4);
    expect(times()).toEqual({ whd_00000: back, whd_00001: back + 30_000, whd_00002: back + 7_200_000, whd_00003: back + 600_000, whd_00004: null });

    // Set back 20 minutes more, a step longer than the 10-minute wait: that one still waits 10 minutes.
    const back2 = back - 1_200_000;
    expect(await moveRetriesWithClock(deps, -1_200_000, back2)).toBe(4);
    expect(times()).toEqual({ whd_00000: back2, whd_00001: back2 + 30_000, whd_00002: back2 + 7_200_000, whd_00003: back2 + 600_000, whd_00004: null });

    // A step forward moves nothing: it may be the clock catching up with time that did pass.
    expect(await moveRetriesWithClock(deps, 60_000, back2 + 60_000)).toBe(0);
    expect(times()).toEqual({ whd_00000: back2, whd_00001: back2 + 30_000, whd_00002: back2 + 7_200_000, whd_00003: back2 + 600_000, whd_00004: null });
  });

  test("a step back moves a backlog larger than a write's step, each row once, in several writes", async () => {
    const { deps, clock, db } = await setup();
    const at = clock.now();
    const count = 2 * STEP_ROWS + 100;
    await queuedDeliveries(db, at, "whe_backlog", count, (i) => i % 50 === 7); // some finished: never moved
    // Due times from 100 s ago to 500 s ahead, some sharing a millisecond (the walk's ties are by rowid).
    const dueOf = (i: number) => at + Math.floor((i - 100) / 3) * 3_000;
    await db.write(() => {
      const set = db.sqlite.query("UPDATE webhook_deliveries SET next_attempt_at = ? WHERE id = ? AND status = 'pending'");
      for (let i = 0; i < count; i++) set.run(dueOf(i), `whd_${String(i).padStart(5, "0")}`);
    });
    let writes = 0;
    const counted = { ...deps, db: { ...deps.db, write: <T>(fn: () => T) => (writes++, deps.db.write(fn)) } };
    const back = at - 3_600_000;
    const pending = Array.from({ length: count }, (_, i) => i).filter((i) => i % 50 !== 7);
    expect(await moveRetriesWithClock(counted, -3_600_000, back)).toBe(pending.length);
    expect(writes).toBeGreaterThanOrEqual(3);
    const rows = db.sqlite.query("SELECT id, status, next_attempt_at AS t FROM webhook_deliveries ORDER BY id").all() as { id: string; status: string; t: number | null }[];
    rows.forEach((row, i) => {
      if (i % 50 === 7) expect(row).toMatchObject({ status: "failed", t: null });
      else expect(row.t).toBe(Math.max(back, dueOf(i) - 3_600_000)); // due before the step: due now; later ones wait what they had left
    });
  });

  test("a retry written while a step back's walk runs (on the clock as it now is) is not moved by it", async () => {
    const { deps, clock, db } = await setup();
    const at = clock.now();
    const count = 3 * STEP_ROWS;
    await queuedDeliveries(db, at, "whe_during", count, () => false);
    // An overdue backlog (the walk's first writes make it due) and later retries.
    const dueOf = (i: number) => (i < 2 * STEP_ROWS ? at - 3_300_000 + i * 1_000 : at + 60_000 + i);
    await db.write(() => {
      const set = db.sqlite.query("UPDATE webhook_deliveries SET next_attempt_at = ? WHERE id = ?");
      for (let i = 0; i < count; i++) set.run(dueOf(i), `whd_${String(i).padStart(5, "0")}`);
    });
    const back = at - 3_600_000;
    const reschedule = (id: string, t: number) => db.sqlite.query("UPDATE webhook_deliveries SET next_attempt_at = ? WHERE id = ?").run(t, id);
    let writes = 0;
    // After the walk's first write, what the worker does meanwhile: the first row (moved, due now) is sent and
    // fails, its next try in 30 min; a row the walk has not reached yet gets a retry in 2 h.
    const during = {
      ...deps,
      db: {
        ...deps.db,
        write: async <T>(fn: () => T) => {
          const result = await deps.db.write(fn);
          if (++writes === 1) {
            await deps.db.write(() => {
              reschedule("whd_00000", back + 1_800_000);
              reschedule(`whd_${String(count - 1).padStart(5, "0")}`, back + 7_200_000);
            });
          }
          return result;
        },
      },
    };
    expect(await moveRetriesWithClock(during, -3_600_000, back)).toBe(count - 1);
    expect(writes).toBeGreaterThanOrEqual(3);
    const t = (id: string) => (db.sqlite.query("SELECT next_attempt_at AS t FROM webhook_deliveries WHERE id = ?").get(id) as { t: number }).t;
    expect(t("whd_00000")).toBe(back + 1_800_000);
    expect(t(`whd_${String(count - 1).padStart(5, "0")}`)).toBe(back + 7_200_000);
    expect(t("whd_00001")).toBe(back); // overdue at the step: due now
    expect(t(`whd_${String(count - 2).padStart(5, "0")}`)).toBe(dueOf(count - 2) - 3_600_000); // waits what it had left
  });

  test("the full schedule: 8 attempts at 0, 5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 10 h later, then failed", async () => {
    const { deps, clock } = await setup();
    const owner = wallet();
    const { rx, ep } = await verifiedEndpoint(deps, clock, owner, ["payment.completed"], () => new Response("unavailable", { status: 503 }));
    await enqueue(deps, owner);
    const w = worker(deps);
    const start = clock.now();

    expect(await w.runOnce()).toBe(1);
    for (const delay of RETRY_SCHEDULE_MS) {
      clock.advance(delay - 1);
      expect(await w.runOnce()).toBe(0);
      clock.advance(1);
      expect(await w.runOnce()).toBe(1);
    }
    expect(rx.received).toHaveLength(8);
    // Each attempt verifies at its own time: receivers would refuse a 5-minute-old timestamp.
    expect(rx.received.every((r) => r.verified[0])).toBe(true);
    const offsetsS = rx.received.map((r) => r.timestamp - Math.floor(start / 1000));
    expect(offsetsS).toEqual([0, 5, 305, 2105, 9305, 27305, 63305, 99305]);
    expect(offsetsS.at(-1)! / 3600).toBeCloseTo(27.6, 1);

    const [d] = await deliveriesOf(deps, owner, ep.endpointId);
    expect(d).toMatchObject({ status: "failed", attempts: 8, lastStatusCode: 503, nextAttemptAt: null });
    // Eight failed attempts, one delivery failed for good.
    expect(deps.metrics.registry.render()).toContain('walletgate_webhook_attempts_total{result="failure"} 8\n');
    expect(deps.metrics.registry.render()).toContain('walletgate_webhook_deliveries_total{result="failed"} 1\n');
    const { attempts } = await listDeliveryAttempts(deps, owner, d!.deliveryId);
    expect(attempts.map((a) => a.attempt)).toEqual([1, 2, 3, 4, 5, 6, 7, 8]);
    expect(attempts.every((a) => a.statusCode === 503 && a.response === "unavailable")).toBe(true);
    clock.advance(100 * 3600e3);
    expect(await w.runOnce()).toBe(0);
  });

  test("410 Gone fails the delivery and disables the endpoint, which then receives nothing", async () => {
    const { deps, clock } = await setup();
    const owner = wallet();
    const rx = startReceiver(clock, () => [], () => new Response("gone", { status: 410 }));
    const ep = await createEndpoint(deps, owner, { url: rx.url(), events: ["payment.completed"] });
    await enqueue(deps, owner);
    const w = worker(deps);
    expect(await w.runOnce()).toBe(1);
    expect((await deliveriesOf(deps, owner, ep.endpointId))[0]).toMatchObject({ status: "failed", attempts: 1, lastStatusCode: 410 });
    expect((await getEndpoint(deps, owner, ep.endpointId)).enabled).toBe(false);
    expect(deps.metrics.registry.render()).toContain('walletgate_webhook_attempts_total{result="gone"} 1\n');
    expect(deps.metrics.registry.render()).toContain('walletgate_webhook_deliveries_total{result="failed"} 1\n');

    await enqueue(deps, owner);
    clock.advance(24 * 3600e3);
    expect(await w.runOnce()).toBe(0);
    expect(rx.received).toHaveLength(1);
    expect(await codeOf(sendTestEvent(deps, owner, ep.endpointId))).toBe("INVALID_STATE");
  });

  test("a delete racing the worker counts each dropped delivery once", async () => {
    const { deps, db, clock } = await setup();
    const owner = wallet();
    const rx = startReceiver(clock, () => []);
    const ep = await createEndpoint(deps, owner, { url: rx.url(), events: ["payment.completed"] });
    const due = 2_000;
    await queuedDeliveries(db, clock.now(), ep.endpointId, due);
    const w = worker(deps);
    const deleting = deleteEndpoint(deps, owner, ep.endpointId);
    for (let i = 0; i < 5; i++) await w.runOnce(); // claims some between the delete's steps, and fails them
    await deleting;
    expect(rx.received).toEqual([]);
    expect(deps.metrics.registry.render()).toContain(`walletgate_webhook_deliveries_total{result="failed"} ${due}\n`);
  });

  test("deliveries still due of an endpoint whose delete a crash cut short are counted as failed when the purge removes them", async () => {
    const { deps, db, clock } = await setup();
    await queuedDeliveries(db, clock.now(), "whe_gone", 300, (i) => i >= 290);
    expect(await purgeWebhooks(deps)).toMatchObject({ webhookDeliveries: 300 });
    expect(deps.metrics.registry.render()).toContain('walletgate_webhook_deliveries_total{result="failed"} 290\n'); // the pending ones
  });

  test("a purge whose later step fails still counts the deliveries its committed steps removed", async () => {
    const { deps, db, clock } = await setup();
    await queuedDeliveries(db, clock.now(), "whe_gone", 400);
    // The disk refuses the second step's delete (it takes the oldest 250 first).
    db.sqlite.run("CREATE TEMP TRIGGER refuse_late BEFORE DELETE ON webhook_deliveries WHEN OLD.id = 'whd_00399' BEGIN SELECT RAISE(ABORT, 'disk full'); END");
    expect(await codeOf(purgeWebhooks(deps)).catch((err: Error) => err.message)).toContain("disk full");
    expect(deps.metrics.registry.render()).toContain('walletgate_webhook_deliveries_total{result="failed"} 250\n');
  });

  test("an endpoint disabled (or deleted) after the event was queued receives nothing", async () => {
    const { deps, clock } = await setup();
    const owner = wallet();
    const rx = startReceiver(clock, () => []);
    const disabled = await createEndpoint(deps, owner, { url: rx.url("/disabled"), events: ["payment.completed"] });
    const deleted = await createEndpoint(deps, owner, { url: rx.url("/deleted"), events: ["payment.completed"] });
    await enqueue(deps, owner);
    await updateEndpoint(deps, owner, disabled.endpointId, { enabled: false });
    await deleteEndpoint(deps, owner, deleted.endpointId);

    expect(await worker(deps).runOnce()).toBe(1);
    expect(rx.received).toEqual([]);
    expect((await deliveriesOf(deps, owner, disabled.endpointId))[0]).toMatchObject({ status: "failed", attempts: 0, lastStatusCode: null });
    // Failed without an attempt: counted as a delivery ended, not as an attempt; the deleted endpoint's dropped
    // delivery too (README: "dropped because its endpoint was disabled, deleted or unsubscribed").
    expect(deps.metrics.registry.render()).toContain('walletgate_webhook_deliveries_total{result="failed"} 2\n');
    expect(deps.metrics.registry.render()).not.toContain("walletgate_webhook_attempts_total{");
    expect(await codeOf(resendDelivery(deps, owner, (await deliveriesOf(deps, owner, disabled.endpointId))[0]!.deliveryId))).toBe("INVALID_STATE");
  });

  test("a retry of a type the owner unsubscribed from is not sent; resending it is refused until the type is back", async () => {
    const { deps, clock } = await setup();
    const owner = wallet();
    const rx = startReceiver(clock, () => [], () => new Response(null, { status: 500 }));
    const ep = await createEndpoint(deps, owner, { url: rx.url("/hook"), events: ["payment.completed", "product.created"] });
    await enqueue(deps, owner);
    const w = worker(deps);
    await w.runOnce();
    expect((await deliveriesOf(deps, owner, ep.endpointId))[0]).toMatchObject({ status: "pending", attempts: 1 });
    await updateEndpoint(deps, owner, ep.endpointId, { events: ["product.created"] });
    clock.advance(5000);
    await w.runOnce();
    expect(rx.received).toHaveLength(1);
    const [dropped] = await deliveriesOf(deps, owner, ep.endpointId);
    expect(dropped).toMatchObject({ status: "failed", attempts: 1 });
    expect(await codeOf(resendDelivery(deps, owner, dropped!.deliveryId))).toBe("INVALID_STATE");
    await updateEndpoint(deps, owner, ep.endpointId, { events: ["product.created", "payment.completed"] });
    await resendDelivery(deps, owner, dropped!.deliveryId);
    await w.runOnce();
    expect(rx.received).toHaveLength(2);
  });

  test("a retry goes to the endpoint's current URL and is signed with both secrets during a rotation", async () => {
    const { deps, clock } = await setup();
    const owner = wallet();
    let secrets: string[] = [];
    const rx = startReceiver(clock, () => secrets, (n) => new Response(null, { status: n === 1 ? 500 : 204 }));
    const ep = await createEndpoint(deps, owner, { url: rx.url("/old"), events: ["payment.completed"] });
    await enqueue(deps, owner);
    const w = worker(deps);
    await w.runOnce();
    await updateEndpoint(deps, owner, ep.endpointId, { url: rx.url("/new") });
    const { secret: rotated } = await rotateEndpointSecret(deps, owner, ep.endpointId);
    secrets = [ep.secret, rotated];
    clock.advance(5000);
    await w.runOnce();
    expect(rx.received.map((r) => r.path)).toEqual(["/old", "/new"]);
    expect(rx.received[1]!.signatures).toHaveLength(2);
    expect(rx.received[1]!.verified).toEqual([true, true]); // a receiver with either secret accepts
    expect((await deliveriesOf(deps, owner, ep.endpointId))[0]).toMatchObject({ status: "succeeded", lastStatusCode: 204 });
  });

  test("each attempt records at most 1 KiB of the response, cut on a character boundary", async () => {
    const { deps, clock } = await setup();
    const owner = wallet();
    const rx = startReceiver(clock, () => [], () => new Response("é".repeat(5000), { status: 500 }));
    const ep = await createEndpoint(deps, owner, { url: rx.url(), events: ["payment.completed"] });
    await enqueue(deps, owner);
    await worker(deps).runOnce();
    const [d] = await deliveriesOf(deps, owner, ep.endpointId);
    const [a] = (await listDeliveryAttempts(deps, owner, d!.deliveryId)).attempts;
    expect(a!.statusCode).toBe(500);
    expect(a!.response).toBe("é".repeat(512));
    expect(Buffer.byteLength(a!.response!)).toBeLessThanOrEqual(1024);
  });

  test("an unreachable endpoint records the failure with no status code and is retried", async () => {
    const { deps } = await setup();
    const owner = wallet();
    const ep = await createEndpoint(deps, owner, { url: "http://127.0.0.1:1/hook", events: ["payment.completed"] });
    await enqueue(deps, owner);
    await worker(deps).runOnce();
    const [d] = await deliveriesOf(deps, owner, ep.endpointId);
    expect(d).toMatchObject({ status: "pending", attempts: 1, lastStatusCode: null });
    const [a] = (await listDeliveryAttempts(deps, owner, d!.deliveryId)).attempts;
    expect(a).toMatchObject({ statusCode: null, response: null, error: expect.stringMatching(/^network: /) });
  });

  test("without allowPrivate a loopback endpoint is refused by the guard and nothing is sent", async () => {
    const { deps, db, clock } = await setup();
    const { owner, rx, ep } = await queuedForOneEndpoint(deps, db, clock);
    await worker(deps, { allowPrivate: false }).runOnce();
    expect(rx.received).toEqual([]);
    const [d] = await deliveriesOf(deps, owner, ep.endpointId);
    expect((await listDeliveryAttempts(deps, owner, d!.deliveryId)).attempts[0]).toMatchObject({ statusCode: null, error: expect.stringMatching(/^private_address: /) });
  });
});

describe("sealed event bodies", () => {
  test("a body is stored sealed, never with its secrets in clear, and sent as the JSON it seals", async () => {
    const { deps, db, clock } = await setup();
    const owner = wallet();
    const { rx } = await verifiedEndpoint(deps, clock, owner, ["feature.unlocked"]);
    const eventId = await enqueue(deps, owner, "feature.unlocked", { accessToken: "ft_secret_of_the_buyer" });
    const stored = (await store.findEvent(db, eventId))!.payload;
    expect(stored).toStartWith("sealed:v1:");
    expect(stored).not.toContain("ft_secret_of_the_buyer");
    expect(await worker(deps).runOnce()).toBe(1);
    expect(rx.received[0]!.verified).toEqual([true]);
    expect(JSON.parse(rx.received[0]!.body)).toEqual({ id: eventId, type: "feature.unlocked", accessToken: "ft_secret_of_the_buyer" });
    expect(rx.received[0]!.body).toBe((await eventBody(deps, eventId))!);
  });

  test("a receiver that echoes the body does not put its secret in the database: the recorded answer has it replaced, also cut short", async () => {
    const { deps, db, clock } = await setup();
    const owner = wallet();
    const token = `ft_${"Ab9".repeat(14)}`;
    // The first answer echoes the body whole; the second puts the token across the 1 KiB the attempt records.
    const { rx, ep } = await verifiedEndpoint(deps, clock, owner, ["feature.unlocked"], (n, r) =>
      n === 1 ? new Response(`received: ${r.body}`, { status: 500 }) : new Response(`${"x".repeat(1024 - 20)}${r.body.slice(r.body.indexOf(token))}`, { status: 200 }),
    );
    await enqueue(deps, owner, "feature.unlocked", { accessToken: token });
    await worker(deps).runOnce();
    clock.advance(5000);
    await worker(deps).runOnce();
    expect(rx.received).toHaveLength(2);
    const [d] = await deliveriesOf(deps, owner, ep.endpointId);
    const attempts = (await listDeliveryAttempts(deps, owner, d!.deliveryId)).attempts;
    expect(attempts.map((a) => a.statusCode).sort()).toEqual([200, 500]);
    const echoed = attempts.find((a) => a.statusCode === 500)!.response!;
    expect(echoed).toContain('"accessToken":"[redacted]"');
    const cut = attempts.find((a) => a.statusCode === 200)!.response!;
    expect(cut).toEndWith("[redacted]");
    const stored = db.sqlite.query("SELECT response FROM webhook_attempts").all() as { response: string }[];
    expect(stored.filter((r) => r.response.includes(token.slice(0, 12)))).toEqual([]);
  });

  test("migration 38 removes recorded answers to feature.unlocked that may echo its token, from the file too; others stay", () => {
    const dir = mkdtempSync(join(tmpdir(), "walletgate-m38-"));
    const path = join(dir, "walletgate.db");
    const db = openDatabase(path);
    migrate(db.sqlite, 1, MIGRATIONS.filter((m) => m.version <= 37));
    const event = db.sqlite.query("INSERT INTO outbox_events (id, target_kind, target_id, type, payload, created_at) VALUES (?, 'owner', 'o', ?, 'sealed:v1:x', 1)");
    const delivery = db.sqlite.query("INSERT INTO webhook_deliveries (id, event_id, endpoint_kind, endpoint_id, status, created_at, updated_at) VALUES (?, ?, 'owner_endpoint', 'whe_a', 'succeeded', 1, 1)");
    const attempt = db.sqlite.query("INSERT INTO webhook_attempts (delivery_id, attempt, at, status_code, duration_ms, response) VALUES (?, 1, 1, 200, 1, ?)");
    event.run("evt_u", "feature.unlocked");
    event.run("evt_p", "payment.completed");
    delivery.run("whd_u1", "evt_u");
    delivery.run("whd_u2", "evt_u");
    delivery.run("whd_p", "evt_p");
    attempt.run("whd_u1", 'received {"accessToken":"ft_3yZe7d5LHn1sEcReT"}');
    attempt.run("whd_u2", "ok");
    attempt.run("whd_p", "ft_ not a token of this event");
    // Neighbours on the same page, so that the answer's old bytes would stay in the page's free space.
    for (let i = 0; i < 30; i++) {
      delivery.run(`whd_n${i}`, "evt_p");
      attempt.run(`whd_n${i}`, `answer ${i} `.repeat(20));
    }
    db.sqlite.run("PRAGMA wal_checkpoint(TRUNCATE)"); // the answers in the database file itself
    expect(readFileSync(path).includes(Buffer.from("3yZe7d5LHn1sEcReT"))).toBe(true);
    expect(migrate(db.sqlite, 2, MIGRATIONS.filter((m) => m.version <= 38)).applied).toEqual([38]);
    expect(db.sqlite.query("SELECT delivery_id, response FROM webhook_attempts WHERE delivery_id NOT LIKE 'whd_n%' ORDER BY delivery_id").all()).toEqual([
      { delivery_id: "whd_p", response: "ft_ not a token of this event" },
      { delivery_id: "whd_u1", response: "[redacted]" },
      { delivery_id: "whd_u2", response: "ok" },
    ]);
    db.sqlite.run("PRAGMA wal_checkpoint(TRUNCATE)");
    expect(db.sqlite.query("PRAGMA secure_delete").get()).toEqual({ secure_delete: 0 }); // for that statement only
    db.close();
    try {
      expect(readFileSync(path).includes(Buffer.from("3yZe7d5LHn1sEcReT"))).toBe(false);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test("a body an earlier version stored in clear is still sent, and the purge seals it", async () => {
    const { deps, db, clock } = await setup();
    const { owner, rx, ep } = await queuedForOneEndpoint(deps, db, clock);
    const { eventId } = (await deliveriesOf(deps, owner, ep.endpointId))[0]!;
    const clear = JSON.stringify({ id: eventId, type: "payment.completed", amount: "9.99" });
    const sealed = (await store.findEvent(db, eventId))!.payload;
    await db.write(() => store.setEventPayloadInWrite(db, eventId, sealed, clear));
    expect(await worker(deps).runOnce()).toBe(1);
    expect(rx.received.map((r) => r.body)).toEqual([clear]);
    expect(await purgeWebhooks(deps)).toEqual({ webhookDeliveries: 0, webhookEvents: 0, webhookBodiesSealed: 1, webhookOldSecrets: 0, webhookDeletionRecords: 0 });
    expect((await store.findEvent(db, eventId))!.payload).toStartWith("sealed:v1:");
    expect(await eventBody(deps, eventId)).toBe(clear);
    expect(await purgeWebhooks(deps)).toEqual({ webhookDeliveries: 0, webhookEvents: 0, webhookBodiesSealed: 0, webhookOldSecrets: 0, webhookDeletionRecords: 0 });
  });

  test("a body that does not open (another key, altered bytes) is a failed attempt, and nothing is sent", async () => {
    const { deps, db, clock } = await setup();
    const { owner, rx, ep } = await queuedForOneEndpoint(deps, db, clock);
    const [d] = await deliveriesOf(deps, owner, ep.endpointId);
    const stored = (await store.findEvent(db, d!.eventId))!.payload;
    const altered = stored.slice(0, -4) + (stored.endsWith("AAA=") ? "BBB=" : "AAA=");
    await db.write(() => store.setEventPayloadInWrite(db, d!.eventId, stored, altered));
    expect(await eventBody(deps, d!.eventId)).toBeNull();
    // Another WALLET_ENCRYPTION_KEY does not open the intact body either.
    await db.write(() => store.setEventPayloadInWrite(db, d!.eventId, altered, stored));
    expect(await eventBody({ ...deps, wallets: { encryptionKey: new Uint8Array(32).fill(7) } }, d!.eventId)).toBeNull();
    expect(await eventBody(deps, d!.eventId)).not.toBeNull();
    await db.write(() => store.setEventPayloadInWrite(db, d!.eventId, stored, altered));
    expect(await worker(deps).runOnce()).toBe(1);
    expect(rx.received).toEqual([]);
    expect((await listDeliveryAttempts(deps, owner, d!.deliveryId)).attempts[0]).toMatchObject({ statusCode: null, error: "event body cannot be decrypted" });
  });
});

describe("test events and resend", () => {
  test("a test event reaches its one endpoint whatever it subscribes to, and no other", async () => {
    const { deps, clock } = await setup();
    const owner = wallet();
    const { rx, ep } = await verifiedEndpoint(deps, clock, owner, ["product.archived"], undefined, "/tested");
    await createEndpoint(deps, owner, { url: rx.url("/other"), events: ["webhook.test"] });
    const { deliveryId } = await sendTestEvent(deps, owner, ep.endpointId);
    expect(deliveryId).toMatch(/^whd_/);
    await worker(deps).runOnce();
    expect(rx.received.map((r) => r.path)).toEqual(["/tested"]);
    expect(rx.received[0]!.verified).toEqual([true]);
    expect(JSON.parse(rx.received[0]!.body)).toMatchObject({ type: "webhook.test", endpointId: ep.endpointId, network: "localnet", id: expect.stringMatching(/^evt_/) });
    expect((await deliveriesOf(deps, owner, ep.endpointId))[0]).toMatchObject({ deliveryId, type: "webhook.test", status: "succeeded" });
  });

  test("resend makes a new delivery of the same event (same webhook-id); only the owner can", async () => {
    const { deps, clock } = await setup();
    const owner = wallet();
    const { rx, ep } = await verifiedEndpoint(deps, clock, owner, ["payment.completed"]);
    const eventId = await enqueue(deps, owner);
    const w = worker(deps);
    await w.runOnce();
    const [first] = await deliveriesOf(deps, owner, ep.endpointId);

    expect(await codeOf(resendDelivery(deps, wallet(), first!.deliveryId))).toBe("NOT_FOUND");
    expect(await codeOf(resendDelivery(deps, owner, "whd_unknown"))).toBe("NOT_FOUND");
    clock.advance(60_000);
    const { deliveryId } = await resendDelivery(deps, owner, first!.deliveryId);
    expect(deliveryId).not.toBe(first!.deliveryId);
    expect(await w.runOnce()).toBe(1);
    expect(rx.received.map((r) => r.id)).toEqual([eventId, eventId]);
    expect(rx.received[1]!.body).toBe(rx.received[0]!.body);
    expect(rx.received[1]!.timestamp - rx.received[0]!.timestamp).toBe(60);
    expect(rx.received.every((r) => r.verified[0])).toBe(true);
    const list = await listDeliveries(deps, owner, ep.endpointId, { limit: 1, offset: 0 });
    expect(list).toMatchObject({ total: 2, deliveries: [{ deliveryId, status: "succeeded" }] });
  });

  test("delivery list paging limits are checked", async () => {
    const { deps } = await setup();
    const owner = wallet();
    const ep = await createEndpoint(deps, owner, { url: "https://hooks.example.com/", events: ["payment.completed"] });
    expect(await codeOf(listDeliveries(deps, owner, ep.endpointId, { limit: 0 }))).toBe("VALIDATION_ERROR");
    expect(await codeOf(listDeliveries(deps, owner, ep.endpointId, { limit: 101 }))).toBe("VALIDATION_ERROR");
    expect(await codeOf(listDeliveries(deps, owner, ep.endpointId, { offset: -1 }))).toBe("VALIDATION_ERROR");
    expect(await codeOf(listDeliveries(deps, owner, ep.endpointId, { offset: 1e20 }))).toBe("VALIDATION_ERROR"); // past SQLite's integers
    expect(await listDeliveries(deps, owner, ep.endpointId)).toEqual({ deliveries: [], total: 0 });
  });
});

describe("leases", () => {
  test("two workers racing never deliver the same attempt twice", async () => {
    const { deps, clock } = await setup();
    const owner = wallet();
    // A slow receiver, so the two workers' batches overlap in time.
    const rx = startReceiver(clock, () => [], async () => {
      await Bun.sleep(5);
      return new Response("ok");
    });
    await createEndpoint(deps, owner, { url: rx.url("/a"), events: ["payment.completed"] });
    await createEndpoint(deps, owner, { url: rx.url("/b"), events: ["payment.completed"] });
    const events = await Promise.all(Array.from({ length: 30 }, () => enqueue(deps, owner)));
    const w1 = worker(deps, { batchSize: 7 });
    const w2 = worker(deps, { batchSize: 7 });
    let handled = 0;
    for (let round = 0; round < 20; round++) {
      const [a, b] = await Promise.all([w1.runOnce(), w2.runOnce()]);
      expect(a + b).toBeLessThanOrEqual(14);
      handled += a + b;
      if (a + b === 0) break;
    }
    expect(handled).toBe(60);
    const seen = rx.received.map((r) => `${r.path} ${r.id}`);
    expect(new Set(seen).size).toBe(60);
    expect(seen).toHaveLength(60);
    expect(new Set(rx.received.map((r) => r.id))).toEqual(new Set(events));
  });

  test("a delivery leased by a worker that died is sent by another only once the lease runs out", async () => {
    const { deps, db, clock } = await setup();
    const owner = wallet();
    const rx = startReceiver(clock, () => []);
    const ep = await createEndpoint(deps, owner, { url: rx.url(), events: ["payment.completed"] });
    await enqueue(deps, owner);
    // The dead worker: it claimed, then never sent nor recorded.
    const claimed = await store.claimDueDeliveries(db, { now: clock.now(), leaseUntil: clock.now() + 75_000, token: "claim_dead", limit: 10, kinds: ["owner_endpoint"] });
    expect(claimed).toHaveLength(1);
    const w = worker(deps);
    expect(await w.runOnce()).toBe(0);
    clock.advance(74_999);
    expect(await w.runOnce()).toBe(0);
    clock.advance(1);
    expect(await w.runOnce()).toBe(1);
    expect(rx.received).toHaveLength(1);
    // The dead worker's late record is refused: its lease is gone.
    const late = await db.write(() =>
      store.recordAttemptInWrite(db, claimed[0]!.id, "claim_dead", { attempt: 1, at: 0, statusCode: 500, durationMs: 1, response: "", error: null }, { status: "pending", nextAttemptAt: 1 }, 0),
    );
    expect(late).toBe(false);
    expect((await deliveriesOf(deps, owner, ep.endpointId))[0]).toMatchObject({ status: "succeeded", attempts: 1 });
  });

  test("a started worker takes a lease that ran out before it started as no one's: sent at once, its endpoint not held back", async () => {
    const { deps, db, clock } = await setup();
    const owner = wallet();
    const rx = startReceiver(clock, () => []);
    await createEndpoint(deps, owner, { url: rx.url(), events: ["payment.completed"] });
    await enqueue(deps, owner);
    await store.claimDueDeliveries(db, { now: clock.now(), leaseUntil: clock.now() + 75_000, token: "claim_dead", limit: 10, kinds: ["owner_endpoint"] });
    clock.advance(75_001); // the process that claimed it died long ago
    const w = worker(deps, { pollIntervalMs: 10 });
    w.start();
    await until(() => (rx.received.length === 0 ? undefined : true), 10_000, 5).catch(() => undefined); // then the expects below say what is missing
    await w.stop();
    expect(rx.received).toHaveLength(1); // within 10 s, not after the 15-s timeout and its margin
  });

  test("stop() aborts a request in flight, records nothing and gives the lease back", async () => {
    const { deps, db, clock } = await setup();
    const owner = wallet();
    const rx = hangingReceiver(clock);
    const ep = await createEndpoint(deps, owner, { url: rx.url(), events: ["payment.completed"] });
    await enqueue(deps, owner);
    const w = createDeliveryWorker(deps, { allowPrivate: true, pollIntervalMs: 10 });
    w.start();
    await until(() => (rx.received.length === 0 ? undefined : true), 10_000, 5).catch(() => undefined); // then the expects below say what is missing
    expect(rx.received).toHaveLength(1);
    const started = performance.now();
    await w.stop();
    expect(performance.now() - started).toBeLessThan(5000); // not the request's 15-s timeout
    expect((await deliveriesOf(deps, owner, ep.endpointId))[0]).toMatchObject({ status: "pending", attempts: 0 });
    expect(db.sqlite.query("SELECT claimed_until FROM webhook_deliveries").get()).toEqual({ claimed_until: null });
    expect(await w.runOnce()).toBe(0); // stopped for good
  });
});

describe("the started loop", () => {
  test("delivers what is enqueued while it runs, and stops", async () => {
    const { deps, clock } = await setup();
    const owner = wallet();
    const rx = startReceiver(clock, () => []);
    await createEndpoint(deps, owner, { url: rx.url(), events: ["payment.completed"] });
    const w = worker(deps, { pollIntervalMs: 10 });
    w.start();
    w.start(); // a second start is a no-op
    await enqueue(deps, owner);
    await enqueue(deps, owner);
    await until(() => (rx.received.length < 2 ? undefined : true), 10_000, 5).catch(() => undefined); // then the expects below say what is missing
    await w.stop();
    expect(rx.received).toHaveLength(2);
  });
});

/** A receiver that holds every connection open until `release` (or the test's cleanup). */
function hangingReceiver(clock: Clock) {
  let release: () => void = () => undefined;
  const hang = new Promise<void>((resolve) => (release = resolve));
  cleanups.push(() => release());
  const receiver = startReceiver(clock, () => [], async () => {
    await hang;
    return new Response("late");
  });
  return Object.assign(receiver, { release: () => release() });
}

describe("the started loop is fair", () => {
  test("an endpoint that holds its connections, with deliveries piling up, holds one slot: another owner's delivery goes at once", async () => {
    const { deps, clock } = await setup();
    const slow = hangingReceiver(clock);
    const quick = startReceiver(clock, () => []);
    const [slowOwner, quickOwner] = [wallet(), wallet()];
    await createEndpoint(deps, slowOwner, { url: slow.url(), events: ["payment.completed"] });
    await createEndpoint(deps, quickOwner, { url: quick.url(), events: ["payment.completed"] });
    for (let i = 0; i < 5; i++) await enqueue(deps, slowOwner); // older than the other owner's
    await enqueue(deps, quickOwner);
    const w = worker(deps, { pollIntervalMs: 10, batchSize: 2 });
    w.start();
    // Both go in the first batch; either receiver may read its request first.
    await until(() => (quick.received.length === 0 || slow.received.length === 0 ? undefined : true), 10_000, 5).catch(() => undefined); // then the expects below say what is missing
    expect(quick.received).toHaveLength(1);
    expect(slow.received).toHaveLength(1); // one at a time to an endpoint
    // A second owner's event while the slow endpoint still holds its request: delivered too.
    await enqueue(deps, quickOwner);
    await until(() => (quick.received.length < 2 ? undefined : true), 10_000, 5).catch(() => undefined); // then the expects below say what is missing
    expect(quick.received).toHaveLength(2);
    slow.release();
    await until(() => (slow.received.length < 5 ? undefined : true), 10_000, 5).catch(() => undefined); // then the expects below say what is missing
    await w.stop();
    expect(slow.received).toHaveLength(5); // then, in turn, all of its own
  });
});

describe("the claim order", () => {
  /** `count` endpoints of `owner`, and `events` events fanned out to all of them, a second apart. */
  async function backlog(deps: Deps, clock: Clock, owner: string, count: number, events: number): Promise<string[]> {
    const endpoints: string[] = [];
    for (let i = 0; i < count; i++) endpoints.push((await createEndpoint(deps, owner, { url: `https://example.com/${i}`, events: ["payment.completed"] })).endpointId);
    for (let i = 0; i < events; i++) {
      await enqueue(deps, owner);
      clock.advance(1000);
    }
    return endpoints;
  }

  function claim(deps: Deps, clock: Clock, limit: number, fair: Partial<Parameters<typeof store.claimDueDeliveries>[1]> = {}) {
    const now = clock.now();
    return store.claimDueDeliveries(deps.db, { now, leaseUntil: now + 75_000, token: `claim_${crypto.randomUUID()}`, limit, kinds: ["owner_endpoint", "agent"], ...fair });
  }

  const count = (claimed: store.ClaimedDelivery[], owner: string) => claimed.filter((d) => d.owner === owner).length;

  test("an owner with more endpoints than there are slots gets at most perOwner of them; another owner's newer delivery is claimed with them", async () => {
    const { deps, clock } = await setup();
    const [a, b] = [wallet(), wallet()];
    const aEndpoints = await backlog(deps, clock, a, 20, 2); // 40 due, all older than B's
    await backlog(deps, clock, b, 1, 1);
    const claimed = await claim(deps, clock, 16, { perEndpoint: 1, perOwner: 4 });
    expect([count(claimed, a), count(claimed, b)]).toEqual([4, 1]);
    // A's four are the heads (first events) of four different endpoints.
    expect(new Set(claimed.filter((d) => d.owner === a).map((d) => d.endpointId)).size).toBe(4);
    expect(claimed.filter((d) => d.owner === a).every((d) => aEndpoints.includes(d.endpointId))).toBe(true);
  });

  test("owners with the fewest in flight come first, however old the others' backlog", async () => {
    const { deps, clock } = await setup();
    const [a, b, c] = [wallet(), wallet(), wallet()];
    await backlog(deps, clock, a, 5, 3);
    await backlog(deps, clock, b, 2, 2);
    await backlog(deps, clock, c, 1, 1);
    // One free slot, A and B with deliveries in flight: C's, the newest of all, takes it.
    expect((await claim(deps, clock, 1, { perEndpoint: 1, perOwner: 4, ownerLoad: { [a]: 3, [b]: 1 } })).map((d) => d.owner)).toEqual([c]);
    // Then B (one in flight) before A (three), and A not past its bound.
    const next = await claim(deps, clock, 16, { perEndpoint: 1, perOwner: 4, ownerLoad: { [a]: 3, [b]: 1, [c]: 1 } });
    expect([count(next, a), count(next, b), count(next, c)]).toEqual([1, 2, 0]);
    expect(await claim(deps, clock, 16, { perEndpoint: 1, perOwner: 4, ownerLoad: { [a]: 4, [b]: 4, [c]: 4 } })).toEqual([]);
  });

  test("one at a time per endpoint, its oldest due first; busy endpoints, leased rows and retries not yet due are left out", async () => {
    const { deps, db, clock } = await setup();
    const owner = wallet();
    const [x, y] = (await backlog(deps, clock, owner, 2, 3)) as [string, string];
    const first = await claim(deps, clock, 16, { perEndpoint: 1 });
    expect(first.map((d) => d.endpointId).sort()).toEqual([x, y].sort());
    // x's head is leased (in flight elsewhere): x's next one is its oldest claimable, unless x is busy here.
    expect(await claim(deps, clock, 16, { perEndpoint: 1, busy: [`owner_endpoint ${x}`, `owner_endpoint ${y}`] })).toEqual([]);
    const second = await claim(deps, clock, 16, { perEndpoint: 1, busy: [`owner_endpoint ${y}`] });
    const xs = (await deliveriesOf(deps, owner, x)).reverse(); // oldest first
    expect(second.map((d) => d.id)).toEqual([xs[1]!.deliveryId]);
    // A retry due later is not claimed before its time.
    db.sqlite.query("UPDATE webhook_deliveries SET next_attempt_at = ?, claimed_until = NULL WHERE endpoint_id = ?").run(clock.now() + 5000, y);
    expect((await claim(deps, clock, 16, { perEndpoint: 1 })).map((d) => d.endpointId)).toEqual([x]);
  });

  test("deliveries due at the same millisecond go in the order they were written, not of their random ids", async () => {
    const { deps, db, clock } = await setup();
    const owner = wallet();
    const [x] = (await backlog(deps, clock, owner, 1, 0)) as [string];
    // Two events of one write (as a purchase's payment.completed and feature.unlocked), the later one's id first.
    await db.write(() => {
      for (const [event, delivery] of [["evt_b", "whd_z"], ["evt_a", "whd_a"]] as const) {
        store.insertEventInWrite(db, { id: event, targetKind: "owner", targetId: owner, type: "payment.completed", payload: "{}", createdAt: clock.now() });
        store.insertDeliveryInWrite(db, { id: delivery, eventId: event, endpointKind: "owner_endpoint", endpointId: x, now: clock.now() });
      }
    });
    expect((await claim(deps, clock, 16, { perEndpoint: 1 })).map((d) => d.id)).toEqual(["whd_z"]);
    expect((await claim(deps, clock, 16, { perEndpoint: 1 })).map((d) => d.id)).toEqual(["whd_a"]); // the next, once the first is leased
    db.sqlite.query("UPDATE webhook_deliveries SET claimed_until = NULL").run();
    expect((await claim(deps, clock, 16, { perEndpoint: 2 })).map((d) => d.id)).toEqual(["whd_z", "whd_a"]);
  });

  test("without per-owner bounds (runOnce), endpoints take turns: every endpoint's first before any second", async () => {
    const { deps, clock } = await setup();
    const owner = wallet();
    const [x, y] = (await backlog(deps, clock, owner, 2, 3)) as [string, string];
    const claimed = await claim(deps, clock, 4);
    const order = claimed.map((d) => d.endpointId);
    expect(order.filter((e) => e === x)).toHaveLength(2);
    expect(order.filter((e) => e === y)).toHaveLength(2);
    const [xs, ys] = [(await deliveriesOf(deps, owner, x)).reverse(), (await deliveriesOf(deps, owner, y)).reverse()];
    expect(claimed.map((d) => d.id).sort()).toEqual([xs[0]!, xs[1]!, ys[0]!, ys[1]!].map((d) => d.deliveryId).sort());
  });

  test("an agent's notifications count against the wallet that owns the agent", async () => {
    const { deps, db, clock } = await setup();
    const [a, b] = [wallet(), wallet()];
    await backlog(deps, clock, a, 1, 1);
    const notify = (agentId: string, agentOwner: string | null) =>
      db.write(() => enqueueEventInWrite(deps, { targetKind: "agent", targetId: agentId, agentOwner, type: "conversation.started", payload: {} }));
    await notify("agt_a", a);
    await notify("agt_b", b);
    await notify("agt_orphan", null); // an agent gone when the event was written counts against itself
    const claimed = await claim(deps, clock, 16, { perEndpoint: 1, perOwner: 1 });
    expect(claimed.map((d) => [d.endpointKind, d.owner]).sort()).toEqual(
      [
        ["owner_endpoint", a],
        ["agent", b],
        ["agent", "agt_orphan"],
      ].sort(),
    );
  });
});

describe("the started loop bounds each owner's slots", () => {
  test("an owner whose endpoints all hold their connections gets perOwner slots; the others' deliveries go at once", async () => {
    const { deps, clock } = await setup();
    const slow = hangingReceiver(clock);
    const quick = startReceiver(clock, () => []);
    const slowOwner = wallet();
    for (let i = 0; i < 6; i++) await createEndpoint(deps, slowOwner, { url: slow.url(`/${i}`), events: ["payment.completed"] });
    for (let i = 0; i < 2; i++) await enqueue(deps, slowOwner); // 12 deliveries, older than the others'
    const others = [wallet(), wallet()];
    for (const owner of others) await createEndpoint(deps, owner, { url: quick.url(), events: ["payment.completed"] });
    const w = worker(deps, { pollIntervalMs: 10, batchSize: 4, perOwner: 2 });
    w.start();
    await until(() => (slow.received.length < 2 ? undefined : true), 10_000, 5).catch(() => undefined); // then the expects below say what is missing
    for (const owner of others) await enqueue(deps, owner);
    await until(() => (quick.received.length < 2 ? undefined : true), 10_000, 5).catch(() => undefined); // then the expects below say what is missing
    expect(quick.received).toHaveLength(2);
    expect(slow.received).toHaveLength(2); // two of its six endpoints, however many slots are free
    slow.release();
    await until(() => (slow.received.length < 12 ? undefined : true), 10_000, 5).catch(() => undefined); // then the expects below say what is missing
    await w.stop();
    expect(slow.received).toHaveLength(12); // then all of its own
  });
});

describe("agent targets (marketplace notifications)", () => {
  test("agent events wait for a worker that knows agents; it signs with the agent's secret and hands back the answer", async () => {
    const { deps, db, clock } = await setup();
    const agentSecret = newWebhookSecret(cryptoRandom);
    const rx = startReceiver(clock, () => [agentSecret], (n) =>
      n === 1 ? Response.json({ reply: "hello from the agent" }) : new Response(null, { status: 410 }),
    );
    const enqueueAgent = (type: string) =>
      db.write(() => enqueueEventInWrite(deps, { targetKind: "agent", targetId: "agt_1", type, payload: { conversationId: "conv_1" } }));
    const eventId = await enqueueAgent("conversation.started");
    expect(await worker(deps).runOnce()).toBe(0);

    const answers: { type: string; body: string }[] = [];
    const gone: string[] = [];
    const w = worker(deps, {
      agents: {
        resolve: async (agentId) => (agentId === "agt_1" ? { url: rx.url("/agent"), secrets: [agentSecret], enabled: true } : null),
        maxResponseBytes: 16 * 1024,
        answerWrite: async (d, response) => {
          answers.push({ type: d.type, body: response.body });
          return null;
        },
        goneInWrite: (agentId) => {
          gone.push(agentId);
          if (gone.length === 1) throw new Error("disk full"); // the pause cannot be written: nor is the attempt
          return true;
        },
      },
    });
    expect(await w.runOnce()).toBe(1);
    expect(rx.received[0]).toMatchObject({ path: "/agent", id: eventId, verified: [true] });
    expect(answers).toEqual([{ type: "conversation.started", body: '{"reply":"hello from the agent"}' }]);

    const goneId = await enqueueAgent("message.received");
    const status = () => db.sqlite.query("SELECT status, attempts FROM webhook_deliveries WHERE event_id = ?").get(goneId);
    await w.runOnce();
    // The 410 and the pause are one write: neither was recorded, so the delivery is not failed for good.
    expect(status()).toMatchObject({ status: "pending", attempts: 0 });
    clock.advance(10 * 60_000); // its lease ran out
    await w.runOnce();
    expect(gone).toEqual(["agt_1", "agt_1"]);
    expect(status()).toMatchObject({ status: "failed", attempts: 1 });
  });
});

describe("an agent answer's write", () => {
  test("is written only with its attempt: an attempt not recorded (its lease lost) writes no answer", async () => {
    const { deps, db, clock } = await setup();
    const agentSecret = newWebhookSecret(cryptoRandom);
    const rx = startReceiver(clock, () => [agentSecret], () => Response.json({ reply: "hi" }));
    await db.write(() => enqueueEventInWrite(deps, { targetKind: "agent", targetId: "agt_1", type: "conversation.started", payload: {} }));
    const w = worker(deps, {
      agents: {
        resolve: async () => ({ url: rx.url("/agent"), secrets: [agentSecret], enabled: true }),
        answerWrite: async (_d, response) => {
          // Meanwhile another worker took the delivery over (its lease ran out while this one waited).
          db.sqlite.run("UPDATE webhook_deliveries SET claim_token = 'another worker'");
          return () => void db.sqlite.query("INSERT INTO ledger_meta (key, value) VALUES ('answer', ?)").run(response.body);
        },
      },
    });
    expect(await w.runOnce()).toBe(1);
    expect(db.sqlite.query("SELECT attempts, claim_token AS token FROM webhook_deliveries").get()).toEqual({ attempts: 0, token: "another worker" });
    expect(db.sqlite.query("SELECT key FROM ledger_meta WHERE key = 'answer'").all()).toEqual([]);
  });

  test("when it throws, only its own changes are undone and the attempt is recorded", async () => {
    const { deps, db, clock } = await setup();
    const agentSecret = newWebhookSecret(cryptoRandom);
    const rx = startReceiver(clock, () => [agentSecret], () => Response.json({ reply: "hi" }));
    const enqueue = () => db.write(() => enqueueEventInWrite(deps, { targetKind: "agent", targetId: "agt_1", type: "conversation.started", payload: {} }));
    const first = await enqueue();
    let calls = 0;
    const w = worker(deps, {
      agents: {
        resolve: async () => ({ url: rx.url("/agent"), secrets: [agentSecret], enabled: true }),
        answerWrite: async (_d, response) => {
          const n = ++calls;
          return () => {
            db.sqlite.query("INSERT INTO ledger_meta (key, value) VALUES (?, ?)").run(`answer-${n}`, response.body);
            if (n === 1) throw new Error("the answer's write fails");
          };
        },
      },
    });
    expect(await w.runOnce()).toBe(1);
    expect(db.sqlite.query("SELECT status, attempts FROM webhook_deliveries").get()).toEqual({ status: "succeeded", attempts: 1 });
    expect(db.sqlite.query("SELECT key FROM ledger_meta WHERE key LIKE 'answer-%'").all()).toEqual([]); // undone alone
    clock.advance(10 * 60_000);
    expect(await w.runOnce()).toBe(0); // recorded: never sent again
    await enqueue();
    expect(await w.runOnce()).toBe(1);
    expect(db.sqlite.query("SELECT key, value FROM ledger_meta WHERE key LIKE 'answer-%'").all()).toEqual([{ key: "answer-2", value: '{"reply":"hi"}' }]);
    expect(rx.received.map((r) => r.id)[0]).toBe(first);
    expect(rx.received).toHaveLength(2);
  });
});

describe("durability", () => {
  const KEY = new Uint8Array(32).fill(9);

  async function fileDeps(path: string, clock: Clock): Promise<{ deps: Deps; db: Db }> {
    const db = openDatabase(path);
    migrate(db.sqlite, clock.now(), MIGRATIONS);
    const deps = await createDeps({
      config: loadConfig({ DATA_DIR: "/nonexistent", LOG_LEVEL: "silent", AUTH_RATE_LIMIT: "off", ALLOW_PRIVATE_NETWORK_TARGETS: "true" }),
      secrets: { jwtSecret: new TextEncoder().encode("unit-test-secret-unit-test-secret-0001"), jwtSecretPrevious: null, walletEncryptionKey: KEY },
      baseUrl: "http://walletgate.test",
      db,
      clock,
      random: cryptoRandom,
      log: createLogger("silent", "json"),
    });
    return { deps, db };
  }

  test("events committed before a restart are delivered by a new worker on the re-opened database", async () => {
    const dir = mkdtempSync(join(tmpdir(), "walletgate-outbox-"));
    cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
    const path = join(dir, "walletgate.db");
    const clock = manualClock();
    const owner = wallet();
    let secret = "";
    const rx = startReceiver(clock, () => [secret]);

    const first = await fileDeps(path, clock);
    const ep = await createEndpoint(first.deps, owner, { url: rx.url(), events: ["payment.completed", "feature.unlocked"] });
    secret = ep.secret;
    // The event commits with the change that caused it — and a rolled-back change leaves no event.
    const committed = await first.db.write(() => enqueueEventInWrite(first.deps, { targetKind: "owner", targetId: owner, type: "payment.completed", payload: { amount: "1" } }));
    const failed = first.db.write(() => {
      enqueueEventInWrite(first.deps, { targetKind: "owner", targetId: owner, type: "feature.unlocked", payload: {} });
      throw new Error("the purchase failed");
    });
    expect(await failed.catch((err: Error) => err.message)).toBe("the purchase failed");
    // A worker that claimed the second event and died with the process.
    const inFlight = await first.db.write(() => enqueueEventInWrite(first.deps, { targetKind: "owner", targetId: owner, type: "feature.unlocked", payload: { accessToken: "ft_x" } }));
    await store.claimDueDeliveries(first.db, { now: clock.now(), leaseUntil: clock.now() + 75_000, token: "claim_dead", limit: 1, kinds: ["owner_endpoint"] });
    first.db.close();

    const second = await fileDeps(path, clock);
    cleanups.push(() => second.db.close());
    const w = worker(second.deps);
    expect(await w.runOnce()).toBe(1);
    clock.advance(75_000);
    expect(await w.runOnce()).toBe(1);
    expect(rx.received.map((r) => r.id).sort()).toEqual([committed, inFlight].sort());
    expect(rx.received.every((r) => r.verified[0])).toBe(true);
    expect(second.db.sqlite.query("SELECT COUNT(*) AS n FROM outbox_events").get()).toEqual({ n: 2 });
  });
});

describe("the purge of deliveries whose endpoint is gone", () => {
  test("walks the endpoints in runs, letting the event loop turn between them, and still finds the orphans", async () => {
    const { deps, db, clock } = await testDeps();
    const now = clock.now();
    const endpoints = 2 * STEP_ROWS + 100;
    await db.write(() => {
      const endpoint = db.sqlite.query(
        "INSERT INTO webhook_endpoints (id, owner, url, events, enabled, secret_iv, secret_ciphertext, created_at, updated_at) VALUES (?, 'owner', 'https://x.example/', '[]', 1, ?, ?, ?, ?)",
      );
      const delivery = db.sqlite.query(
        `INSERT INTO webhook_deliveries (id, event_id, endpoint_kind, endpoint_id, status, attempts, next_attempt_at, created_at, updated_at)
         VALUES (?, 'evt_1', 'owner_endpoint', ?, 'succeeded', 1, NULL, ?, ?)`,
      );
      db.sqlite.query("INSERT INTO outbox_events (id, target_kind, target_id, type, payload, created_at) VALUES ('evt_1', 'owner', 'owner', 'product.created', '{}', ?)").run(now);
      for (let i = 0; i < endpoints; i++) {
        const id = `whe_${String(i).padStart(5, "0")}`;
        endpoint.run(id, new Uint8Array(12), new Uint8Array(48), now, now);
        delivery.run(`whd_${i}`, id, now, now);
      }
      delivery.run("whd_orphan", "whe_99999", now, now); // its endpoint deleted by a delete a crash cut short
    });
    let turns = 0;
    let purging = true;
    const count = () => {
      turns++;
      if (purging) setImmediate(count);
    };
    setImmediate(count);
    const removed = await store.purgeOrphanDeliveries(db);
    purging = false;
    expect(removed).toBe(1);
    // Three runs of ids: the loop turned between them (one uninterrupted walk let nothing else run).
    expect(turns).toBeGreaterThanOrEqual(2);
    expect(db.sqlite.query("SELECT COUNT(*) AS n FROM webhook_deliveries").get()).toEqual({ n: endpoints });
  });
});

describe("retention (WEBHOOK_RETENTION_DAYS)", () => {
  test("finished deliveries older than the retention go with their attempts and orphaned events; pending ones and their events stay", async () => {
    const { deps, db, clock } = await testDeps({ WEBHOOK_RETENTION_DAYS: "30", ALLOW_PRIVATE_NETWORK_TARGETS: "true" });
    const owner = wallet();
    const rx = startReceiver(clock, () => [], (_n, r) => new Response(r.path, { status: r.path === "/ok" ? 200 : r.path === "/gone" ? 410 : 500 }));
    const endpoints = await Promise.all(["/ok", "/gone", "/down"].map((path) => createEndpoint(deps, owner, { url: rx.url(path), events: ["payment.completed"] })));
    const [ok, gone, down] = endpoints.map((e) => e.endpointId) as [string, string, string];
    const oldEvent = await enqueue(deps, owner);
    const nobodysEvent = await enqueue(deps, wallet()); // an owner without endpoints: no delivery at all
    const w = worker(deps);
    expect(await w.runOnce()).toBe(3);
    const [oldOk] = await deliveriesOf(deps, owner, ok);
    expect(oldOk).toMatchObject({ status: "succeeded" });
    expect((await deliveriesOf(deps, owner, gone))[0]).toMatchObject({ status: "failed" });
    expect((await deliveriesOf(deps, owner, down))[0]).toMatchObject({ status: "pending" }); // retried later: not run again here

    clock.advance(30 * DAY_MS - 1); // not yet past the retention
    // Only the event nobody receives goes: a day old is enough for it, whatever the retention.
    expect(await purgeWebhooks(deps)).toEqual({ webhookDeliveries: 0, webhookEvents: 1, webhookBodiesSealed: 0, webhookOldSecrets: 0, webhookDeletionRecords: 0 });
    expect(await store.findEvent(db, nobodysEvent)).toBeNull();
    clock.advance(2);
    const newEvent = await enqueue(deps, owner);
    // The new event to /ok and /down, and the retry of /down's old delivery (500 again: still pending).
    expect(await w.runOnce()).toBe(3);
    // /ok's and /gone's old deliveries; their event stays, /down's pending delivery still refers to it.
    expect(await purgeWebhooks(deps)).toEqual({ webhookDeliveries: 2, webhookEvents: 0, webhookBodiesSealed: 0, webhookOldSecrets: 0, webhookDeletionRecords: 0 });

    expect((await deliveriesOf(deps, owner, ok)).map((d) => d.eventId)).toEqual([newEvent]);
    expect(await deliveriesOf(deps, owner, gone)).toEqual([]);
    expect((await deliveriesOf(deps, owner, down)).map((d) => [d.eventId, d.status]).sort()).toEqual([[newEvent, "pending"], [oldEvent, "pending"]].sort());
    expect(await store.findEvent(db, oldEvent)).not.toBeNull(); // a pending delivery still needs it
    expect(await store.findEvent(db, nobodysEvent)).toBeNull();
    expect(await codeOf(listDeliveryAttempts(deps, owner, oldOk!.deliveryId))).toBe("NOT_FOUND");
    expect(db.sqlite.query("SELECT COUNT(*) AS n FROM webhook_attempts WHERE delivery_id = ?").get(oldOk!.deliveryId)).toEqual({ n: 0 });
  });

  test("more than a purge step takes: every old finished delivery and unreferenced event goes, pending ones and theirs stay", async () => {
    const { deps, db, clock } = await testDeps({ WEBHOOK_RETENTION_DAYS: "30" });
    const old = clock.now() - 31 * DAY_MS;
    // The deliveries' endpoint exists (a delivery of a deleted one is purged as an orphan, whatever its age).
    const endpoint = await createEndpoint(deps, "o", { url: "https://hooks.example.test/x", events: ["payment.completed"] });
    db.sqlite.run("UPDATE webhook_endpoints SET id = 'whe_1' WHERE id = ?", [endpoint.endpointId]);
    const event = db.sqlite.query("INSERT INTO outbox_events (id, target_kind, target_id, type, payload, created_at) VALUES (?, 'owner', 'o', 'payment.completed', 'x', ?)");
    const delivery = db.sqlite.query(
      `INSERT INTO webhook_deliveries (id, event_id, endpoint_kind, endpoint_id, status, next_attempt_at, created_at, updated_at)
       VALUES (?, ?, 'owner_endpoint', 'whe_1', ?, ?, ?, ?)`,
    );
    db.sqlite.run("BEGIN");
    for (let i = 0; i < 2 * STEP_ROWS + 3; i++) {
      event.run(`evt_${i}`, old);
      const pending = i % 50 === 0;
      delivery.run(`whd_${i}`, `evt_${i}`, pending ? "pending" : i % 2 ? "succeeded" : "failed", pending ? clock.now() : null, old, old);
    }
    db.sqlite.run("COMMIT");
    const pending = Math.ceil((2 * STEP_ROWS + 3) / 50);
    expect(await purgeWebhooks(deps)).toMatchObject({ webhookDeliveries: 2 * STEP_ROWS + 3 - pending, webhookEvents: 2 * STEP_ROWS + 3 - pending });
    expect(db.sqlite.query("SELECT COUNT(*) AS n FROM webhook_deliveries WHERE status = 'pending'").get()).toEqual({ n: pending });
    expect(db.sqlite.query("SELECT COUNT(*) AS n FROM outbox_events").get()).toEqual({ n: pending });
  });

  test("an endpoint's delete takes its deliveries in steps; the purge takes those a crash left, and events no delivery refers to", async () => {
    const { deps, db, clock } = await testDeps({});
    const owner = wallet();
    const ep = await createEndpoint(deps, owner, { url: "https://hooks.example.test/x", events: ["payment.completed"] });
    const event = db.sqlite.query("INSERT INTO outbox_events (id, target_kind, target_id, type, payload, created_at) VALUES (?, 'owner', ?, 'payment.completed', 'x', ?)");
    const delivery = db.sqlite.query(
      `INSERT INTO webhook_deliveries (id, event_id, endpoint_kind, endpoint_id, status, next_attempt_at, created_at, updated_at)
       VALUES (?, ?, 'owner_endpoint', ?, 'succeeded', NULL, ?, ?)`,
    );
    const many = 2 * STEP_ROWS + 3;
    db.sqlite.run("BEGIN");
    for (let i = 0; i < many; i++) {
      event.run(`evt_${i}`, owner, clock.now());
      delivery.run(`whd_${i}`, `evt_${i}`, ep.endpointId, clock.now(), clock.now());
      delivery.run(`whd_gone_${i}`, `evt_${i}`, "whe_deleted_before_a_crash", clock.now(), clock.now());
    }
    db.sqlite.run("COMMIT");
    const deliveries = (id: string) => (db.sqlite.query("SELECT COUNT(*) AS n FROM webhook_deliveries WHERE endpoint_id = ?").get(id) as { n: number }).n;
    const events = () => (db.sqlite.query("SELECT COUNT(*) AS n FROM outbox_events").get() as { n: number }).n;
    expect(await deleteEndpoint(deps, owner, ep.endpointId)).toEqual({ deleted: true });
    expect([deliveries(ep.endpointId), events()]).toEqual([0, many]); // the other deliveries still refer to them
    // Retention off: the orphans of an endpoint deleted before a crash go, with the events they alone kept.
    expect(await purgeWebhooks(deps)).toMatchObject({ webhookDeliveries: many });
    expect([deliveries("whe_deleted_before_a_crash"), events()]).toEqual([0, 0]);
    // An event no delivery ever referred to (an owner with no endpoint) goes a day after it was made.
    const lonely = "evt_lonely";
    event.run(lonely, owner, clock.now());
    expect(await purgeWebhooks(deps)).toMatchObject({ webhookEvents: 0 });
    clock.advance(DAY_MS + 1);
    expect(await purgeWebhooks(deps)).toMatchObject({ webhookEvents: 1 });
    expect(events()).toBe(0);
  });

  test("an event nobody receives goes however long the purge did not run (downtime, an interval over a day)", async () => {
    const { deps, db, clock } = await setup();
    const event = db.sqlite.query("INSERT INTO outbox_events (id, target_kind, target_id, type, payload, created_at) VALUES (?, 'owner', 'o', 'payment.completed', 'x', ?)");
    event.run("evt_left_by_an_earlier_process", clock.now() - 40 * DAY_MS); // the first run of a process looks at all
    event.run("evt_new", clock.now());
    expect(await purgeWebhooks(deps)).toMatchObject({ webhookEvents: 1 });
    clock.advance(12 * 3_600_000);
    event.run("evt_later", clock.now());
    clock.advance(3 * DAY_MS); // the next run three days on: both are past a window of one day back
    expect(await purgeWebhooks(deps)).toMatchObject({ webhookEvents: 2 });
    expect((db.sqlite.query("SELECT COUNT(*) AS n FROM outbox_events").get() as { n: number }).n).toBe(0);
    // The clock stepped back three days: events made since are older than where the runs had looked.
    clock.advance(-3 * DAY_MS);
    event.run("evt_after_the_step", clock.now());
    clock.advance(DAY_MS + 1);
    expect(await purgeWebhooks(deps)).toMatchObject({ webhookEvents: 1 });
  });

  test("off by default: nothing is purged however old", async () => {
    const { deps, db, clock } = await setup();
    const { owner, ep } = await queuedForOneEndpoint(deps, db, clock);
    expect(await worker(deps).runOnce()).toBe(1);
    clock.advance(3650 * DAY_MS);
    expect(await purgeWebhooks(deps)).toEqual({ webhookDeliveries: 0, webhookEvents: 0, webhookBodiesSealed: 0, webhookOldSecrets: 0, webhookDeletionRecords: 0 });
    expect(await deliveriesOf(deps, owner, ep.endpointId)).toHaveLength(1);
  });
});
