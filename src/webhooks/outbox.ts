// The durable outbox: events written with the change that caused them, fanned out to deliveries, and
// the worker that sends each attempt (signed anew) on the retry schedule until success or failure.
import type { Db } from "../db/open.ts";
import type { Deps } from "../deps.ts";
import { AppError, errorText, requirePage } from "../errors.ts";
import { toIso } from "../lib/clock.ts";
import { clusterName } from "../ledger/ledger.ts";
import { AES_GCM_IV_BYTES, decryptAesGcm, encryptAesGcm } from "../lib/aes-gcm.ts";
import { decodeBase64Strict, encodeBase64 } from "../lib/encoding.ts";
import { newId } from "../lib/ids.ts";
import { sleep as sleepUnlessStopped } from "../lib/sleep.ts";
import { endpointSigningSecrets } from "./endpoints.ts";
import { DEFAULT_TIMEOUT_MS, GuardedFetchError, guardedFetch, utf8Prefix } from "./guarded-fetch.ts";
import { signWebhook } from "./signing.ts";
import * as store from "./store.ts";

/**
 * Delay before attempt n+1 after attempt n failed: 5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 10 h — eight
 * attempts in all, the last about 28 h after the event (paygate.md).
 */
export const RETRY_SCHEDULE_MS: readonly number[] = [5e3, 5 * 60e3, 30 * 60e3, 2 * 3600e3, 5 * 3600e3, 10 * 3600e3, 10 * 3600e3];

/** The started delivery loop's slots one owner may hold at once (of 16 by default): docs/decisions.md. */
export const DEFAULT_PER_OWNER = 4;

/** Bytes of each response kept in the attempt log. */
export const RECORDED_RESPONSE_BYTES = 1024;

const USER_AGENT = "walletgate-webhooks/1";

/** After the attempt timeout, how long an attempt's own record may take before its lease counts as a dead process's. */
const INHERITED_MARGIN_MS = 5_000;

export type OutboxEvent = {
  /** `evt_…`; a new one when absent. */
  id?: string;
  /** "owner": the owner's subscribed endpoints; "agent": the agent's own endpoint. */
  targetKind: store.TargetKind;
  /** the owner's wallet, or the agent id */
  targetId: string;
  type: string;
  /** The event's fields; the body sent is `{ id, type, ...payload }` (so no `id` or `type` here). */
  payload: Record<string, unknown>;
  /** Owner events only: deliver to this one endpoint whatever it subscribes to (webhook.test). */
  endpointId?: string;
  /**
   * Agent events: the wallet that owns the agent. Its notifications share that wallet's slots of the
   * delivery worker (as an owner's events share the owner's); without it they count against the agent alone.
   */
  agentOwner?: string | null;
};

/** What writing an event needs: the write it joins, the clock, ids, and the key its body is sealed with. */
export type OutboxDeps = Pick<Deps, "db" | "clock" | "random" | "wallets">;

/**
 * Stored event bodies are sealed: AES-256-GCM under WALLET_ENCRYPTION_KEY, bound to the event id, as
 * `sealed:v1:` + base64 of the IV and the ciphertext with its tag. Some bodies carry secrets (the
 * accessToken of feature.unlocked), which are never kept in clear. A body stored before bodies were
 * sealed is its JSON text: it opens as itself until the purge seals it (sealClearEventBodies).
 */
const SEALED = "sealed:v1:";

/** Event body fields that hold secrets (feature.unlocked's token): never stored in clear, nor in a receiver's echo. */
const SECRET_FIELDS = ["accessToken"] as const;
const REDACTED = "[redacted]";
/** The shortest start of a secret, cut off at the end of a recorded answer, that is still taken for it. */
const SECRET_PREFIX_MIN = 8;

/**
 * A receiver's answer as recorded: every secret of the body it was sent replaced, also one its echo (or the
 * read's byte limit) cut short at the end of the text.
 */
