// Owners' webhook endpoints: create, list, update, delete, and the sealed secret (reveal, rotate).
import type { Deps } from "../deps.ts";
import { AppError, invalidField } from "../errors.ts";
import { firstCharacters } from "../lib/text.ts";
import { decryptAesGcm, encryptAesGcm } from "../lib/aes-gcm.ts";
import { DAY_MS, toIso } from "../lib/clock.ts";
import { newId } from "../lib/ids.ts";
import { namesPrivateHost } from "../lib/ip.ts";
import { formatWebhookSecret, WEBHOOK_SECRET_BYTES } from "./signing.ts";
import * as store from "./store.ts";

/** The event types of paygate.md an endpoint can subscribe to. */
export const WEBHOOK_EVENT_TYPES = [
  "payment.completed",
  "feature.unlocked",
  "feature.revoked",
  "product.created",
  "product.updated",
  "product.archived",
  "webhook.test",
] as const;
export type WebhookEventType = (typeof WEBHOOK_EVENT_TYPES)[number];

export const MAX_URL_LENGTH = 2048;
export const MAX_ENDPOINTS_PER_OWNER = 20;
/** After a rotation the old secret keeps signing alongside the new one this long. */
export const PREVIOUS_SECRET_TTL_MS = DAY_MS;
/** Replaced secrets that may sign at once (rotations within one day): each adds a signature to every delivery. */
export const MAX_PREVIOUS_SECRETS = 4;

export type WebhookEndpoint = { endpointId: string; url: string; events: WebhookEventType[]; enabled: boolean; createdAt: string };

const notFound = () => new AppError("NOT_FOUND", "no such webhook endpoint");

// The id of the row holding the secret (an endpoint's, or a marketplace agent's) is the additional
// authenticated data: a sealed secret copied into another row does not open there.
const aadOf = (ownerId: string) => new TextEncoder().encode(ownerId);

/**
 * https always; plain http only off mainnet. No credentials or fragment; at most MAX_URL_LENGTH. No
 * private address literal or localhost unless ALLOW_PRIVATE_NETWORK_TARGETS.
 * `field` names the parameter in a VALIDATION_ERROR (marketplace agents call theirs `endpoint`).
 */
export function checkEndpointUrl(deps: Deps, raw: string, field = "url"): string {
  const text = raw.trim();
  if (text.length === 0 || text.length > MAX_URL_LENGTH) throw invalidField(field, `must be 1 to ${MAX_URL_LENGTH} characters`);
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    throw invalidField(field, "must be an absolute URL");
  }
  const httpAllowed = deps.config.network !== "mainnet";
  if (url.protocol !== "https:" && !(httpAllowed && url.protocol === "http:")) {
    throw invalidField(field, httpAllowed ? "must be an http or https URL" : "must be an https URL on mainnet");
  }
  if (url.username !== "" || url.password !== "") throw invalidField(field, "must not carry credentials");
  if (url.hash !== "") throw invalidField(field, "must not have a fragment");
  if (url.hostname === "") throw invalidField(field, "must name a host");
  if (url.href.length > MAX_URL_LENGTH) throw invalidField(field, `must be at most ${MAX_URL_LENGTH} characters`);
  // A name's addresses can change: names are judged when sending (after DNS). An address literal or
  // localhost is refused here already, so that a local URL does not fail silently at every delivery.
  if (!deps.config.allowPrivateNetworkTargets && namesPrivateHost(url.hostname)) {
    throw invalidField(field, "is a private, loopback or link-local address, which is refused (ALLOW_PRIVATE_NETWORK_TARGETS=true allows it, for local testing)");
  }
  return url.href;
}

