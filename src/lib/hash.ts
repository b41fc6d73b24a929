// Hashes, HMACs and constant-time comparison over the runtime's native crypto.
import { createHmac, timingSafeEqual } from "node:crypto";

/** SHA-256 as lowercase hex (Bun's one-shot hasher: a third of node:crypto's createHash per call). */
export function sha256Hex(data: string | Uint8Array): string {
  return Bun.SHA256.hash(data, "hex");
}

export function hmacSha256Hex(key: Uint8Array, data: string | Uint8Array): string {
  return createHmac("sha256", key).update(data).digest("hex");
}

export function hmacSha256(key: Uint8Array, data: string | Uint8Array): Uint8Array {
  return new Uint8Array(createHmac("sha256", key).update(data).digest());
}

/** Constant-time equality for secrets of any length (lengths themselves are not secret). */
export function equalSecrets(a: string | Uint8Array, b: string | Uint8Array): boolean {
  const x = typeof a === "string" ? Buffer.from(a) : Buffer.from(a);
  const y = typeof b === "string" ? Buffer.from(b) : Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}