export function withoutSecretsOf(payload: string | null, answer: string): string {
  if (payload === null || !SECRET_FIELDS.some((field) => payload.includes(`"${field}"`))) return answer;
  let body: Record<string, unknown>;
  try {
    body = JSON.parse(payload) as Record<string, unknown>;
  } catch {
    return answer;
  }
  let text = answer;
  for (const field of SECRET_FIELDS) {
    const secret = body[field];
    if (typeof secret !== "string" || secret.length < SECRET_PREFIX_MIN) continue;
    text = text.replaceAll(secret, REDACTED);
    for (let k = secret.length - 1; k >= SECRET_PREFIX_MIN; k--) {
      if (text.endsWith(secret.slice(0, k))) {
        text = text.slice(0, text.length - k) + REDACTED;
        break;
      }
    }
  }
  return text;
}
const eventAad = (eventId: string) => new TextEncoder().encode(`walletgate outbox event ${eventId}`);

function sealEventBody(deps: OutboxDeps, eventId: string, body: string): string {
  const { iv, ciphertext } = encryptAesGcm(deps.wallets.encryptionKey, new TextEncoder().encode(body), eventAad(eventId), deps.random);
  const packed = new Uint8Array(iv.length + ciphertext.length);
  packed.set(iv, 0);
  packed.set(ciphertext, iv.length);
  return SEALED + encodeBase64(packed);
}

/** The body sent for a stored event; null when it does not open (WALLET_ENCRYPTION_KEY changed?). */
export function openEventBody(deps: Pick<Deps, "wallets">, eventId: string, stored: string): string | null {
  if (!stored.startsWith(SEALED)) return stored.startsWith("{") ? stored : null;
  const packed = decodeBase64Strict(stored.slice(SEALED.length));
  if (packed === null || packed.length < AES_GCM_IV_BYTES) return null;
  const plain = decryptAesGcm(deps.wallets.encryptionKey, packed.subarray(0, AES_GCM_IV_BYTES), packed.subarray(AES_GCM_IV_BYTES), eventAad(eventId));
  return plain === null ? null : new TextDecoder().decode(plain);
}

/** The body of event `eventId` as it is sent, or null when there is no such event (or it does not open). */
export async function eventBody(deps: Pick<Deps, "db" | "wallets">, eventId: string): Promise<string | null> {
  const row = await store.findEvent(deps.db, eventId);
  return row === null ? null : openEventBody(deps, eventId, row.payload);
}

/** Seals the bodies stored in clear by earlier versions, a batch per write, until done or `stopping`; returns how many. */
export async function sealClearEventBodies(deps: OutboxDeps, { batch = 500, stopping }: { batch?: number; stopping?: AbortSignal } = {}): Promise<number> {
  let sealed = 0;
  while (stopping?.aborted !== true) {
    const rows = await store.findClearEvents(deps.db, batch); // a read: no write at all when there are none
    if (rows.length > 0) {
      await deps.db.write(() => {
        for (const row of rows) store.setEventPayloadInWrite(deps.db, row.id, row.payload, sealEventBody(deps, row.id, row.payload));
      });
    }
    sealed += rows.length;
    if (rows.length < batch) break;
  }
  return sealed;
}

function enqueueInWrite(deps: OutboxDeps, event: OutboxEvent): { eventId: string; deliveryIds: string[] } {
  if ("id" in event.payload || "type" in event.payload) throw new Error("an outbox payload must not carry id or type: the outbox sets them");
  const { db, random } = deps;
  const now = deps.clock.now();
  const eventId = event.id ?? newId("evt", random);
  const body = sealEventBody(deps, eventId, JSON.stringify({ id: eventId, type: event.type, ...event.payload }));
  const agentOwner = event.targetKind === "agent" ? (event.agentOwner ?? null) : null;
  store.insertEventInWrite(db, { id: eventId, targetKind: event.targetKind, targetId: event.targetId, type: event.type, payload: body, createdAt: now, agentOwner });
  const targets: { kind: store.EndpointKind; id: string }[] =
    event.targetKind === "agent"
      ? [{ kind: "agent", id: event.targetId }]
      : store.fanOutTargetsInWrite(db, event.targetId, event.type, event.endpointId ?? null).map((id) => ({ kind: "owner_endpoint", id }));
  const deliveryIds = targets.map((target) => {
    const id = newId("whd", random);
    store.insertDeliveryInWrite(db, { id, eventId, endpointKind: target.kind, endpointId: target.id, now });
    return id;
  });
  return { eventId, deliveryIds };
}

