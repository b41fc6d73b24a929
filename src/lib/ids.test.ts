// Identifiers as spec/README.md "Identifiers" has them: a prefix and 16 random bytes in base58, 32 for
// tokens, keys and nonces, UUID v4 for sessions.
import { expect, test } from "bun:test";
import { decodeBase58 } from "./encoding.ts";
import { cryptoRandom, newId, newSecretBase58, newUuid, uuidV4Of } from "./ids.ts";

const UUID_V4 = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

test("ids are their prefix and 16 random bytes in base58; secrets 32; both from the random source given", () => {
  for (const prefix of ["prod", "pur", "ord", "chk", "agt"]) {
    const id = newId(prefix, cryptoRandom);
    expect(id.startsWith(`${prefix}_`)).toBe(true);
    expect(decodeBase58(id.slice(prefix.length + 1))?.length).toBe(16);
  }
  expect(decodeBase58(newSecretBase58(cryptoRandom))?.length).toBe(32);
  const ones = (n: number) => new Uint8Array(n).fill(0xff);
  expect(newId("prod", ones)).toBe(newId("prod", ones)); // all of it comes from the source: tests can fix it
  const seen = new Set(Array.from({ length: 1000 }, () => newId("prod", cryptoRandom)));
  expect(seen.size).toBe(1000);
});

test("session ids and token ids are UUID v4, whatever the bytes they are made of", () => {
  for (let i = 0; i < 100; i++) expect(newUuid(cryptoRandom)).toMatch(UUID_V4);
  expect(uuidV4Of(new Uint8Array(32).fill(0xff))).toMatch(UUID_V4);
  expect(uuidV4Of(new Uint8Array(16))).toBe("00000000-0000-4000-8000-000000000000");
  const bytes = new Uint8Array(16).fill(0xab);
  uuidV4Of(bytes);
  expect(bytes).toEqual(new Uint8Array(16).fill(0xab)); // the bytes given are left as they were
});
