// The signer in-process: custodial wallets sign legacy and v0 transactions in their slot, connected ones do not.
import { describe, expect, test } from "bun:test";
import { Keypair, PublicKey, SystemProgram, Transaction, TransactionMessage, VersionedTransaction } from "@solana/web3.js";
import { codeOf } from "../../test/helpers/errors.ts";
import { testDeps } from "../../test/helpers/deps.ts";
import { verifyStrict } from "../lib/ed25519.ts";
import { bytesToHex, encodeBase58 } from "../lib/encoding.ts";
import { createCustodialWallet, exportSecretKey } from "./custody.ts";
import { signerFor, type Signer } from "./signer.ts";

type Deps = Awaited<ReturnType<typeof testDeps>>["deps"];

const blockhash = () => encodeBase58(crypto.getRandomValues(new Uint8Array(32)));
const someAddress = () => Keypair.generate().publicKey;

function legacyTransfer(from: PublicKey, to: PublicKey, feePayer: PublicKey = from): Uint8Array {
  const tx = new Transaction({ feePayer, recentBlockhash: blockhash() }).add(
    SystemProgram.transfer({ fromPubkey: from, toPubkey: to, lamports: 1_000_000 }),
  );
  return new Uint8Array(tx.serialize({ requireAllSignatures: false, verifySignatures: false }));
}

function v0Transfer(from: PublicKey, to: PublicKey, feePayer: PublicKey = from): Uint8Array {
  const message = new TransactionMessage({
    payerKey: feePayer,
    recentBlockhash: blockhash(),
    instructions: [SystemProgram.transfer({ fromPubkey: from, toPubkey: to, lamports: 42 })],
  }).compileToV0Message();
  return new VersionedTransaction(message).serialize();
}

async function custodialSigner(deps: Deps): Promise<Extract<Signer, { kind: "custodial" }>> {
  const { address } = await createCustodialWallet(deps);
  const signer = await signerFor(deps, address);
  if (signer.kind !== "custodial") throw new Error("expected a custodial signer");
  return signer;
}

/** The slot of `address` among the signers, and whether its signature verifies over the message. */
function signatureOf(wire: Uint8Array, address: string): { slot: number; valid: boolean; message: string } {
  const tx = VersionedTransaction.deserialize(wire);
  const slot = tx.message.staticAccountKeys.findIndex((k) => k.toBase58() === address);
  const message = tx.message.serialize();
  const valid = verifyStrict(tx.message.staticAccountKeys[slot]!.toBytes(), message, tx.signatures[slot]!);
  return { slot, valid, message: bytesToHex(message) };
}

describe("signerFor", () => {
  test("an address whose key is held here is custodial", async () => {
    const { deps } = await testDeps();
    const signer = await custodialSigner(deps);
    expect(signer.kind).toBe("custodial");
  });

  test("any other address is connected: the user signs", async () => {
    const { deps } = await testDeps();
    const address = someAddress().toBase58();
    const signer = await signerFor(deps, address);
    expect(signer).toEqual({ kind: "connected", address });
  });

  test("a string that is not an address is INVALID_ADDRESS", async () => {
    const { deps } = await testDeps();
    expect(await codeOf(signerFor(deps, "not-an-address"))).toBe("INVALID_ADDRESS");
  });

  test("nothing secret shows in the signer or in what it returns", async () => {
    const { deps } = await testDeps();
    const signer = await custodialSigner(deps);
    const signed = await signer.sign(legacyTransfer(new PublicKey(signer.address), someAddress()));
    const secretKey = await exportSecretKey(deps, signer.address);
    const visible = JSON.stringify(signer) + bytesToHex(signed) + encodeBase58(signed) + Buffer.from(signed).toString("base64");
    expect(JSON.parse(JSON.stringify(signer))).toEqual({ kind: "custodial", address: signer.address });
    for (const spelling of [bytesToHex(secretKey.subarray(0, 32)), encodeBase58(secretKey), encodeBase58(secretKey.subarray(0, 32))]) {
      expect(visible).not.toContain(spelling);
    }
  });
});

describe("custodial sign", () => {
  test("signs a legacy transfer; the signature verifies and the message is unchanged", async () => {
    const { deps } = await testDeps();
    const signer = await custodialSigner(deps);
    const wallet = new PublicKey(signer.address);
    const unsigned = legacyTransfer(wallet, someAddress());
    const signed = await signer.sign(unsigned);
    const result = signatureOf(signed, signer.address);
    expect(result).toMatchObject({ slot: 0, valid: true, message: signatureOf(unsigned, signer.address).message });
    expect(Transaction.from(signed).verifySignatures()).toBe(true);
  });

  test("signs a v0 transfer; the signature verifies", async () => {
    const { deps } = await testDeps();
    const signer = await custodialSigner(deps);
    const signed = await signer.sign(v0Transfer(new PublicKey(signer.address), someAddress()));
    const tx = VersionedTransaction.deserialize(signed);
    expect(tx.version).toBe(0);
    expect(signatureOf(signed, signer.address)).toMatchObject({ slot: 0, valid: true });
  });

  test("as the second signer, only its own slot is filled; the fee payer's stays empty", async () => {
    const { deps } = await testDeps();
    const signer = await custodialSigner(deps);
    const feePayer = someAddress();
    for (const build of [legacyTransfer, v0Transfer]) {
      const signed = await signer.sign(build(new PublicKey(signer.address), someAddress(), feePayer));
      const tx = VersionedTransaction.deserialize(signed);
      expect(tx.signatures.length).toBe(2);
      expect(tx.signatures[0]!.every((b) => b === 0)).toBe(true);
      expect(signatureOf(signed, signer.address)).toMatchObject({ slot: 1, valid: true });
    }
  });

  test("a transaction that does not name the wallet as a signer is VALIDATION_ERROR, before any key is opened", async () => {
    const { deps } = await testDeps();
    const signer = await custodialSigner(deps);
    const wallet = new PublicKey(signer.address);
    // Under another key decryption would fail with INTERNAL_ERROR: VALIDATION_ERROR shows it never ran.
    const rotated = await signerFor({ ...deps, wallets: { encryptionKey: new Uint8Array(32).fill(7) } }, signer.address);
    if (rotated.kind !== "custodial") throw new Error("expected a custodial signer");
    const notNamed = legacyTransfer(someAddress(), someAddress());
    const recipientOnly = v0Transfer(someAddress(), wallet); // named, but as a writable non-signer
    for (const wire of [notNamed, recipientOnly]) {
      expect(await codeOf(signer.sign(wire))).toBe("VALIDATION_ERROR");
      expect(await codeOf(rotated.sign(wire))).toBe("VALIDATION_ERROR");
    }
    expect(await codeOf(rotated.sign(legacyTransfer(wallet, someAddress())))).toBe("INTERNAL_ERROR");
  });

  test("bytes that are not a transaction are VALIDATION_ERROR", async () => {
    const { deps } = await testDeps();
    const signer = await custodialSigner(deps);
    expect(await codeOf(signer.sign(new Uint8Array(0)))).toBe("VALIDATION_ERROR");
    expect(await codeOf(signer.sign(new Uint8Array([1, 2, 3])))).toBe("VALIDATION_ERROR");
  });
});
