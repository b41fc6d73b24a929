// Standard Webhooks signatures: `whsec_` secrets and the webhook-id / -timestamp / -signature headers.
import { decodeBase64Strict, encodeBase64 } from "../lib/encoding.ts";
import { hmacSha256 } from "../lib/hash.ts";
import type { Random } from "../lib/ids.ts";

const SECRET_PREFIX = "whsec_";
export const WEBHOOK_SECRET_BYTES = 32;

/** A new secret: `whsec_` + base64 of 32 random bytes. */
export function newWebhookSecret(random: Random): string {
  return formatWebhookSecret(random(WEBHOOK_SECRET_BYTES));
}

export function formatWebhookSecret(bytes: Uint8Array): string {
  return SECRET_PREFIX + encodeBase64(bytes);
}

/** The key bytes of a `whsec_` secret; null when it is not one. */
export function webhookSecretBytes(secret: string): Uint8Array | null {
  if (!secret.startsWith(SECRET_PREFIX)) return null;
  const bytes = decodeBase64Strict(secret.slice(SECRET_PREFIX.length));
  return bytes !== null && bytes.length > 0 ? bytes : null;
}

/**
 * The three Standard Webhooks headers for one attempt. `webhook-signature` holds one `v1,<base64>` per
 * secret, space-separated, so a receiver holding either the old or the new secret during a rotation
 * accepts the message. The signed content is `{id}.{timestamp}.{body}` with the body byte for byte.
 */
export function signWebhook(secrets: string[], id: string, timestampS: number, body: string): Record<string, string> {
  if (secrets.length === 0) throw new Error("signWebhook needs at least one secret");
  if (!Number.isSafeInteger(timestampS) || timestampS < 0) throw new Error("webhook-timestamp must be whole Unix seconds");
  const signed = `${id}.${timestampS}.${body}`;
  const signatures = secrets.map((secret) => {
    const key = webhookSecretBytes(secret);
    if (key === null) throw new Error("not a whsec_ secret"); // never echo the secret itself
    try {
      return `v1,${encodeBase64(hmacSha256(key, signed))}`;
    } finally {
      key.fill(0);
    }
  });
  return {
    "webhook-id": id,
    "webhook-timestamp": String(timestampS),
    "webhook-signature": signatures.join(" "),
  };
}
