// Custodial wallets in-process: sealed at rest, bound to their address, opened only under the right key.
import { describe, expect, test } from "bun:test";
import { Keypair } from "@solana/web3.js";
import { codeOf } from "../../test/helpers/errors.ts";
import { testDeps } from "../../test/helpers/deps.ts";
import { encryptAesGcm } from "../lib/aes-gcm.ts";
import { bytesToHex, decodeAddress, encodeBase58, hexToBytes } from "../lib/encoding.ts";
import { createLogger } from "../log.ts";
import { createCustodialWallet, exportSecretKey, isCustodial, withCustodialKeypair } from "./custody.ts";
import * as store from "./store.ts";

type Deps = Awaited<ReturnType<typeof testDeps>>["deps"];

const otherKey = () => crypto.getRandomValues(new Uint8Array(32));
const withKey = (deps: Deps, encryptionKey: Uint8Array): Deps => ({ ...deps, wallets: { encryptionKey } });
const unknownAddress = () => Keypair.generate().publicKey.toBase58();

/** Every spelling of a secret key a leak would likely use. */
function spellings(secretKey: Uint8Array): string[] {
  const seed = secretKey.subarray(0, 32);
  return [
    bytesToHex(seed),
    bytesToHex(secretKey),
    encodeBase58(secretKey),
    encodeBase58(seed),
    Buffer.from(seed).toString("base64"),
    Buffer.from(secretKey).toString("base64"),
    JSON.stringify(Array.from(secretKey)),
    Array.from(seed).join(","),
  ];
}

describe("createCustodialWallet", () => {
  test("stores one sealed row under the new address and returns only the address", async () => {
    const { deps, clock } = await testDeps();
    const created = await createCustodialWallet(deps);
    expect(Object.keys(created)).toEqual(["address"]);
    expect(decodeAddress(created.address)?.length).toBe(32);
    const row = await store.findCustodialWallet(deps.db, created.address);
    expect(row).not.toBeNull();
    expect(row!.secretIv.length).toBe(12);
    expect(row!.secretCiphertext.length).toBe(64 + 16);
    expect(row!.createdAt).toBe(clock.now());
    expect(await isCustodial(deps, created.address)).toBe(true);
    expect(await isCustodial(deps, unknownAddress())).toBe(false);
  });

  test("the ciphertext does not contain the secret key, nor does anything returned or logged", async () => {
    const { deps } = await testDeps();
    const lines: string[] = [];
    const logged: Deps = { ...deps, log: createLogger("debug", "json", (line) => lines.push(line)) };
    const created = await createCustodialWallet(logged);
    const secretKey = await exportSecretKey(deps, created.address);
    const row = (await store.findCustodialWallet(deps.db, created.address))!;
    const stored = bytesToHex(row.secretIv) + bytesToHex(row.secretCiphertext);
    expect(stored).not.toContain(bytesToHex(secretKey.subarray(0, 32)));
    expect(stored).not.toContain(bytesToHex(secretKey.subarray(32)));
    const visible = JSON.stringify(created) + lines.join("");
    expect(lines.length).toBeGreaterThan(0);
    for (const spelling of spellings(secretKey)) expect(visible).not.toContain(spelling);
  });

  test("each record has its own IV", async () => {
    const { deps } = await testDeps();
    const a = await createCustodialWallet(deps);
    const b = await createCustodialWallet(deps);
    expect(a.address).not.toBe(b.address);
    const ivA = (await store.findCustodialWallet(deps.db, a.address))!.secretIv;
    const ivB = (await store.findCustodialWallet(deps.db, b.address))!.secretIv;
    expect(bytesToHex(ivA)).not.toBe(bytesToHex(ivB));
  });

  test("the seed comes from deps.random (RFC 8032 vector 1 seed gives its public key)", async () => {
    const { deps } = await testDeps();
    const seed = "9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60";
    const random = (n: number) => (n === 32 ? hexToBytes(seed) : new Uint8Array(n));
    const created = await createCustodialWallet({ ...deps, random });
    expect(bytesToHex(decodeAddress(created.address)!)).toBe("d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a");
    expect(bytesToHex((await exportSecretKey(deps, created.address)).subarray(0, 32))).toBe(seed);
  });
});

