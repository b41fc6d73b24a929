// Identifiers: a type prefix and a random part from a CSPRNG (spec/README.md "Identifiers").
import { encodeBase58 } from "./encoding.ts";

export type Random = (byteCount: number) => Uint8Array;

export const cryptoRandom: Random = (byteCount) => crypto.getRandomValues(new Uint8Array(byteCount));

/** `prefix_` + 16 random bytes in base58, e.g. `prod_…`. */
export function newId(prefix: string, random: Random): string {
  return `${prefix}_${encodeBase58(random(16))}`;
}

/** 32 random bytes in base58 (nonces, feature tokens). */
export function newSecretBase58(random: Random): string {
  return encodeBase58(random(32));
}

/** RFC 4122 version 4 UUID from the injected random source. */
export function newUuid(random: Random): string {
  return uuidV4Of(random(16));
}

/** A version 4 UUID made of the first 16 of `bytes`, which must be random or a keyed hash's output. */
export function uuidV4Of(bytes: Uint8Array): string {
  const b = bytes.slice(0, 16);
  b[6] = (b[6]! & 0x0f) | 0x40;
  b[8] = (b[8]! & 0x3f) | 0x80;
  const h = Buffer.from(b).toString("hex");
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}
