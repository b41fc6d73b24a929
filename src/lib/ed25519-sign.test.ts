// Proves seed → public key and signing on the RFC 8032 section 7.1 vectors.
import { describe, expect, test } from "bun:test";
import { ed25519PublicKey, ed25519Sign } from "./ed25519-sign.ts";
import { verifyStrict } from "./ed25519.ts";
import { bytesToHex, hexToBytes } from "./encoding.ts";
import { readShared } from "../../test/helpers/shared.ts";

const VECTORS: { priv: string; pub: string; msg: string; sig: string }[] = JSON.parse(
  readShared("vectors/ed25519/rfc8032.json"),
);

describe("ed25519 from a seed", () => {
  test("there are vectors", () => {
    expect(VECTORS.length).toBeGreaterThanOrEqual(4);
  });

  for (const [i, v] of VECTORS.entries()) {
    test(`RFC 8032 vector ${i + 1}: public key and signature`, () => {
      expect(bytesToHex(ed25519PublicKey(hexToBytes(v.priv)))).toBe(v.pub);
      expect(bytesToHex(ed25519Sign(hexToBytes(v.priv), hexToBytes(v.msg)))).toBe(v.sig);
    });
  }

  test("a fresh seed signs what verifyStrict accepts", () => {
    const seed = crypto.getRandomValues(new Uint8Array(32));
    const message = new TextEncoder().encode("hello");
    expect(verifyStrict(ed25519PublicKey(seed), message, ed25519Sign(seed, message))).toBe(true);
  });

  test("a seed that is not 32 bytes is refused", () => {
    expect(() => ed25519PublicKey(new Uint8Array(31))).toThrow(/32 bytes/);
    expect(() => ed25519Sign(new Uint8Array(64), new Uint8Array(1))).toThrow(/32 bytes/);
  });
});
