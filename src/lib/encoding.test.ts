// Address validation at the edges: isAddress answers as decodeAddress does, also once it remembers.
import { describe, expect, test } from "bun:test";
import { Keypair } from "@solana/web3.js";
import { decodeAddress, isAddress } from "./encoding.ts";

describe("isAddress", () => {
  // Bad characters, too short or long, more than 32 bytes ("z" x 44), 33 leading zero bytes.
  const invalid = ["", "0OIl", "1".repeat(31), "1".repeat(45), "z".repeat(44), "1".repeat(33), "abc def"];

  test("answers as decodeAddress does, the first time and every time after", () => {
    const valid = Array.from({ length: 20 }, () => Keypair.generate().publicKey.toBase58());
    valid.push("11111111111111111111111111111111"); // 32 zero bytes
    for (let round = 0; round < 2; round++) {
      for (const a of valid) expect([isAddress(a), decodeAddress(a)?.length]).toEqual([true, 32]);
      for (const a of invalid) expect([isAddress(a), decodeAddress(a)]).toEqual([false, null]);
    }
  });

  test("past the number it remembers, old addresses are checked again, not refused", () => {
    const many = Array.from({ length: 5000 }, () => Keypair.generate().publicKey.toBase58());
    for (const a of many) expect(isAddress(a)).toBe(true);
    for (const a of many) expect(isAddress(a)).toBe(true);
    for (const a of invalid) expect(isAddress(a)).toBe(false);
  });
});