/**
 * Writes an event and its deliveries. SYNCHRONOUS, and to be called inside the caller's
 * `db.write(() => …)`, so the event commits (or not) with the change that caused it. Owner events go to
 * the owner's enabled endpoints subscribed to the type; agent events to the agent. Returns the event id.
 */
export function enqueueEventInWrite(deps: OutboxDeps, event: OutboxEvent): string {
  return enqueueInWrite(deps, event).eventId;
}

const endpointNotFound = () => new AppError("NOT_FOUND", "no such webhook endpoint");
const endpointDisabled = () => new AppError("INVALID_STATE", "the webhook endpoint is disabled; enable it first");

/** Whether an owner's endpoint still wants events of `type` (a test event goes to it whatever it subscribes to). */
const subscribes = (endpoint: store.EndpointRow, type: string) => type === "webhook.test" || (JSON.parse(endpoint.events) as string[]).includes(type);

/** POST /webhooks/:id/test: a `webhook.test` event to this one endpoint, whatever it subscribes to. */
export async function sendTestEvent(deps: Deps, owner: string, endpointId: string): Promise<{ deliveryId: string }> {
  const endpoint = await store.findOwnerEndpoint(deps.db, owner, endpointId);
  if (endpoint === null) throw endpointNotFound();
  if (endpoint.enabled !== 1) throw endpointDisabled();
  const now = deps.clock.now();
  const { deliveryIds } = await deps.db.write(() =>
    enqueueInWrite(deps, {
      targetKind: "owner",
      targetId: owner,
      type: "webhook.test",
      endpointId,
      payload: { endpointId, message: "This is a test event from walletgate.", timestamp: toIso(now), network: clusterName(deps.config.network) },
    }),
  );
  // Disabled or deleted between the check and the write.
  if (deliveryIds.length === 0) throw endpointDisabled();
  deps.log.info("webhook test event queued", { owner, endpointId, deliveryId: deliveryIds[0] });
  return { deliveryId: deliveryIds[0]! };
}

/** POST /deliveries/:id/resend: a new delivery of the same event to the same endpoint. */
export async function resendDelivery(deps: Deps, owner: string, deliveryId: string): Promise<{ deliveryId: string }> {
  const delivery = await store.findDelivery(deps.db, deliveryId);
  const endpoint = delivery?.endpointKind === "owner_endpoint" ? await store.findOwnerEndpoint(deps.db, owner, delivery.endpointId) : null;
  if (delivery === null || endpoint === null) throw new AppError("NOT_FOUND", "no such delivery");
  if (endpoint.enabled !== 1) throw endpointDisabled();
  if (!subscribes(endpoint, delivery.type)) {
    throw new AppError("INVALID_STATE", `the webhook endpoint no longer subscribes to ${delivery.type}; add it to its events first`);
  }
  const id = newId("whd", deps.random);
  const now = deps.clock.now();
  await deps.db.write(() => store.insertDeliveryInWrite(deps.db, { id, eventId: delivery.eventId, endpointKind: "owner_endpoint", endpointId: endpoint.id, now }));
  deps.log.info("webhook delivery resent", { owner, endpointId: endpoint.id, deliveryId: id, of: deliveryId });
  return { deliveryId: id };
}

/**
 * A step back of the wall clock (lib/clock-steps.ts, `stepMs` < 0) moves every pending delivery's next
 * attempt with it: a retry due in five minutes is still due in five minutes after the clock is set back an
 * hour (it would otherwise wait an hour and five minutes). Returns how many moved.
 */
export function moveRetriesWithClock(deps: Pick<Deps, "db">, stepMs: number, now: number): Promise<number> {
  return store.moveBackPendingDeliveries(deps.db, stepMs, now);
}

export type DeliveryView = {
  deliveryId: string;
  eventId: string;
  type: string;
  status: store.DeliveryStatus;
  attempts: number;
  lastStatusCode: number | null;
  nextAttemptAt: string | null;
  createdAt: string;
};

export const DELIVERY_LIST_LIMIT = { default: 20, max: 100 };