/** A non-empty subset of WEBHOOK_EVENT_TYPES, deduplicated, in catalogue order. */
export function checkEventTypes(events: readonly string[]): WebhookEventType[] {
  if (events.length === 0) throw invalidField("events", "name at least one event type");
  const unknown = events.filter((e) => !(WEBHOOK_EVENT_TYPES as readonly string[]).includes(e));
  if (unknown.length > 0) throw invalidField("events", `unknown event type ${JSON.stringify(firstCharacters(unknown[0]!, 60))}; one of ${WEBHOOK_EVENT_TYPES.join(", ")}`);
  return WEBHOOK_EVENT_TYPES.filter((t) => events.includes(t));
}

function view(row: store.EndpointRow): WebhookEndpoint {
  return {
    endpointId: row.id,
    url: row.url,
    events: JSON.parse(row.events) as WebhookEventType[],
    enabled: row.enabled === 1,
    createdAt: toIso(row.createdAt),
  };
}

/** Seals a signing secret's bytes for the row `ownerId` (a `whe_` endpoint or an `agt_` agent) under WALLET_ENCRYPTION_KEY. */
export function sealWebhookSecret(deps: Deps, ownerId: string, secret: Uint8Array): { secretIv: Uint8Array; secretCiphertext: Uint8Array } {
  const sealed = encryptAesGcm(deps.wallets.encryptionKey, secret, aadOf(ownerId), deps.random);
  return { secretIv: sealed.iv, secretCiphertext: sealed.ciphertext };
}

/** The `whsec_` secret sealed by sealWebhookSecret for `ownerId`; INTERNAL_ERROR when it does not open. */
export function openWebhookSecret(deps: Deps, ownerId: string, iv: Uint8Array, ciphertext: Uint8Array): string {
  const bytes = decryptAesGcm(deps.wallets.encryptionKey, iv, ciphertext, aadOf(ownerId));
  if (bytes === null) throw new AppError("INTERNAL_ERROR", "webhook secret cannot be decrypted (WALLET_ENCRYPTION_KEY changed?)");
  try {
    return formatWebhookSecret(bytes);
  } finally {
    bytes.fill(0);
  }
}

/**
 * The secrets an attempt is signed with: the current one, then each replaced one still in its 24 hours
 * after its rotation (`previous`, as store.listSigningPreviousSecrets gives them). Null when a secret
 * cannot be decrypted (the key changed); never throws.
 */
export function endpointSigningSecrets(deps: Deps, row: store.EndpointRow, previous: readonly store.PreviousSecretRow[], now: number): string[] | null {
  try {
    const secrets = [openWebhookSecret(deps, row.id, row.secretIv, row.secretCiphertext)];
    for (const old of previous) if (old.signsUntil > now) secrets.push(openWebhookSecret(deps, row.id, old.secretIv, old.secretCiphertext));
    return secrets;
  } catch {
    return null;
  }
}

/** POST /webhooks: a new enabled endpoint; its secret comes back here (and on reveal). */
export async function createEndpoint(
  deps: Deps,
  owner: string,
  input: { url: string; events: readonly string[] },
): Promise<WebhookEndpoint & { secret: string }> {
  const url = checkEndpointUrl(deps, input.url);
  const events = checkEventTypes(input.events);
  const id = newId("whe", deps.random);
  const now = deps.clock.now();
  const secretBytes = deps.random(WEBHOOK_SECRET_BYTES);
  try {
    const row = { id, owner, url, events: JSON.stringify(events), enabled: 1, ...sealWebhookSecret(deps, id, secretBytes), createdAt: now, updatedAt: now };
    if (!(await store.insertEndpoint(deps.db, row, MAX_ENDPOINTS_PER_OWNER))) {
      throw new AppError("INVALID_STATE", `an owner can have at most ${MAX_ENDPOINTS_PER_OWNER} webhook endpoints`);
    }
    deps.log.info("webhook endpoint created", { owner, endpointId: id });
    return { endpointId: id, url, events, enabled: true, secret: formatWebhookSecret(secretBytes), createdAt: toIso(now) };
  } finally {
    secretBytes.fill(0);
  }
}

export async function listEndpoints(deps: Deps, owner: string): Promise<{ endpoints: WebhookEndpoint[] }> {
  return { endpoints: (await store.listEndpoints(deps.db, owner)).map(view) };
}

