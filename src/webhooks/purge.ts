// The purge's webhook part (WEBHOOK_RETENTION_DAYS): finished deliveries, their attempts and their
// events, once older than the retention. Off (0) by default: paygate.md lets an owner resend any delivery.
// It also seals event bodies that an earlier version stored in clear.
import type { Deps } from "../deps.ts";
import { sealClearEventBodies } from "./outbox.ts";
import * as store from "./store.ts";
import { DAY_MS } from "../lib/clock.ts";

export async function purgeWebhooks(deps: Deps): Promise<{ webhookDeliveries: number; webhookEvents: number; webhookBodiesSealed: number }> {
  const webhookBodiesSealed = await sealClearEventBodies(deps); // left in clear by an earlier version
  const days = deps.config.webhookRetentionDays;
  if (days === 0) return { webhookDeliveries: 0, webhookEvents: 0, webhookBodiesSealed };
  const { deliveries, events } = await store.purgeFinishedDeliveries(deps.db, deps.clock.now() - days * DAY_MS);
  return { webhookDeliveries: deliveries, webhookEvents: events, webhookBodiesSealed };
}
