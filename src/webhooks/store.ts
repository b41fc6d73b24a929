// SQL of webhooks: owners' endpoints, the outbox of events, deliveries with their claim lease, attempts.
// Functions named …InWrite run inside a caller's db.write (they never open one themselves).
import type { Db } from "../db/open.ts";
import { deleteFirst, inSteps, STEP_ROWS, stepOf } from "../db/steps.ts";

// ---------------------------------------------------------------------------------------------------
// Endpoints

export type EndpointRow = {
  id: string;
  owner: string;
  url: string;
  /** JSON array text */
  events: string;
  enabled: number;
  secretIv: Uint8Array;
  secretCiphertext: Uint8Array;
  createdAt: number;
  updatedAt: number;
};

const ENDPOINT_COLUMNS = `id, owner, url, events, enabled, secret_iv AS secretIv, secret_ciphertext AS secretCiphertext,
  created_at AS createdAt, updated_at AS updatedAt`;

/** Inserts the endpoint unless the owner already has `maxPerOwner`; false when over the limit. */
export function insertEndpoint(db: Db, row: EndpointRow, maxPerOwner: number): Promise<boolean> {
  return db.write(() => {
    const { count } = db.sqlite.query("SELECT COUNT(*) AS count FROM webhook_endpoints WHERE owner = ?").get(row.owner) as { count: number };
    if (count >= maxPerOwner) return false;
    db.sqlite
      .query(
        `INSERT INTO webhook_endpoints (id, owner, url, events, enabled, secret_iv, secret_ciphertext, created_at, updated_at)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
      )
      .run(row.id, row.owner, row.url, row.events, row.enabled, row.secretIv, row.secretCiphertext, row.createdAt, row.updatedAt);
    return true;
  });
}

/** Any owner's endpoint (the worker); domain code scoped to an owner uses findOwnerEndpoint. */
export async function findEndpoint(db: Db, id: string): Promise<EndpointRow | null> {
  return (db.sqlite.query(`SELECT ${ENDPOINT_COLUMNS} FROM webhook_endpoints WHERE id = ?`).get(id) as EndpointRow | null) ?? null;
}

export async function findOwnerEndpoint(db: Db, owner: string, id: string): Promise<EndpointRow | null> {
  return (db.sqlite.query(`SELECT ${ENDPOINT_COLUMNS} FROM webhook_endpoints WHERE id = ? AND owner = ?`).get(id, owner) as EndpointRow | null) ?? null;
}

export async function listEndpoints(db: Db, owner: string): Promise<EndpointRow[]> {
  return db.sqlite.query(`SELECT ${ENDPOINT_COLUMNS} FROM webhook_endpoints WHERE owner = ? ORDER BY created_at, id`).all(owner) as EndpointRow[];
}

export type EndpointPatch = { url?: string; events?: string; enabled?: number };

/** Applies the given fields to the owner's endpoint; null when it is not theirs. */
export function updateEndpoint(db: Db, owner: string, id: string, patch: EndpointPatch, now: number): Promise<EndpointRow | null> {
  return db.write(() => {
    return (
      (db.sqlite
        .query(
          `UPDATE webhook_endpoints SET url = COALESCE(?, url), events = COALESCE(?, events), enabled = COALESCE(?, enabled), updated_at = ?
           WHERE id = ? AND owner = ? RETURNING ${ENDPOINT_COLUMNS}`,
        )
        .get(patch.url ?? null, patch.events ?? null, patch.enabled ?? null, now, id, owner) as EndpointRow | null) ?? null
    );
  });
}

/** A replaced secret, sealed, that signs until `signsUntil`. */
export type PreviousSecretRow = { secretIv: Uint8Array; secretCiphertext: Uint8Array; signsUntil: number };

/** The endpoint's replaced secrets still signing at `now`, the most recently replaced first. */
export async function listSigningPreviousSecrets(db: Db, endpointId: string, now: number): Promise<PreviousSecretRow[]> {
  return db.sqlite
    .query(
      `SELECT secret_iv AS secretIv, secret_ciphertext AS secretCiphertext, signs_until AS signsUntil
       FROM webhook_previous_secrets WHERE endpoint_id = ? AND signs_until > ? ORDER BY signs_until DESC, rowid DESC`,
    )
    .all(endpointId, now) as PreviousSecretRow[];
}

export type RotateOutcome = { rotated: true } | { rotated: false; reason: "not_found" } | { rotated: false; reason: "full"; oldestSignsUntil: number };

/**
 * Makes the given sealed secret current; the current one signs on until `previousUntil`, alongside any
 * replaced earlier that still sign. Refused (`full`) while `maxPrevious` replaced secrets still sign. One
 * write; replaced secrets that no longer sign are deleted in it.
 */
export function rotateEndpointSecret(
  db: Db,
  owner: string,
  id: string,
  next: { secretIv: Uint8Array; secretCiphertext: Uint8Array; previousUntil: number },
  now: number,
  maxPrevious: number,
): Promise<RotateOutcome> {
  return db.write((): RotateOutcome => {
    const current = db.sqlite.query("SELECT secret_iv AS iv, secret_ciphertext AS ciphertext FROM webhook_endpoints WHERE id = ? AND owner = ?").get(id, owner) as
      | { iv: Uint8Array; ciphertext: Uint8Array }
      | null;
    if (current === null) return { rotated: false, reason: "not_found" };
    db.sqlite.query("DELETE FROM webhook_previous_secrets WHERE endpoint_id = ? AND signs_until <= ?").run(id, now);
    const { count, oldest } = db.sqlite.query("SELECT COUNT(*) AS count, MIN(signs_until) AS oldest FROM webhook_previous_secrets WHERE endpoint_id = ?").get(id) as {
      count: number;
      oldest: number | null;
    };
    if (count >= maxPrevious) return { rotated: false, reason: "full", oldestSignsUntil: oldest! };
    db.sqlite
      .query("INSERT INTO webhook_previous_secrets (endpoint_id, secret_iv, secret_ciphertext, signs_until) VALUES (?, ?, ?, ?)")
      .run(id, current.iv, current.ciphertext, next.previousUntil);
    db.sqlite.query("UPDATE webhook_endpoints SET secret_iv = ?, secret_ciphertext = ?, updated_at = ? WHERE id = ?").run(next.secretIv, next.secretCiphertext, now, id);
    return { rotated: true };
  });
}

/** Deletes the records of endpoint deletions made before `before` (the purge), in steps. */
export function purgeEndpointDeletions(db: Db, before: number, stopping?: AbortSignal): Promise<number> {
  return inSteps(db, 0, () => deleteFirst(db, "webhook_endpoint_deletions", "deleted_at < ?", "deleted_at", before), stopping);
}

/** Deletes replaced secrets that no longer sign (the purge). */
export function purgePreviousSecrets(db: Db, now: number): Promise<number> {
  return db.write(() => db.sqlite.query("DELETE FROM webhook_previous_secrets WHERE signs_until <= ?").run(now).changes);
}

/**
 * Deletes the owner's endpoint, then its deliveries (and, by cascade, their attempts) in steps: an endpoint
 * with hundreds of thousands of them (retention is off by default) held every request for seconds as one
 * write. No delivery of a deleted endpoint is sent meanwhile; the purge removes any a crash left
 * (purgeOrphanDeliveries).
 */
export async function deleteEndpoint(db: Db, owner: string, id: string, now: number): Promise<{ pendingDropped: number } | null> {
  const deleted = await db.write(() => {
    const row = db.sqlite.query("DELETE FROM webhook_endpoints WHERE id = ? AND owner = ? RETURNING id").get(id, owner);
    if (row === null) return null;
    db.sqlite.query("DELETE FROM webhook_previous_secrets WHERE endpoint_id = ?").run(id);
    // What a restore of an earlier backup reads to delete it again (db/restore.ts).
    db.sqlite.query("INSERT INTO webhook_endpoint_deletions (id, deleted_at) VALUES (?, ?) ON CONFLICT (id) DO NOTHING").run(id, now);
    return true;
  });
  if (deleted === null) return null;
  // Its deliveries still due end here, unsent: `pendingDropped` counts them as they are deleted (the worker
  // may end one meanwhile: then it counts it, and it is no longer pending here).
  const dropped = { pending: 0 };
  await deleteDeliveriesOf(db, id, undefined, dropped);
  return { pendingDropped: dropped.pending };
}

/**
 * An endpoint's deliveries in steps, each step also deleting the events that step left with no delivery
 * (nothing can read or resend them).
 */
async function deleteDeliveriesOf(db: Db, endpointId: string, stopping?: AbortSignal, dropped?: { pending: number }): Promise<number> {
  return inSteps(
    db,
    0,
    () => {
      const taken = db.sqlite
        .query(
          `DELETE FROM webhook_deliveries WHERE rowid IN (SELECT rowid FROM webhook_deliveries WHERE endpoint_kind = 'owner_endpoint' AND endpoint_id = ?
           ORDER BY created_at LIMIT ${STEP_ROWS}) RETURNING event_id AS eventId, status`,
        )
        .all(endpointId) as { eventId: string; status: string }[];
      if (dropped !== undefined) dropped.pending += taken.filter((t) => t.status === "pending").length;
      const unreferenced = db.sqlite.query("DELETE FROM outbox_events WHERE id = ? AND NOT EXISTS (SELECT 1 FROM webhook_deliveries d WHERE d.event_id = ?)");
      for (const eventId of new Set(taken.map((t) => t.eventId))) unreferenced.run(eventId, eventId);
      return stepOf(taken.length);
    },
    stopping,
  );
}

/**
 * The purge: deliveries of owner endpoints that no longer exist (a delete cut short by a crash). The endpoint
 * ids that deliveries name are walked through their index, one seek each, not the deliveries themselves, in
 * runs of STEP_ROWS ids with a turn of the event loop between them: with tens of thousands of endpoints one
 * uninterrupted walk held the JS thread for hundreds of milliseconds.
 */
export async function purgeOrphanDeliveries(db: Db, stopping?: AbortSignal, dropped?: { pending: number }): Promise<number> {
  let removed = 0;
  let after = "";
  const next = db.sqlite.query(
    "SELECT endpoint_id AS id FROM webhook_deliveries WHERE endpoint_kind = 'owner_endpoint' AND endpoint_id > ? ORDER BY endpoint_id LIMIT 1",
  );
  const exists = db.sqlite.query("SELECT 1 FROM webhook_endpoints WHERE id = ?");
  for (;;) {
    if (stopping?.aborted === true) return removed;
    const orphans: string[] = [];
    let seen = 0;
    db.read(() => {
      for (; seen < STEP_ROWS; seen++) {
        const row = next.get(after) as { id: string } | null;
        if (row === null) break;
        after = row.id;
        if (exists.get(row.id) === null) orphans.push(row.id);
      }
    });
    for (const id of orphans) removed += await deleteDeliveriesOf(db, id, stopping, dropped);
    if (seen < STEP_ROWS) return removed;
    await new Promise((resolve) => setImmediate(resolve));
  }
}

/**
 * A `410 Gone` answer from `url`: the endpoint stops receiving until its owner enables it again; unless
 * its URL was changed while the attempt ran (the owner moved it away from the receiver that is gone).
 * True when it was disabled.
 */
export function disableEndpointInWrite(db: Db, id: string, url: string, now: number): boolean {
  return db.sqlite.query("UPDATE webhook_endpoints SET enabled = 0, updated_at = ? WHERE id = ? AND url = ? AND enabled = 1").run(now, id, url).changes > 0;
}

/**
 * Ids of the owner's enabled endpoints that receive an event of `type`: subscribers of the type, or
 * when `onlyEndpointId` is given just that endpoint whatever it subscribes to (webhook.test).
 */
export function fanOutTargetsInWrite(db: Db, owner: string, type: string, onlyEndpointId: string | null): string[] {
  const rows =
    onlyEndpointId === null
      ? db.sqlite
          .query(
            `SELECT id FROM webhook_endpoints
             WHERE owner = ? AND enabled = 1 AND EXISTS (SELECT 1 FROM json_each(events) WHERE value = ?)
             ORDER BY created_at, id`,
          )
          .all(owner, type)
      : db.sqlite.query("SELECT id FROM webhook_endpoints WHERE owner = ? AND enabled = 1 AND id = ?").all(owner, onlyEndpointId);
  return (rows as { id: string }[]).map((r) => r.id);
}

// ---------------------------------------------------------------------------------------------------
// Outbox events and deliveries

export type TargetKind = "owner" | "agent";
export type EndpointKind = "owner_endpoint" | "agent";
export type DeliveryStatus = "pending" | "succeeded" | "failed";

export type EventRow = { id: string; targetKind: TargetKind; targetId: string; type: string; payload: string; createdAt: number };

/** `agentOwner`: for an agent's event, the wallet that owns the agent (whose share of the worker it uses). */
export function insertEventInWrite(db: Db, row: EventRow & { agentOwner?: string | null }): void {
  db.sqlite
    .query("INSERT INTO outbox_events (id, target_kind, target_id, type, payload, created_at, agent_owner) VALUES (?, ?, ?, ?, ?, ?, ?)")
    .run(row.id, row.targetKind, row.targetId, row.type, row.payload, row.createdAt, row.agentOwner ?? null);
}

/** Events whose body is still the clear JSON of an earlier version (see the partial index of migration 15). */
export async function findClearEvents(db: Db, limit: number): Promise<{ id: string; payload: string }[]> {
  return db.read(
    () =>
      db.sqlite
        .query("SELECT id, payload FROM outbox_events WHERE substr(payload, 1, 1) = '{' ORDER BY id LIMIT ?")
        .all(limit) as { id: string; payload: string }[],
  );
}

/** Replaces an event's stored body, if it is still `was`. */
export function setEventPayloadInWrite(db: Db, id: string, was: string, payload: string): void {
  db.sqlite.query("UPDATE outbox_events SET payload = ? WHERE id = ? AND payload = ?").run(payload, id, was);
}

export async function findEvent(db: Db, id: string): Promise<EventRow | null> {
  return (
    (db.sqlite
      .query("SELECT id, target_kind AS targetKind, target_id AS targetId, type, payload, created_at AS createdAt FROM outbox_events WHERE id = ?")
      .get(id) as EventRow | null) ?? null
  );
}

/** A new pending delivery, due at once. */
export function insertDeliveryInWrite(db: Db, row: { id: string; eventId: string; endpointKind: EndpointKind; endpointId: string; now: number }): void {
  db.sqlite
    .query(
      `INSERT INTO webhook_deliveries (id, event_id, endpoint_kind, endpoint_id, status, attempts, next_attempt_at, created_at, updated_at)
       VALUES (?, ?, ?, ?, 'pending', 0, ?, ?, ?)`,
    )
    .run(row.id, row.eventId, row.endpointKind, row.endpointId, row.now, row.now, row.now);
}

export type DeliveryRow = {
  id: string;
  eventId: string;
  type: string;
  endpointKind: EndpointKind;
  endpointId: string;
  status: DeliveryStatus;
  attempts: number;
  nextAttemptAt: number | null;
  lastStatusCode: number | null;
  createdAt: number;
  updatedAt: number;
};

const DELIVERY_COLUMNS = `d.id, d.event_id AS eventId, e.type, d.endpoint_kind AS endpointKind, d.endpoint_id AS endpointId, d.status,
  d.attempts, d.next_attempt_at AS nextAttemptAt, d.last_status_code AS lastStatusCode, d.created_at AS createdAt, d.updated_at AS updatedAt`;

export async function findDelivery(db: Db, id: string): Promise<DeliveryRow | null> {
  return (
    (db.sqlite.query(`SELECT ${DELIVERY_COLUMNS} FROM webhook_deliveries d JOIN outbox_events e ON e.id = d.event_id WHERE d.id = ?`).get(id) as DeliveryRow | null) ??
    null
  );
}

/** Deliveries to one endpoint, newest first, and how many there are in all. */
export async function listDeliveries(
  db: Db,
  endpointKind: EndpointKind,
  endpointId: string,
  limit: number,
  offset: number,
): Promise<{ rows: DeliveryRow[]; total: number }> {
  const rows = db.sqlite
    .query(
      `SELECT ${DELIVERY_COLUMNS} FROM webhook_deliveries d JOIN outbox_events e ON e.id = d.event_id
       WHERE d.endpoint_kind = ? AND d.endpoint_id = ? ORDER BY d.created_at DESC, d.id DESC LIMIT ? OFFSET ?`,
    )
    .all(endpointKind, endpointId, limit, offset) as DeliveryRow[];
  const { total } = db.sqlite
    .query("SELECT COUNT(*) AS total FROM webhook_deliveries WHERE endpoint_kind = ? AND endpoint_id = ?")
    .get(endpointKind, endpointId) as { total: number };
  return { rows, total };
}

/** A delivery leased to one worker: what it needs to send the next attempt. */
export type ClaimedDelivery = {
  id: string;
  eventId: string;
  type: string;
  payload: string;
  endpointKind: EndpointKind;
  endpointId: string;
  /** attempts made so far; the one about to be made is attempts + 1 */
  attempts: number;
  /** Whose share of the worker it uses: the owner's wallet, for an agent's notification its owner's wallet. */
  owner: string;
};

/**
 * Leases up to `limit` due pending deliveries of the given kinds to the caller (`token`) until
 * `leaseUntil`. Rows under another unexpired lease are skipped, so two workers, in one process or
 * several, never hold the same delivery. One atomic write.
 *
 * Order: owners take turns, then endpoints, then the oldest due. A delivery's turn is its owner's
 * deliveries already in flight (`ownerLoad`) plus its place among that owner's candidates, these ordered
 * by their place in their endpoint's queue (`nth`: every endpoint's first before any second), then due
 * time. So an owner with nothing in flight comes before any owner with something, however old the
 * latter's backlog.
 *
 * Cost: the claim steps through the endpoints that have pending deliveries (an index seek each, on
 * webhook_deliveries_pending) and reads at most `perEndpoint` due rows of each, plus the rows under a
 * lease it skips; never the whole due backlog.
 */
export function claimDueDeliveries(
  db: Db,
  claim: {
    now: number;
    leaseUntil: number;
    token: string;
    limit: number;
    kinds: EndpointKind[];
    /** At most this many per endpoint (its oldest due first). Default `limit`. */
    perEndpoint?: number;
    /** Endpoints ("<kind> <id>") to leave out: those the caller has deliveries in flight to. */
    busy?: readonly string[];
    /** Deliveries the caller has in flight per owner (as ClaimedDelivery.owner names them). */
    ownerLoad?: Readonly<Record<string, number>>;
    /** At most this many in flight per owner, counting `ownerLoad`. Default: no bound. */
    perOwner?: number;
  },
): Promise<ClaimedDelivery[]> {
  if (claim.kinds.length === 0 || claim.limit <= 0) return Promise.resolve([]);
  // Looked for first with a read: the worker polls every second, and the claim (a write, and a recursive
  // walk over the endpoints) would find nothing most of the time on a quiet server.
  const anyDue = db.read(() =>
    db.sqlite
      .query(
        `SELECT 1 FROM webhook_deliveries INDEXED BY webhook_deliveries_due
         WHERE status = 'pending' AND next_attempt_at <= ? AND (claimed_until IS NULL OR claimed_until <= ?)
           AND endpoint_kind IN (SELECT value FROM json_each(?)) LIMIT 1`,
      )
      .get(claim.now, claim.now, JSON.stringify(claim.kinds)),
  );
  if (anyDue === null) return Promise.resolve([]);
  return db.write(() => {
    // INDEXED BY and CROSS JOIN pin the plan: without statistics the planner would rather read
    // webhook_deliveries_due, which means every due row and a sort of them all.
    const claimed = db.sqlite
      .query(
        `WITH RECURSIVE
           -- the endpoints with pending deliveries, of each kind in turn: each step is one seek past the previous
           endpoints (kind, endpointId) AS (
             SELECT k.value, (SELECT MIN(endpoint_id) FROM webhook_deliveries INDEXED BY webhook_deliveries_pending
                              WHERE status = 'pending' AND endpoint_kind = k.value)
             FROM json_each(?) k
             UNION ALL
             SELECT p.kind, (SELECT MIN(endpoint_id) FROM webhook_deliveries INDEXED BY webhook_deliveries_pending
                             WHERE status = 'pending' AND endpoint_kind = p.kind AND endpoint_id > p.endpointId)
             FROM endpoints p WHERE p.endpointId IS NOT NULL),
           heads AS (
             SELECT kind, endpointId FROM endpoints
             WHERE endpointId IS NOT NULL AND kind || ' ' || endpointId NOT IN (SELECT value FROM json_each(?))),
           -- each endpoint's first due rows not under a lease, in the order it receives them
           candidates AS (
             SELECT d.id, d.rowid AS seq, d.next_attempt_at AS due, COALESCE(e.agent_owner, e.target_id) AS owner,
               ROW_NUMBER() OVER (PARTITION BY d.endpoint_kind, d.endpoint_id ORDER BY d.next_attempt_at, d.rowid) AS nth
             FROM heads
             CROSS JOIN webhook_deliveries d ON d.rowid IN (
               SELECT x.rowid FROM webhook_deliveries x INDEXED BY webhook_deliveries_pending
               WHERE x.endpoint_kind = heads.kind AND x.endpoint_id = heads.endpointId AND x.status = 'pending'
                 AND x.next_attempt_at <= ? AND (x.claimed_until IS NULL OR x.claimed_until <= ?)
               ORDER BY x.next_attempt_at, x.rowid LIMIT ?)
             CROSS JOIN outbox_events e ON e.id = d.event_id),
           turns AS (
             SELECT c.id, c.seq, c.due, c.nth, COALESCE(load.value, 0) + ROW_NUMBER() OVER (PARTITION BY c.owner ORDER BY c.nth, c.due, c.seq) AS turn
             FROM candidates c LEFT JOIN json_each(?) load ON load.key = c.owner)
         UPDATE webhook_deliveries SET claimed_until = ?, claim_token = ?
         WHERE id IN (SELECT id FROM turns WHERE turn <= ? ORDER BY turn, nth, due, seq LIMIT ?)
         RETURNING id`,
      )
      .all(
        JSON.stringify(claim.kinds),
        JSON.stringify(claim.busy ?? []),
        claim.now,
        claim.now,
        claim.perEndpoint ?? claim.limit,
        JSON.stringify(claim.ownerLoad ?? {}),
        claim.leaseUntil,
        claim.token,
        claim.perOwner ?? Number.MAX_SAFE_INTEGER,
        claim.limit,
      ) as { id: string }[];
    if (claimed.length === 0) return [];
    return db.sqlite
      .query(
        `SELECT d.id, d.event_id AS eventId, e.type, e.payload, d.endpoint_kind AS endpointKind, d.endpoint_id AS endpointId, d.attempts,
           COALESCE(e.agent_owner, e.target_id) AS owner
         FROM webhook_deliveries d JOIN outbox_events e ON e.id = d.event_id
         WHERE d.id IN (${claimed.map(() => "?").join(", ")}) ORDER BY d.next_attempt_at, d.rowid`,
      )
      .all(...claimed.map((c) => c.id)) as ClaimedDelivery[];
  });
}

/**
 * Moves the pending deliveries' next attempts back by a step back of the wall clock (lib/clock-steps.ts,
 * `stepMs` < 0) detected at `now`: each waits as long as it had left; one due before the step (which the
 * step put ahead again) is due at `now`. The rows still to come are read at once, then moved in writes of
 * STEP_ROWS rows, the event loop serving requests between them; a row moves only while its due time is the
 * one read, so a retry written meanwhile (a failed attempt, timed on the clock as it now is) stays as
 * written, and none moves twice. Returns how many moved.
 */
export async function moveBackPendingDeliveries(db: Db, stepMs: number, now: number): Promise<number> {
  if (!(stepMs < 0)) return 0;
  const toCome = db.read(
    () =>
      db.sqlite
        .query(
          `SELECT rowid, next_attempt_at FROM webhook_deliveries INDEXED BY webhook_deliveries_due
           WHERE status = 'pending' AND next_attempt_at > ? ORDER BY next_attempt_at, rowid`,
        )
        .values(now) as [number, number][],
  );
  if (toCome.length === 0) return 0;
  return inSteps<number>(db, 0, (from) => {
    const move = db.sqlite.query("UPDATE webhook_deliveries SET next_attempt_at = ? WHERE rowid = ? AND status = 'pending' AND next_attempt_at = ?");
    const end = Math.min(from + STEP_ROWS, toCome.length);
    let moved = 0;
    for (let i = from; i < end; i++) {
      const [rowid, at] = toCome[i]!;
      moved += move.run(Math.max(now, at + stepMs), rowid, at).changes;
    }
    return { removed: moved, next: end < toCome.length ? end : null };
  });
}

/** The leases held now (deliveries in flight): delivery id, claim token, and the endpoint ("<kind> <id>", as claims name them). */
export async function heldClaims(db: Db, now: number): Promise<{ id: string; token: string; endpoint: string }[]> {
  return db.sqlite
    .query(
      `SELECT id, claim_token AS token, endpoint_kind || ' ' || endpoint_id AS endpoint FROM webhook_deliveries
       WHERE status = 'pending' AND claim_token IS NOT NULL AND claimed_until > ?`,
    )
    .all(now) as { id: string; token: string; endpoint: string }[];
}

/** Gives back those of `claims` still held under the same token. Returns how many. */
export function releaseClaims(db: Db, claims: readonly { id: string; token: string }[]): Promise<number> {
  if (claims.length === 0) return Promise.resolve(0);
  return db.write(() => {
    const release = db.sqlite.query("UPDATE webhook_deliveries SET claimed_until = NULL, claim_token = NULL WHERE id = ? AND claim_token = ?");
    let released = 0;
    for (const { id, token } of claims) released += release.run(id, token).changes;
    return released;
  });
}

/** Gives a lease back without an attempt (shutdown mid-request), so the delivery is due again at once. */
export async function releaseClaim(db: Db, id: string, token: string): Promise<void> {
  await releaseClaims(db, [{ id, token }]);
}

export type AttemptRecord = {
  attempt: number;
  at: number;
  statusCode: number | null;
  durationMs: number;
  /** at most 1 KiB of UTF-8 */
  response: string | null;
  error: string | null;
};

/**
 * Records an attempt made under the lease `token` and moves the delivery on: still pending with its
 * next time, or final. Ends the lease. False (nothing written) when the lease was lost meanwhile (the
 * delivery was deleted with its endpoint, or the lease expired and another worker took it).
 */
export function recordAttemptInWrite(
  db: Db,
  deliveryId: string,
  token: string,
  attempt: AttemptRecord,
  next: { status: DeliveryStatus; nextAttemptAt: number | null },
  now: number,
): boolean {
  const updated = db.sqlite
    .query(
      `UPDATE webhook_deliveries SET status = ?, attempts = ?, next_attempt_at = ?, last_status_code = ?,
         claimed_until = NULL, claim_token = NULL, updated_at = ?
       WHERE id = ? AND claim_token = ? RETURNING id`,
    )
    .get(next.status, attempt.attempt, next.nextAttemptAt, attempt.statusCode, now, deliveryId, token);
  if (updated === null) return false;
  db.sqlite
    .query(
      `INSERT INTO webhook_attempts (delivery_id, attempt, at, status_code, duration_ms, response, error) VALUES (?, ?, ?, ?, ?, ?, ?)
       ON CONFLICT (delivery_id, attempt) DO UPDATE SET at = excluded.at, status_code = excluded.status_code,
         duration_ms = excluded.duration_ms, response = excluded.response, error = excluded.error`,
    )
    .run(deliveryId, attempt.attempt, attempt.at, attempt.statusCode, attempt.durationMs, attempt.response, attempt.error);
  return true;
}

/** Ends a leased delivery as failed without an attempt (its endpoint was disabled or is gone). */
export function failClaimedDelivery(db: Db, deliveryId: string, token: string, now: number): Promise<boolean> {
  return db.write(() => {
    const row = db.sqlite
      .query(
        `UPDATE webhook_deliveries SET status = 'failed', next_attempt_at = NULL, claimed_until = NULL, claim_token = NULL, updated_at = ?
         WHERE id = ? AND claim_token = ? RETURNING id`,
      )
      .get(now, deliveryId, token);
    return row !== null;
  });
}

export type AttemptRow = AttemptRecord & { deliveryId: string };

export async function listAttempts(db: Db, deliveryId: string): Promise<AttemptRow[]> {
  return db.sqlite
    .query(
      `SELECT delivery_id AS deliveryId, attempt, at, status_code AS statusCode, duration_ms AS durationMs, response, error
       FROM webhook_attempts WHERE delivery_id = ? ORDER BY attempt`,
    )
    .all(deliveryId) as AttemptRow[];
}

/**
 * The retention purge: finished deliveries (succeeded or failed) last changed before `before`, with their
 * attempts (ON DELETE CASCADE), then events from before `before` that no delivery refers to any more.
 * A pending delivery, and so its event, is never purged.
 */
export async function purgeFinishedDeliveries(db: Db, before: number, stopping?: AbortSignal): Promise<{ deliveries: number; events: number }> {
  // In steps of STEP_ROWS, each its own write (db/steps.ts).
  const deliveries = await inSteps(db, 0, () => deleteFirst(db, "webhook_deliveries", "status <> 'pending' AND updated_at < ?", "updated_at", before), stopping);
  return { deliveries, events: await purgeUnreferencedEvents(db, before, stopping) };
}

/**
 * Events created in [`since`, `before`) that no delivery refers to: nothing can read or resend them (a resend
 * starts from a delivery). Without retention the purge looks only at a window a day back (events of owners
 * with no endpoint, never referred to), so it does not walk every event every hour; an endpoint's delete
 * takes the events it leaves unreferenced itself (deleteDeliveriesOf).
 */
export async function purgeUnreferencedEvents(db: Db, before: number, stopping?: AbortSignal, since = Number.MIN_SAFE_INTEGER): Promise<number> {
  // Events walk the created_at index with a cursor: one a pending delivery still needs is looked at once
  // a purge, not again by every step (NOT EXISTS is not in the index).
  const inWindow = "created_at < ? AND created_at >= ? AND (created_at > ? OR rowid > ?)";
  const unreferenced = "NOT EXISTS (SELECT 1 FROM webhook_deliveries d WHERE d.event_id = outbox_events.id)";
  const events = await inSteps<{ at: number; id: number }>(
    db,
    { at: since, id: 0 },
    (c) => {
      const from = [before, c.at, c.at, c.id];
      const end = db.sqlite
        .query(`SELECT created_at AS at, rowid AS id FROM outbox_events WHERE ${inWindow} ORDER BY created_at, rowid LIMIT 1 OFFSET ${STEP_ROWS - 1}`)
        .get(...from) as { at: number; id: number } | null;
      const removed =
        end === null
          ? db.sqlite.query(`DELETE FROM outbox_events WHERE ${inWindow} AND ${unreferenced}`).run(...from).changes
          : db.sqlite
              .query(`DELETE FROM outbox_events WHERE ${inWindow} AND created_at <= ? AND (created_at < ? OR rowid <= ?) AND ${unreferenced}`)
              .run(...from, end.at, end.at, end.id).changes;
      return { removed, next: end };
    },
    stopping,
  );
  return events;
}
