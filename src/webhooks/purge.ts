// The purge's webhook part (WEBHOOK_RETENTION_DAYS): finished deliveries, their attempts and their
// events, once older than the retention. Off (0) by default: paygate.md lets an owner resend any delivery.
// Always: deliveries of deleted endpoints, and events no delivery refers to, which nothing can read.
// It also seals event bodies that an earlier version stored in clear, and deletes replaced signing
// secrets past their 24 hours, and the records of endpoints deleted over a year ago.
import type { Db } from "../db/open.ts";
import type { Deps } from "../deps.ts";
import { sealClearEventBodies } from "./outbox.ts";
import * as store from "./store.ts";
import { DAY_MS } from "../lib/clock.ts";

/** How long the record of a deleted endpoint is kept for restores of earlier backups. */
export const ENDPOINT_DELETIONS_KEPT_DAYS = 365;

/** Per database: the creation time before which this process has looked at every event for references. */
const eventsLookedThrough = new WeakMap<Db, number>();

export async function purgeWebhooks(deps: Deps, stopping?: AbortSignal): Promise<{
  webhookDeliveries: number;
  webhookEvents: number;
  webhookBodiesSealed: number;
  webhookOldSecrets: number;
  webhookDeletionRecords: number;
}> {
  const webhookBodiesSealed = await sealClearEventBodies(deps, { stopping }); // left in clear by an earlier version
  const webhookOldSecrets = await store.purgePreviousSecrets(deps.db, deps.clock.now()); // past their 24 hours
  // A restore over a year after an endpoint was deleted brings it back, if the backup holds it (README, "restore").
  const webhookDeletionRecords = await store.purgeEndpointDeletions(deps.db, deps.clock.now() - ENDPOINT_DELETIONS_KEPT_DAYS * DAY_MS, stopping);
  // Whatever the retention: deliveries of deleted endpoints (a delete cut short), and events no delivery
  // refers to (nothing can read or resend them), a day old.
  const dropped = { pending: 0 };
  let orphans: number;
  try {
    orphans = await store.purgeOrphanDeliveries(deps.db, stopping, dropped);
  } finally {
    // Still due when their endpoint went: ended unsent, counted as failed (as an endpoint's delete counts its
    // own), also those of the steps committed before one failed.
    deps.metrics.webhookDelivered("failed", dropped.pending);
  }
  // Events over a day old created since the last run of this process looked: each is looked at once (the
  // first run after a start looks at all, so neither downtime nor a purge interval over a day skips any).
  const before = deps.clock.now() - DAY_MS;
  const last = eventsLookedThrough.get(deps.db);
  // None yet in this process, or the clock stepped back past it (events made since may be older): all.
  const since = last === undefined || last > before ? Number.MIN_SAFE_INTEGER : last;
  const unreferenced = await store.purgeUnreferencedEvents(deps.db, before, stopping, since);
  if (stopping?.aborted !== true) eventsLookedThrough.set(deps.db, Math.max(since, before));
  const days = deps.config.webhookRetentionDays;
  if (days === 0) return { webhookDeliveries: orphans, webhookEvents: unreferenced, webhookBodiesSealed, webhookOldSecrets, webhookDeletionRecords };
  const { deliveries, events } = await store.purgeFinishedDeliveries(deps.db, deps.clock.now() - days * DAY_MS, stopping);
  return { webhookDeliveries: orphans + deliveries, webhookEvents: unreferenced + events, webhookBodiesSealed, webhookOldSecrets, webhookDeletionRecords };
}
