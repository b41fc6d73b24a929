// Strict Ed25519 verification (Solana's verify_strict rule) on top of the native verifier.
//
// The native verifier (BoringSSL behind node:crypto) is cofactorless, rejects S >= L and compares R by
// its encoding. What it does not do is refuse small-order or non-canonical A and R, so those are
// refused here first, from a fixed list of encodings as libsodium keeps it.
import { createPublicKey, verify as nativeVerify } from "node:crypto";

// y-coordinates (sign bit masked) of the eight points of small order: 0, 1, p-1 and the two order-8 ys.
const SMALL_ORDER_Y: readonly Uint8Array[] = [
  "0000000000000000000000000000000000000000000000000000000000000000",
  "0100000000000000000000000000000000000000000000000000000000000000",
  "ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",
  "26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc05",
  "c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac037a",
].map((hex) => new Uint8Array(Buffer.from(hex, "hex")));

// The group order L, little-endian.
const ORDER_L = new Uint8Array(
  Buffer.from("edd3f55c1a631258d69cf7a2def9de1400000000000000000000000000000010", "hex"),
);

const SPKI_ED25519_PREFIX = Buffer.from("302a300506032b6570032100", "hex");

/** True when the 32-byte encoding's y (sign bit masked) is below p = 2^255 - 19. */
export function isCanonicalEncoding(point: Uint8Array): boolean {
  if ((point[31]! & 0x7f) !== 0x7f) return true;
  for (let i = 30; i >= 1; i--) if (point[i] !== 0xff) return true;
  return point[0]! < 0xed;
}

/** True when the encoding names one of the eight small-order points (either sign bit). */
export function isSmallOrderEncoding(point: Uint8Array): boolean {
  outer: for (const y of SMALL_ORDER_Y) {
    for (let i = 0; i < 31; i++) if (point[i] !== y[i]) continue outer;
    if ((point[31]! & 0x7f) === y[31]) return true;
  }
  return false;
}

/** True when the little-endian scalar is below the group order L. */
export function isCanonicalScalar(scalar: Uint8Array): boolean {
  for (let i = 31; i >= 0; i--) {
    if (scalar[i]! < ORDER_L[i]!) return true;
    if (scalar[i]! > ORDER_L[i]!) return false;
  }
  return false; // equal to L
}

/**
 * Verifies `signature` (64 bytes: R || S) over `message` with the 32-byte `publicKey`, strictly:
 * S < L, A and R canonical and not of small order, cofactorless equation with R compared by encoding.
 */
export function verifyStrict(publicKey: Uint8Array, message: Uint8Array, signature: Uint8Array): boolean {
  if (publicKey.length !== 32 || signature.length !== 64) return false;
  const r = signature.subarray(0, 32);
  const s = signature.subarray(32, 64);
  if (!isCanonicalScalar(s)) return false;
  if (!isCanonicalEncoding(publicKey) || isSmallOrderEncoding(publicKey)) return false;
  if (!isCanonicalEncoding(r) || isSmallOrderEncoding(r)) return false;
  try {
    const key = createPublicKey({
      key: Buffer.concat([SPKI_ED25519_PREFIX, publicKey]),
      format: "der",
      type: "spki",
    });
    return nativeVerify(null, message, key, signature);
  } catch {
    return false; // A does not decode to a curve point
  }
}
