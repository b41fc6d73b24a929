// Proves verifyStrict on the published vectors and against an independent reference of the strict rule.
import { describe, expect, test } from "bun:test";
import { Point, etc, hashes, sign, getPublicKey, utils } from "@noble/ed25519";
import { sha512 } from "@noble/hashes/sha2.js";
import { verifyStrict, isCanonicalEncoding, isSmallOrderEncoding, isCanonicalScalar } from "./ed25519.ts";
import { hexToBytes } from "./encoding.ts";
import { readShared } from "../../test/helpers/shared.ts";

hashes.sha512 = sha512;

const load = (name: string) => JSON.parse(readShared(`vectors/ed25519/${name}`));

const L = 2n ** 252n + 27742317777372353535851937790883648493n;
const le = (b: Uint8Array) => BigInt("0x" + Buffer.from(b).reverse().toString("hex") || "0");
const same = (a: Uint8Array, b: Uint8Array) => Buffer.from(a).equals(Buffer.from(b));

/** The rule of auth.md step 7 written out with curve arithmetic, slowly and independently. */
function referenceStrict(pub: Uint8Array, msg: Uint8Array, sig: Uint8Array): boolean {
  if (pub.length !== 32 || sig.length !== 64) return false;
  const rBytes = sig.subarray(0, 32);
  const s = le(sig.subarray(32));
  if (s >= L) return false;
  let a: Point, r: Point;
  try {
    a = Point.fromBytes(pub, false);
    r = Point.fromBytes(rBytes, false);
  } catch {
    return false;
  }
  if (!same(a.toBytes(), pub) || !same(r.toBytes(), rBytes)) return false; // canonical encodings only
  if (a.isSmallOrder() || r.isSmallOrder()) return false;
  const k = etc.mod(le(sha512(Buffer.concat([rBytes, pub, msg]))), L);
  const rCheck = Point.BASE.multiplyUnsafe(s).subtract(a.multiplyUnsafe(k)); // cofactorless
  return same(rCheck.toBytes(), rBytes);
}

function both(pub: Uint8Array, msg: Uint8Array, sig: Uint8Array) {
  const fast = verifyStrict(pub, msg, sig);
  expect(fast).toBe(referenceStrict(pub, msg, sig));
  return fast;
}

describe("strict Ed25519", () => {
  test("RFC 8032 section 7.1: every vector verifies", () => {
    const vectors = load("rfc8032.json") as { pub: string; msg: string; sig: string }[];
    expect(vectors.length).toBeGreaterThan(0);
    for (const v of vectors) expect(both(hexToBytes(v.pub), hexToBytes(v.msg), hexToBytes(v.sig))).toBe(true);
  });

  test("Wycheproof: valid accepted, invalid refused, agreeing with the reference", () => {
    const data = load("wycheproof-ed25519.json");
    let count = 0;
    for (const group of data.testGroups) {
      const pub = hexToBytes(group.publicKey?.pk ?? group.key.pk);
      for (const t of group.tests) {
        const ok = both(pub, hexToBytes(t.msg), hexToBytes(t.sig));
        expect({ id: t.tcId, ok }).toEqual({ id: t.tcId, ok: t.result === "valid" });
        count++;
      }
    }
    expect(count).toBe(data.numberOfTests);
  });

  test("ed25519-speccheck: the twelve edge cases", () => {
    const cases = load("speccheck-cases.json") as { message: string; pub_key: string; signature: string }[];
    // Expected outcome per case under the strict rule, each with its reason.
    const expected: [boolean, string][] = [
      [false, "0: A and R of small order (both equations hold)"],
      [false, "1: A of small order (both equations hold)"],
      [false, "2: R of small order (both equations hold)"],
      [true, "3: A and R of mixed order but not small, canonical, cofactorless equation holds"],
      [false, "4: only the cofactored equation holds"],
      [false, "5: only the cofactored equation holds (R torsion-free, A mixed order)"],
      [false, "6: S >= L"],
      [false, "7: S much larger than L"],
      [false, "8: R non-canonical and of small order"],
      [false, "9: R non-canonical and of small order (equations hold)"],
      [false, "10: A non-canonical and of small order"],
      [false, "11: A non-canonical and of small order (equations hold)"],
    ];
    expect(cases.length).toBe(12);
    cases.forEach((c, i) => {
      const ok = both(hexToBytes(c.pub_key), hexToBytes(c.message), hexToBytes(c.signature));
      expect(`${expected[i]![1]} → ${ok}`).toBe(`${expected[i]![1]} → ${expected[i]![0]}`);
    });
  });

  test("ZIP-215: every case uses a small-order or non-canonical A or R and is refused", () => {
    const cases = load("zip215.json") as { vk_bytes: string; sig_bytes: string }[];
    expect(cases.length).toBe(196);
    const msg = new TextEncoder().encode("Zcash");
    for (const c of cases) {
      const pub = hexToBytes(c.vk_bytes);
      const sig = hexToBytes(c.sig_bytes);
      const r = sig.subarray(0, 32);
      const flagged =
        !isCanonicalEncoding(pub) || isSmallOrderEncoding(pub) || !isCanonicalEncoding(r) || isSmallOrderEncoding(r);
      expect(flagged).toBe(true);
      expect(both(pub, msg, sig)).toBe(false);
    }
  });

  test("random keys: valid signatures pass, any flipped bit fails", () => {
    for (let i = 0; i < 20; i++) {
      const secret = utils.randomSecretKey();
      const pub = getPublicKey(secret);
      const msg = crypto.getRandomValues(new Uint8Array(1 + i * 7));
      const sig = sign(msg, secret);
      expect(both(pub, msg, sig)).toBe(true);
      const bad = sig.slice();
      bad[i % 64]! ^= 1 << (i % 8);
      expect(both(pub, msg, bad)).toBe(false);
      const badMsg = msg.slice();
      badMsg[0]! ^= 1;
      expect(both(pub, badMsg, sig)).toBe(false);
    }
  });

  test("scalar bound: S = L - 1 passes the range check, S = L and above do not", () => {
    const lBytes = hexToBytes("edd3f55c1a631258d69cf7a2def9de1400000000000000000000000000000010");
    expect(isCanonicalScalar(lBytes)).toBe(false);
    const below = lBytes.slice();
    below[0] = 0xec;
    expect(isCanonicalScalar(below)).toBe(true);
    expect(isCanonicalScalar(new Uint8Array(32).fill(0xff))).toBe(false);
  });

  test("wrong lengths are refused", () => {
    expect(verifyStrict(new Uint8Array(31), new Uint8Array(1), new Uint8Array(64))).toBe(false);
    expect(verifyStrict(new Uint8Array(32), new Uint8Array(1), new Uint8Array(63))).toBe(false);
  });
});