/** GET /webhooks/:id/deliveries: newest first. limit 1–100 (default 20), offset ≥ 0. */
export async function listDeliveries(
  deps: Deps,
  owner: string,
  endpointId: string,
  page: { limit?: number | undefined; offset?: number | undefined } = {},
): Promise<{ deliveries: DeliveryView[]; total: number }> {
  const { limit, offset } = requirePage(page, DELIVERY_LIST_LIMIT);
  if ((await store.findOwnerEndpoint(deps.db, owner, endpointId)) === null) throw endpointNotFound();
  const { rows, total } = await store.listDeliveries(deps.db, "owner_endpoint", endpointId, limit, offset);
  return {
    deliveries: rows.map((r) => ({
      deliveryId: r.id,
      eventId: r.eventId,
      type: r.type,
      status: r.status,
      attempts: r.attempts,
      lastStatusCode: r.lastStatusCode,
      nextAttemptAt: r.nextAttemptAt === null ? null : toIso(r.nextAttemptAt),
      createdAt: toIso(r.createdAt),
    })),
    total,
  };
}

export type AttemptView = { attempt: number; at: string; statusCode: number | null; durationMs: number; response: string | null; error: string | null };

/** The attempts of one of the owner's deliveries (the dashboard's delivery detail). */
export async function listDeliveryAttempts(deps: Deps, owner: string, deliveryId: string): Promise<{ attempts: AttemptView[] }> {
  const delivery = await store.findDelivery(deps.db, deliveryId);
  const endpoint = delivery?.endpointKind === "owner_endpoint" ? await store.findOwnerEndpoint(deps.db, owner, delivery.endpointId) : null;
  if (delivery === null || endpoint === null) throw new AppError("NOT_FOUND", "no such delivery");
  const rows = await store.listAttempts(deps.db, deliveryId);
  return {
    attempts: rows.map((r) => ({ attempt: r.attempt, at: toIso(r.at), statusCode: r.statusCode, durationMs: r.durationMs, response: r.response, error: r.error })),
  };
}

// ---------------------------------------------------------------------------------------------------
// The delivery worker

/** Where an agent's notifications go; the marketplace supplies it (marketplace.md "Provider notifications"). */
export type AgentTargets = {
  /** The agent's endpoint and signing secret(s); null when the agent is gone. Disabled or gone: the delivery fails unsent. */
  resolve(agentId: string): Promise<{ url: string; secrets: string[]; enabled: boolean } | null>;
  /** Bytes of an agent's answer kept for answerWrite (a `{"reply": …}` body). Default 1 KiB. */
  maxResponseBytes?: number;
  /**
   * A 2xx answer's own write (e.g. a synchronous reply), prepared before the attempt is recorded: the
   * function returned runs inside the write that records it, so a crash keeps both or neither (the
   * delivery is then sent again). If the function throws, only its changes are undone and the attempt
   * is still recorded (logged). Null: nothing to write.
   */
  answerWrite?(delivery: { deliveryId: string; eventId: string; type: string; agentId: string }, response: { status: number; body: string }): Promise<(() => void) | null>;
  /**
   * A `410 Gone` from `url`: pauses the agent inside the write that records the attempt (as an owner's
   * endpoint is disabled), so the delivery is never failed for good with the agent left active. True when
   * it paused it (still at that url).
   */
  goneInWrite?(agentId: string, url: string, now: number): boolean;
};

export type DeliveryWorkerOptions = {
  /** ALLOW_PRIVATE_NETWORK_TARGETS */
  allowPrivate: boolean;
  fetch?: typeof guardedFetch;
  /** Delays between attempts; attempts in all = length + 1. Default RETRY_SCHEDULE_MS. */
  schedule?: readonly number[];
  /** Deliveries claimed (and sent concurrently) per run; the started loop's slots. Default 16. */
  batchSize?: number;
  /** The started loop's slots one owner's deliveries may hold at once (an agent's count against its owner). Default 4. */
  perOwner?: number;
  /** Pause of the started loop when nothing was due. Default 1 s. */
  pollIntervalMs?: number;
  /** Per attempt. Default 15 s. */
  timeoutMs?: number;
  /** Present once the marketplace exists; without it agent deliveries wait for a worker that has it. */
  agents?: AgentTargets;
};

