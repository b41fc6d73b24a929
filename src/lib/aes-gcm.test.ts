// Proves the AES-256-GCM helper on the GCM specification's published vectors and against tampering.
import { describe, expect, test } from "bun:test";
import { decryptAesGcm, encryptAesGcm } from "./aes-gcm.ts";
import { bytesToHex, hexToBytes } from "./encoding.ts";

// McGrew & Viega, "The Galois/Counter Mode of Operation (GCM)", appendix B, AES-256 test cases 13-16.
const K_ZERO = "0000000000000000000000000000000000000000000000000000000000000000";
const K_FEFF = "feffe9928665731c6d6a8f9467308308feffe9928665731c6d6a8f9467308308";
const P_64 =
  "d9313225f88406e5a55909c5aff5269a86a7a9531534f7da2e4c303d8a318a72" +
  "1c3c0c95956809532fcf0e2449a6b525b16aedf5aa0de657ba637b391aafd255";
const C_64 =
  "522dc1f099567d07f47f37a32a84427d643a8cdcbfe5c0c97598a2bd2555d1aa" +
  "8cb08e48590dbb3da7b08b1056828838c5f61e6393ba7a0abcc9f662898015ad";

const VECTORS = [
  { name: "test case 13 (empty)", key: K_ZERO, iv: "000000000000000000000000", aad: "", p: "", c: "", tag: "530f8afbc74536b9a963b4f1c4cb738b" },
  {
    name: "test case 14 (one zero block)",
    key: K_ZERO,
    iv: "000000000000000000000000",
    aad: "",
    p: "00000000000000000000000000000000",
    c: "cea7403d4d606b6e074ec5d3baf39d18",
    tag: "d0d1c8a799996bf0265b98b5d48ab919",
  },
  { name: "test case 15 (64 bytes)", key: K_FEFF, iv: "cafebabefacedbaddecaf888", aad: "", p: P_64, c: C_64, tag: "b094dac5d93471bdec1a502270e3cc6c" },
  {
    name: "test case 16 (60 bytes with AAD)",
    key: K_FEFF,
    iv: "cafebabefacedbaddecaf888",
    aad: "feedfacedeadbeeffeedfacedeadbeefabaddad2",
    p: P_64.slice(0, 120),
    c: C_64.slice(0, 120),
    tag: "76fc6ece0f4e1768cddf8853bb2d551b",
  },
];

const key = () => crypto.getRandomValues(new Uint8Array(32));
const text = (s: string) => new TextEncoder().encode(s);
const flip = (bytes: Uint8Array, index: number) => {
  const copy = new Uint8Array(bytes);
  copy[index]! ^= 0x01;
  return copy;
};

describe("published vectors", () => {
  for (const v of VECTORS) {
    test(v.name, () => {
      const fixedIv = () => hexToBytes(v.iv);
      const sealed = encryptAesGcm(hexToBytes(v.key), hexToBytes(v.p), hexToBytes(v.aad), fixedIv);
      expect(bytesToHex(sealed.iv)).toBe(v.iv);
      expect(bytesToHex(sealed.ciphertext)).toBe(v.c + v.tag);
      const opened = decryptAesGcm(hexToBytes(v.key), hexToBytes(v.iv), hexToBytes(v.c + v.tag), hexToBytes(v.aad));
      expect(opened === null ? null : bytesToHex(opened)).toBe(v.p);
    });
  }
});

describe("encryptAesGcm / decryptAesGcm", () => {
  test("round trip, ciphertext is plaintext length + 16, IV is 12 bytes", () => {
    const k = key();
    const plaintext = crypto.getRandomValues(new Uint8Array(64));
    const sealed = encryptAesGcm(k, plaintext, text("address"));
    expect(sealed.iv.length).toBe(12);
    expect(sealed.ciphertext.length).toBe(80);
    expect(decryptAesGcm(k, sealed.iv, sealed.ciphertext, text("address"))).toEqual(plaintext);
  });

  test("two encryptions of the same plaintext use different IVs and ciphertexts", () => {
    const k = key();
    const plaintext = text("same secret");
    const a = encryptAesGcm(k, plaintext, text("x"));
    const b = encryptAesGcm(k, plaintext, text("x"));
    expect(bytesToHex(a.iv)).not.toBe(bytesToHex(b.iv));
    expect(bytesToHex(a.ciphertext)).not.toBe(bytesToHex(b.ciphertext));
  });

  test("tampering with the ciphertext, the tag, the IV or the AAD gives null", () => {
    const k = key();
    const aad = text("wallet-address");
    const { iv, ciphertext } = encryptAesGcm(k, text("the secret key bytes"), aad);
    expect(decryptAesGcm(k, iv, flip(ciphertext, 0), aad)).toBeNull();
    expect(decryptAesGcm(k, iv, flip(ciphertext, ciphertext.length - 1), aad)).toBeNull(); // the tag
    expect(decryptAesGcm(k, flip(iv, 5), ciphertext, aad)).toBeNull();
    expect(decryptAesGcm(k, iv, ciphertext, flip(aad, 3))).toBeNull();
    expect(decryptAesGcm(k, iv, ciphertext, text("another-address"))).toBeNull();
    expect(decryptAesGcm(k, iv, ciphertext, new Uint8Array(0))).toBeNull();
  });

  test("a wrong key gives null", () => {
    const sealed = encryptAesGcm(key(), text("secret"), text("a"));
    expect(decryptAesGcm(key(), sealed.iv, sealed.ciphertext, text("a"))).toBeNull();
  });

  test("malformed input gives null, never an exception", () => {
    const k = key();
    const { iv, ciphertext } = encryptAesGcm(k, text("secret"), text("a"));
    expect(decryptAesGcm(k, iv.subarray(0, 11), ciphertext, text("a"))).toBeNull();
    expect(decryptAesGcm(k, new Uint8Array(16), ciphertext, text("a"))).toBeNull();
    expect(decryptAesGcm(k, iv, ciphertext.subarray(0, 15), text("a"))).toBeNull();
    expect(decryptAesGcm(k, iv, new Uint8Array(0), text("a"))).toBeNull();
    expect(decryptAesGcm(k, iv, ciphertext.subarray(0, ciphertext.length - 1), text("a"))).toBeNull(); // truncated tag
    expect(decryptAesGcm(k, iv, ciphertext.subarray(1), text("a"))).toBeNull();
  });

  test("keys that are not 32 bytes are refused", () => {
    expect(() => encryptAesGcm(new Uint8Array(16), text("x"), text("a"))).toThrow(/32 bytes/);
    expect(() => encryptAesGcm(new Uint8Array(33), text("x"), text("a"))).toThrow(/32 bytes/);
    expect(() => decryptAesGcm(new Uint8Array(31), new Uint8Array(12), new Uint8Array(16), text("a"))).toThrow(/32 bytes/);
  });

  test("a random source that does not give 12 bytes is refused", () => {
    expect(() => encryptAesGcm(key(), text("x"), text("a"), () => new Uint8Array(8))).toThrow(/12 bytes/);
  });
});
