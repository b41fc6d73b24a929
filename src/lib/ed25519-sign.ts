// Ed25519 key derivation and signing from a raw 32-byte seed, over the runtime's native implementation.
//
// Native rather than a JS library so that the seed never turns into JS bigints or copies we cannot
// wipe: the only JS copy is the DER wrapper below, which is zeroed as soon as the key object exists.
import { createPrivateKey, createPublicKey, sign as nativeSign, type KeyObject } from "node:crypto";

// PKCS#8 PrivateKeyInfo for Ed25519 (RFC 8410) up to the 32-byte seed.
const PKCS8_ED25519_PREFIX = Buffer.from("302e020100300506032b657004220420", "hex");
const SPKI_ED25519_PREFIX_BYTES = 12;

function privateKeyOf(seed: Uint8Array): KeyObject {
  if (seed.length !== 32) throw new RangeError(`an Ed25519 seed is 32 bytes, got ${seed.length}`);
  const der = Buffer.alloc(PKCS8_ED25519_PREFIX.length + 32); // alloc, not allocUnsafe: never a shared pool slab
  PKCS8_ED25519_PREFIX.copy(der);
  der.set(seed, PKCS8_ED25519_PREFIX.length);
  try {
    return createPrivateKey({ key: der, format: "der", type: "pkcs8" });
  } finally {
    der.fill(0);
  }
}

/** The 32-byte public key of a seed (what a Solana address encodes). */
export function ed25519PublicKey(seed: Uint8Array): Uint8Array {
  const spki = createPublicKey(privateKeyOf(seed)).export({ format: "der", type: "spki" });
  return new Uint8Array(spki.subarray(SPKI_ED25519_PREFIX_BYTES));
}

/** The 64-byte Ed25519 signature (RFC 8032, pure) of `message` under the key of `seed`. */
export function ed25519Sign(seed: Uint8Array, message: Uint8Array): Uint8Array {
  return new Uint8Array(nativeSign(null, message, privateKeyOf(seed)));
}
