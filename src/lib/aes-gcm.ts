// AES-256-GCM sealing of small secrets at rest: a fresh 96-bit IV per record, the tag appended.
import { createCipheriv, createDecipheriv } from "node:crypto";
import { cryptoRandom, type Random } from "./ids.ts";

export const AES_GCM_KEY_BYTES = 32;
export const AES_GCM_IV_BYTES = 12;
export const AES_GCM_TAG_BYTES = 16;

export type AesGcmSealed = { iv: Uint8Array; ciphertext: Uint8Array };

// A wrong key size is a configuration bug, not bad input: fail loudly instead of returning null.
function checkKey(key: Uint8Array): void {
  if (key.length !== AES_GCM_KEY_BYTES) throw new RangeError(`an AES-256-GCM key is ${AES_GCM_KEY_BYTES} bytes, got ${key.length}`);
}

/** A Uint8Array over the same memory as `buffer`, so that wiping it wipes the bytes node:crypto produced. */
function view(buffer: Buffer): Uint8Array {
  return new Uint8Array(buffer.buffer, buffer.byteOffset, buffer.byteLength);
}

/**
 * Encrypts `plaintext` bound to `aad` under a 32-byte key. Returns the IV (12 bytes from `random`,
 * never reused in practice: 2^-48 collision odds after 2^24 records) and ciphertext||16-byte tag.
 */
export function encryptAesGcm(
  key: Uint8Array,
  plaintext: Uint8Array,
  aad: Uint8Array,
  random: Random = cryptoRandom,
): AesGcmSealed {
  checkKey(key);
  const iv = random(AES_GCM_IV_BYTES);
  if (iv.length !== AES_GCM_IV_BYTES) throw new RangeError(`an AES-GCM IV here is ${AES_GCM_IV_BYTES} bytes, got ${iv.length}`);
  const cipher = createCipheriv("aes-256-gcm", key, iv, { authTagLength: AES_GCM_TAG_BYTES });
  cipher.setAAD(aad);
  const body = cipher.update(plaintext);
  const last = cipher.final(); // empty for GCM, kept for form
  const tag = cipher.getAuthTag();
  const ciphertext = new Uint8Array(body.length + last.length + tag.length);
  ciphertext.set(body, 0);
  ciphertext.set(last, body.length);
  ciphertext.set(tag, body.length + last.length);
  return { iv: new Uint8Array(iv), ciphertext };
}

/**
 * Decrypts ciphertext||tag made by encryptAesGcm. Null when anything fails to authenticate (wrong key,
 * IV, AAD, altered bytes, wrong lengths): the caller cannot tell which, and must not need to.
 * The result is the caller's to wipe when done.
 */
export function decryptAesGcm(key: Uint8Array, iv: Uint8Array, ciphertext: Uint8Array, aad: Uint8Array): Uint8Array | null {
  checkKey(key);
  if (iv.length !== AES_GCM_IV_BYTES || ciphertext.length < AES_GCM_TAG_BYTES) return null;
  const bodyLength = ciphertext.length - AES_GCM_TAG_BYTES;
  let body: Buffer | null = null;
  try {
    const decipher = createDecipheriv("aes-256-gcm", key, iv, { authTagLength: AES_GCM_TAG_BYTES });
    decipher.setAAD(aad);
    decipher.setAuthTag(ciphertext.subarray(bodyLength));
    body = decipher.update(ciphertext.subarray(0, bodyLength));
    decipher.final(); // throws when the tag does not authenticate
    return view(body);
  } catch {
    body?.fill(0); // unauthenticated plaintext is never handed out, nor left lying in memory
    return null;
  }
}