export async function getEndpoint(deps: Deps, owner: string, endpointId: string): Promise<WebhookEndpoint> {
  const row = await store.findOwnerEndpoint(deps.db, owner, endpointId);
  if (row === null) throw notFound();
  return view(row);
}

/** PATCH /webhooks/:id: any of url, events, enabled (enabling again after a 410 included). */
export async function updateEndpoint(
  deps: Deps,
  owner: string,
  endpointId: string,
  patch: { url?: string | undefined; events?: readonly string[] | undefined; enabled?: boolean | undefined },
): Promise<WebhookEndpoint> {
  const fields: store.EndpointPatch = {};
  if (patch.url !== undefined) {
    // The URL it has already is not checked again: an endpoint saved before a rule was added (a private
    // address) can still change its events, as the dashboard sends the URL with them.
    const current = await store.findOwnerEndpoint(deps.db, owner, endpointId);
    if (current === null) throw notFound();
    if (patch.url.trim() !== current.url) fields.url = checkEndpointUrl(deps, patch.url);
  }
  if (patch.events !== undefined) fields.events = JSON.stringify(checkEventTypes(patch.events));
  if (patch.enabled !== undefined) fields.enabled = patch.enabled ? 1 : 0;
  const row = await store.updateEndpoint(deps.db, owner, endpointId, fields, deps.clock.now());
  if (row === null) throw notFound();
  deps.log.info("webhook endpoint updated", { owner, endpointId, fields: Object.keys(fields) });
  return view(row);
}

/** DELETE /webhooks/:id: the endpoint and its delivery log; pending deliveries to it are dropped. */
export async function deleteEndpoint(deps: Deps, owner: string, endpointId: string): Promise<{ deleted: true }> {
  const deleted = await store.deleteEndpoint(deps.db, owner, endpointId, deps.clock.now());
  if (deleted === null) throw notFound();
  deps.metrics.webhookDelivered("failed", deleted.pendingDropped);
  deps.log.info("webhook endpoint deleted", { owner, endpointId, pendingDropped: deleted.pendingDropped });
  return { deleted: true };
}

/**
 * POST /webhooks/:id/rotate-secret: a new secret; the old one keeps signing alongside for 24 hours (each
 * replaced secret its own 24 hours, at most MAX_PREVIOUS_SECRETS at once).
 */
export async function rotateEndpointSecret(deps: Deps, owner: string, endpointId: string): Promise<{ secret: string }> {
  const now = deps.clock.now();
  const secretBytes = deps.random(WEBHOOK_SECRET_BYTES);
  try {
    const sealed = sealWebhookSecret(deps, endpointId, secretBytes);
    const outcome = await store.rotateEndpointSecret(deps.db, owner, endpointId, { ...sealed, previousUntil: now + PREVIOUS_SECRET_TTL_MS }, now, MAX_PREVIOUS_SECRETS);
    if (!outcome.rotated && outcome.reason === "not_found") throw notFound();
    if (!outcome.rotated) {
      const retryAfter = Math.max(1, Math.ceil((outcome.oldestSignsUntil - now) / 1000));
      throw new AppError(
        "RATE_LIMITED",
        `${MAX_PREVIOUS_SECRETS} replaced secrets of this endpoint still sign (each for 24 hours after its rotation); rotate again once the oldest stops`,
        { retryAfter },
      );
    }
    deps.log.info("webhook secret rotated", { owner, endpointId });
    return { secret: formatWebhookSecret(secretBytes) };
  } finally {
    secretBytes.fill(0);
  }
}

/** The current secret, for the dashboard's "reveal". */
export async function revealEndpointSecret(deps: Deps, owner: string, endpointId: string): Promise<{ secret: string }> {
  const row = await store.findOwnerEndpoint(deps.db, owner, endpointId);
  if (row === null) throw notFound();
  return { secret: openWebhookSecret(deps, row.id, row.secretIv, row.secretCiphertext) };
}