describe("withCustodialKeypair", () => {
  test("hands over the wallet's keypair and wipes the secret once `use` returns", async () => {
    const { deps } = await testDeps();
    const { address } = await createCustodialWallet(deps);
    let seen: Keypair | null = null;
    const result = await withCustodialKeypair(deps, address, (keypair) => {
      seen = keypair;
      expect(keypair.secretKey.some((b) => b !== 0)).toBe(true);
      return keypair.publicKey.toBase58();
    });
    expect(result).toBe(address);
    expect(seen!.secretKey.every((b) => b === 0)).toBe(true);
  });

  test("an async `use` keeps the key until it settles, then it is wiped", async () => {
    const { deps } = await testDeps();
    const { address } = await createCustodialWallet(deps);
    let seen: Keypair | null = null;
    const nonZero = await withCustodialKeypair(deps, address, async (keypair) => {
      seen = keypair;
      await new Promise((resolve) => setTimeout(resolve, 1));
      return keypair.secretKey.some((b) => b !== 0);
    });
    expect(nonZero).toBe(true);
    expect(seen!.secretKey.every((b) => b === 0)).toBe(true);
  });

  test("the secret is wiped when `use` throws", async () => {
    const { deps } = await testDeps();
    const { address } = await createCustodialWallet(deps);
    let seen: Keypair | null = null;
    const failing = withCustodialKeypair(deps, address, (keypair) => {
      seen = keypair;
      throw new Error("boom");
    });
    await expect(failing).rejects.toThrow("boom");
    expect(seen!.secretKey.every((b) => b === 0)).toBe(true);
  });

  test("an address whose key is not held here is NOT_FOUND", async () => {
    const { deps } = await testDeps();
    expect(await codeOf(withCustodialKeypair(deps, unknownAddress(), () => 1))).toBe("NOT_FOUND");
    expect(await codeOf(withCustodialKeypair(deps, "not an address", () => 1))).toBe("NOT_FOUND");
    expect(await codeOf(exportSecretKey(deps, unknownAddress()))).toBe("NOT_FOUND");
  });

  test("a different WALLET_ENCRYPTION_KEY is INTERNAL_ERROR naming the likely cause", async () => {
    const { deps } = await testDeps();
    const { address } = await createCustodialWallet(deps);
    const rotated = withKey(deps, otherKey());
    let used = false;
    const attempt = withCustodialKeypair(rotated, address, () => (used = true));
    expect(await codeOf(attempt)).toBe("INTERNAL_ERROR");
    await expect(withCustodialKeypair(rotated, address, () => 1)).rejects.toThrow("WALLET_ENCRYPTION_KEY changed?");
    expect(used).toBe(false);
  });

  test("ciphertexts swapped between two rows never open: each is bound to its own address", async () => {
    const { deps, db } = await testDeps();
    const a = await createCustodialWallet(deps);
    const b = await createCustodialWallet(deps);
    const rowA = (await store.findCustodialWallet(db, a.address))!;
    const rowB = (await store.findCustodialWallet(db, b.address))!;
    const swap = db.sqlite.query("UPDATE custodial_wallets SET secret_iv = ?, secret_ciphertext = ? WHERE address = ?");
    swap.run(rowB.secretIv, rowB.secretCiphertext, a.address);
    swap.run(rowA.secretIv, rowA.secretCiphertext, b.address);
    const used: string[] = [];
    for (const { address } of [a, b]) {
      expect(await codeOf(withCustodialKeypair(deps, address, (k) => used.push(k.publicKey.toBase58())))).toBe("INTERNAL_ERROR");
      expect(await codeOf(exportSecretKey(deps, address))).toBe("INTERNAL_ERROR");
      // Refused by GCM (the AAD), before the check of the public half could catch it.
      await expect(exportSecretKey(deps, address)).rejects.toThrow("cannot be decrypted");
    }
    expect(used).toEqual([]);
  });

  test("a record sealed for its address under the right key but holding another wallet's key is INTERNAL_ERROR: it never signs", async () => {
    const { deps, db } = await testDeps();
    const { address } = await createCustodialWallet(deps);
    // GCM and its AAD pass (a record written with WALLET_ENCRYPTION_KEY for this address); only the key inside is wrong.
    const sealed = encryptAesGcm(deps.wallets.encryptionKey, Keypair.generate().secretKey, new TextEncoder().encode(address));
    db.sqlite.query("UPDATE custodial_wallets SET secret_iv = ?, secret_ciphertext = ? WHERE address = ?").run(sealed.iv, sealed.ciphertext, address);
    const used: string[] = [];
    expect(await codeOf(withCustodialKeypair(deps, address, (k) => used.push(k.publicKey.toBase58())))).toBe("INTERNAL_ERROR");
    await expect(exportSecretKey(deps, address)).rejects.toThrow("does not match its address");
    expect(used).toEqual([]);
  });

  test("a ciphertext with one bit flipped is INTERNAL_ERROR", async () => {
    const { deps, db } = await testDeps();
    const { address } = await createCustodialWallet(deps);
    const row = (await store.findCustodialWallet(db, address))!;
    const tampered = new Uint8Array(row.secretCiphertext);
    tampered[10]! ^= 0x80;
    db.sqlite.query("UPDATE custodial_wallets SET secret_ciphertext = ? WHERE address = ?").run(tampered, address);
    expect(await codeOf(exportSecretKey(deps, address))).toBe("INTERNAL_ERROR");
  });
});

describe("exportSecretKey", () => {
  test("gives Solana's 64-byte secret key (seed || public key) of the address", async () => {
    const { deps } = await testDeps();
    const { address } = await createCustodialWallet(deps);
    const secretKey = await exportSecretKey(deps, address);
    expect(secretKey.length).toBe(64);
    // fromSecretKey validates that the seed derives the public half.
    expect(Keypair.fromSecretKey(secretKey).publicKey.toBase58()).toBe(address);
  });
});