export type DeliveryWorker = {
  /** Claims and sends what is due now (one batch); resolves with how many deliveries it handled. */
  runOnce(): Promise<number>;
  /** Runs batches until stop(): at once while there is more due, else every pollIntervalMs. */
  start(): void;
  /** Stops the loop, aborts requests in flight (their leases are given back, nothing is recorded) and waits for it all. */
  stop(): Promise<void>;
};

type Target = { url: string; secrets: string[] | null; maxResponseBytes: number };

export function createDeliveryWorker(deps: Deps, options: DeliveryWorkerOptions): DeliveryWorker {
  const send = options.fetch ?? guardedFetch;
  const schedule = options.schedule ?? RETRY_SCHEDULE_MS;
  const maxAttempts = schedule.length + 1;
  const batchSize = options.batchSize ?? 16;
  const perOwner = options.perOwner ?? DEFAULT_PER_OWNER;
  const pollIntervalMs = options.pollIntervalMs ?? 1000;
  const timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  // Longer than any attempt can take, so a lease only runs out when its worker died mid-attempt.
  const leaseMs = timeoutMs + 60_000;
  const kinds: store.EndpointKind[] = options.agents === undefined ? ["owner_endpoint"] : ["owner_endpoint", "agent"];
  const shutdown = new AbortController();
  const running = new Set<Promise<unknown>>();
  let loop: Promise<void> | null = null;
  let wakeSleep: (() => void) | null = null;

  /** The endpoint to send to now; null when it is disabled or gone (it then receives nothing). */
  async function resolveTarget(d: store.ClaimedDelivery, now: number): Promise<Target | null> {
    if (d.endpointKind === "owner_endpoint") {
      const row = await store.findEndpoint(deps.db, d.endpointId);
      // An edit applies to pending retries: a type the owner unsubscribed from is no longer sent.
      if (row === null || row.enabled !== 1 || !subscribes(row, d.type)) return null;
      const previous = await store.listSigningPreviousSecrets(deps.db, row.id, now);
      return { url: row.url, secrets: endpointSigningSecrets(deps, row, previous, now), maxResponseBytes: RECORDED_RESPONSE_BYTES };
    }
    const agent = await options.agents!.resolve(d.endpointId);
    if (agent === null || !agent.enabled) return null;
    return { url: agent.url, secrets: agent.secrets, maxResponseBytes: options.agents!.maxResponseBytes ?? RECORDED_RESPONSE_BYTES };
  }

  async function deliver(d: store.ClaimedDelivery, token: string): Promise<void> {
    const ids = { deliveryId: d.id, eventId: d.eventId, endpointKind: d.endpointKind, endpointId: d.endpointId };
    const startedAt = deps.clock.now();
    const target = await resolveTarget(d, startedAt);
    if (target === null) {
      if (await store.failClaimedDelivery(deps.db, d.id, token, startedAt)) deps.metrics.webhookDelivered("failed");
      deps.log.info("webhook delivery dropped: endpoint disabled, gone, or no longer subscribed to its type", ids);
      return;
    }
    const attempt = d.attempts + 1;
    let statusCode: number | null = null;
    let body = "";
    let error: string | null = null;
    let durationMs = 0;
    const payload = openEventBody(deps, d.eventId, d.payload);
    if (payload === null || target.secrets === null || target.secrets.length === 0) {
      // Counted as a failed attempt, so the schedule still ends; fixing the key in time lets a retry through.
      error = `${payload === null ? "event body" : "signing secret"} cannot be decrypted`;
      deps.log.error(`webhook ${error} (WALLET_ENCRYPTION_KEY changed?)`, ids);
    } else {
      // Signed anew for each attempt: receivers refuse a webhook-timestamp older than 5 minutes.
      const headers = {
        ...signWebhook(target.secrets, d.eventId, Math.floor(startedAt / 1000), payload),
        "content-type": "application/json",
        "user-agent": USER_AGENT,
      };
      const t0 = performance.now();
      try {
        const answer = await send(
          target.url,
          { method: "POST", headers, body: payload, signal: shutdown.signal },
          { allowPrivate: options.allowPrivate, timeoutMs, maxResponseBytes: target.maxResponseBytes },
        );
        statusCode = answer.status;
        body = answer.body;
        durationMs = answer.durationMs;
      } catch (err) {
        if (shutdown.signal.aborted) {
          // Not an attempt: a restarted worker sends it again at once (receivers dedupe on webhook-id).
          await store.releaseClaim(deps.db, d.id, token);
          return;
        }
        durationMs = Math.round(performance.now() - t0);
        error = err instanceof GuardedFetchError ? `${err.reason}: ${err.message}` : "unexpected error";
        if (!(err instanceof GuardedFetchError)) deps.log.error("webhook attempt failed unexpectedly", { ...ids, error: errorText(err) });
      }
    }

    const now = deps.clock.now();
    const succeeded = statusCode !== null && statusCode >= 200 && statusCode < 300;
    const gone = statusCode === 410;
    const next: { status: store.DeliveryStatus; nextAttemptAt: number | null } = succeeded
      ? { status: "succeeded", nextAttemptAt: null }
      : gone || attempt >= maxAttempts
        ? { status: "failed", nextAttemptAt: null }
        : { status: "pending", nextAttemptAt: now + schedule[attempt - 1]! };
    const record: store.AttemptRecord = {
      attempt,
      at: startedAt,
      statusCode,
      durationMs,
      // A receiver that echoes what it got would otherwise put the body's secrets in the database in clear.
      response: statusCode === null ? null : utf8Prefix(new TextEncoder().encode(withoutSecretsOf(payload, body)), RECORDED_RESPONSE_BYTES),
      error,
    };
    const agent = d.endpointKind === "agent" ? options.agents : undefined;
    let answer: (() => void) | null = null;
    if (succeeded && agent?.answerWrite !== undefined) {
      try {
        answer = await agent.answerWrite({ deliveryId: d.id, eventId: d.eventId, type: d.type, agentId: d.endpointId }, { status: statusCode!, body });
      } catch (err) {
        deps.log.error("agent notification hook failed", { ...ids, error: errorText(err) });
      }
    }
    let disabled = false;
    const recorded = await deps.db.write(() => {
      const ok = store.recordAttemptInWrite(deps.db, d.id, token, record, next, now);
      if (ok && gone && d.endpointKind === "owner_endpoint") disabled = store.disableEndpointInWrite(deps.db, d.endpointId, target.url, now);
      if (ok && gone && agent?.goneInWrite !== undefined) disabled = agent.goneInWrite(d.endpointId, target.url, now);
      // The answer's own failure (a reply its table refuses) undoes only the answer: the attempt is
      // recorded either way, or the delivery would be sent again for ever.
      if (ok && answer !== null) deps.db.tryInWrite(answer, (err) => deps.log.error("agent answer not recorded", { ...ids, error: errorText(err) }));
      return ok;
    });
    if (!recorded) {
      deps.log.warn("webhook attempt not recorded: the delivery was deleted or its lease lost", ids);
      return;
    }
    deps.log.info("webhook attempt", { ...ids, attempt, statusCode, durationMs, status: next.status, ...(error === null ? {} : { error }) });
    deps.metrics.webhookAttempt(succeeded ? "success" : gone ? "gone" : "failure");
    if (next.status !== "pending") deps.metrics.webhookDelivered(next.status);
    if (disabled) deps.log.warn(agent === undefined ? "webhook endpoint disabled after 410 Gone" : "marketplace agent paused: its endpoint answered 410 Gone", ids);
  }

  /** Leases up to `limit` due deliveries (with `fair`: at most so many per endpoint and per owner, some endpoints left out). */
  async function claim(
    limit: number,
    fair: { perEndpoint?: number; busy?: readonly string[]; ownerLoad?: Record<string, number>; perOwner?: number } = {},
  ) {
    const now = deps.clock.now();
    const token = newId("claim", deps.random);
    return { token, claimed: await store.claimDueDeliveries(deps.db, { now, leaseUntil: now + leaseMs, token, limit, kinds, ...fair }) };
  }

  /** One delivery; a failure past its own handling leaves the lease to run out, and it is tried again later. */
  const attempt = (d: store.ClaimedDelivery, token: string): Promise<void> =>
    deliver(d, token).catch((err: unknown) => deps.log.error("webhook delivery failed unexpectedly", { deliveryId: d.id, error: errorText(err) }));

  /** Tracks work stop() waits for. */
  function track<T>(work: Promise<T>): Promise<T> {
    running.add(work);
    void work.then(
      () => running.delete(work),
      () => running.delete(work),
    );
    return work;
  }

  async function runBatch(): Promise<number> {
    if (shutdown.signal.aborted) return 0;
    const { token, claimed } = await claim(batchSize);
    await Promise.all(claimed.map((d) => attempt(d, token)));
    return claimed.length;
  }

  // The started loop keeps up to batchSize deliveries in flight, at most one per endpoint and perOwner per
  // owner, and fills each slot as its delivery ends, owners with the fewest in flight first: endpoints that
  // hold their connections for the whole timeout, or have thousands due, take at most perOwner slots
  // whatever their number, and an owner with nothing in flight takes the next free slot.
  const inFlight = new Set<string>();
  /** Endpoints with a delivery leased when this worker started: none of their later deliveries goes first. */
  const inheritedBusy = new Set<string>();
  const ownerLoad = new Map<string, number>();
  async function fill(): Promise<number> {
    const free = batchSize - inFlight.size;
    if (free <= 0 || shutdown.signal.aborted) return 0;
    const { token, claimed } = await claim(free, { perEndpoint: 1, busy: [...inFlight, ...inheritedBusy], ownerLoad: Object.fromEntries(ownerLoad), perOwner });
    for (const d of claimed) {
      const key = `${d.endpointKind} ${d.endpointId}`; // as claimDueDeliveries names endpoints
      inFlight.add(key);
      ownerLoad.set(d.owner, (ownerLoad.get(d.owner) ?? 0) + 1);
      void track(
        attempt(d, token).finally(() => {
          inFlight.delete(key);
          const left = ownerLoad.get(d.owner)! - 1;
          if (left === 0) ownerLoad.delete(d.owner);
          else ownerLoad.set(d.owner, left);
          wakeSleep?.(); // a slot is free
        }),
      );
    }
    return claimed.length;
  }

  function runOnce(): Promise<number> {
    return track(runBatch());
  }

  function sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const timer = setTimeout(done, ms);
      function done() {
        clearTimeout(timer);
        wakeSleep = null;
        resolve();
      }
      wakeSleep = done;
    });
  }

  /**
   * Leases held when this worker starts belong to a process that died mid-attempt (kill -9), or to another
   * server on the same database that is still sending them. Those still held under the same claim once
   * any attempt would have ended (the timeout, and a margin for its record) are the dead process's:
   * given back then, they are due at once, ahead of their endpoints' later deliveries, instead of after
   * the rest of their lease (a minute more).
   */
  async function takeOverInherited(inherited: { id: string; token: string; endpoint: string }[]): Promise<void> {
    try {
      await sleepUnlessStopped(timeoutMs + INHERITED_MARGIN_MS, shutdown.signal);
      if (shutdown.signal.aborted) return;
      const given = await store.releaseClaims(deps.db, inherited);
      if (given > 0) deps.log.info("webhook deliveries left in flight by a process that ended are due again", { deliveries: given });
    } catch (err) {
      deps.log.error("webhook worker could not give back earlier leases", { error: errorText(err) });
    } finally {
      inheritedBusy.clear();
      wakeSleep?.();
    }
  }

  return {
    runOnce,
    start() {
      if (loop !== null || shutdown.signal.aborted) return;
      loop = (async () => {
        try {
          // Leases run out already are no one's: their deliveries are claimed as any due one, at once.
          const inherited = await store.heldClaims(deps.db, deps.clock.now());
          for (const claim of inherited) inheritedBusy.add(claim.endpoint);
          if (inherited.length > 0) void takeOverInherited(inherited);
        } catch (err) {
          deps.log.error("webhook worker could not read earlier leases", { error: errorText(err) });
        }
        while (!shutdown.signal.aborted) {
          let started = 0;
          try {
            started = await fill();
          } catch (err) {
            deps.log.error("webhook worker run failed", { error: errorText(err) });
          }
          // More may be due at once while slots are free; otherwise wait for a slot or the next poll.
          if (!shutdown.signal.aborted && (started === 0 || inFlight.size >= batchSize)) await sleep(pollIntervalMs);
        }
      })();
    },
    async stop() {
      shutdown.abort();
      wakeSleep?.();
      await loop;
      await Promise.allSettled([...running]);
    },
  };
}
