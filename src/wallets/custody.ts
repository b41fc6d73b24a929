// Custodial wallets: a keypair made here, its secret key sealed at rest, opened only to sign.
import { Keypair } from "@solana/web3.js";
import type { Deps } from "../deps.ts";
import { AppError } from "../errors.ts";
import { decryptAesGcm, encryptAesGcm } from "../lib/aes-gcm.ts";
import { ed25519PublicKey, ed25519Sign } from "../lib/ed25519-sign.ts";
import { decodeAddress, encodeBase58 } from "../lib/encoding.ts";
import * as store from "./store.ts";

/** Solana's secret key format: the 32-byte seed followed by the 32-byte public key. */
const SECRET_KEY_BYTES = 64;
const SEED_BYTES = 32;

// The address is the additional authenticated data: a ciphertext copied into another wallet's row
// does not decrypt there, so a database edit cannot make one wallet sign with another's key.
const aadOf = (address: string) => new TextEncoder().encode(address);

const notCustodial = (address: string) => new AppError("NOT_FOUND", `${address} is not a custodial wallet of this service`);

const undecryptable = () => new AppError("INTERNAL_ERROR", "wallet key cannot be decrypted (WALLET_ENCRYPTION_KEY changed?)");

function sameBytes(a: Uint8Array, b: Uint8Array): boolean {
  return a.length === b.length && a.every((byte, i) => byte === b[i]);
}

/**
 * A new wallet whose key is sealed but not yet stored: it can sign (wallet_create's sign-in) before
 * anything is written, so a refused sign-in (a rate limit) leaves no orphan wallet behind. `save()` stores
 * it, or `saveInWrite()` inside the caller's write (the sign-in's: the key and its session together); nothing
 * is stored if neither is called. The seed is wiped as soon as the key is sealed.
 */
export type PreparedWallet = Readonly<{ address: string; signMessage(message: Uint8Array): Uint8Array; save(): Promise<void>; saveInWrite(): void }>;

export function prepareCustodialWallet(deps: Deps, label: string | null = null): PreparedWallet {
  const seed = deps.random(SEED_BYTES);
  const secretKey = new Uint8Array(SECRET_KEY_BYTES);
  try {
    const publicKey = ed25519PublicKey(seed);
    secretKey.set(seed, 0);
    secretKey.set(publicKey, SEED_BYTES);
    const address = encodeBase58(publicKey);
    const sealed = encryptAesGcm(deps.wallets.encryptionKey, secretKey, aadOf(address), deps.random);
    const row = () => ({ address, secretIv: sealed.iv, secretCiphertext: sealed.ciphertext, createdAt: deps.clock.now(), label });
    const open = () => {
      const secret = decryptAesGcm(deps.wallets.encryptionKey, sealed.iv, sealed.ciphertext, aadOf(address));
      if (secret === null) throw undecryptable();
      return secret;
    };
    return {
      address,
      signMessage(message) {
        const secret = open();
        try {
          return ed25519Sign(secret.subarray(0, SEED_BYTES), message);
        } finally {
          secret.fill(0);
        }
      },
      async save() {
        await store.insertCustodialWallet(deps.db, row());
        deps.log.info("custodial wallet created", { address });
      },
      saveInWrite() {
        store.insertCustodialWalletInWrite(deps.db, row());
      },
    };
  } finally {
    seed.fill(0);
    secretKey.fill(0);
  }
}

/** Creates a wallet whose key is held here. Only the address comes back; the secret never leaves. */
export async function createCustodialWallet(deps: Deps, label: string | null = null): Promise<{ address: string }> {
  const wallet = prepareCustodialWallet(deps, label);
  await wallet.save();
  return { address: wallet.address };
}

export function isCustodial(deps: Deps, address: string): Promise<boolean> {
  return store.hasCustodialWallet(deps.db, address);
}

/**
 * A dead session token's error (expired or revoked), told as it is for a wallet made by wallet_create: only
 * this server holds its key, so nobody can sign a challenge for it and "sign in again" cannot be done. Same
 * code; any other error, or a wallet not held here, unchanged. `walletOf` names the token's wallet (null:
 * unknown); it is asked only for such an error.
 */
export async function explainDeadCustodialToken(deps: Deps, err: AppError, walletOf: () => string | null): Promise<AppError> {
  if (err.code !== "TOKEN_EXPIRED" && err.code !== "TOKEN_REVOKED") return err;
  const address = walletOf();
  if (address === null || !(await isCustodial(deps, address))) return err;
  const what = err.code === "TOKEN_EXPIRED" ? "has expired" : "has been revoked";
  return new AppError(
    err.code,
    `session token ${what}. Its wallet ${address} was made by wallet_create and only this server holds its key, so no one can ` +
      "sign in to it again: use another of its session tokens that is still valid (session_restore), or ask the server's operator, " +
      "who can export its key (walletgate wallets export)",
  );
}

/**
 * Decrypts the key of `address`, hands it to `use` and wipes it once `use` has finished (awaited when
 * it returns a Promise, so an async `use` never signs with zeros). Best effort: copies `use` takes
 * (e.g. through `keypair.secretKey`, which copies) are its own to wipe.
 * NOT_FOUND when the key is not held here; INTERNAL_ERROR when it does not authenticate.
 */
export async function withCustodialKeypair<T>(deps: Deps, address: string, use: (keypair: Keypair) => T | Promise<T>): Promise<T> {
  const row = await store.findCustodialWallet(deps.db, address);
  if (row === null) throw notCustodial(address);
  const secretKey = decryptAesGcm(deps.wallets.encryptionKey, row.secretIv, row.secretCiphertext, aadOf(address));
  if (secretKey === null) throw undecryptable();
  try {
    const publicKey = decodeAddress(address);
    if (secretKey.length !== SECRET_KEY_BYTES || publicKey === null || !sameBytes(secretKey.subarray(SEED_BYTES), publicKey)) {
      throw new AppError("INTERNAL_ERROR", "wallet key record does not match its address");
    }
    // No validation pass: GCM has proved these are the bytes sealed at creation, and re-deriving the
    // public key in JS would spread the seed into copies that cannot be wiped. The Keypair keeps a
    // reference to `secretKey`, so the wipe below reaches it.
    const keypair = Keypair.fromSecretKey(secretKey, { skipValidation: true });
    return await use(keypair);
  } finally {
    secretKey.fill(0);
  }
}

/**
 * The 64-byte secret key (seed || public key) of a custodial wallet. For the operator's
 * `walletgate wallets export` only: no tool or route may call this.
 */
export function exportSecretKey(deps: Deps, address: string): Promise<Uint8Array> {
  return withCustodialKeypair(deps, address, (keypair) => keypair.secretKey); // the getter returns a copy
}

/** The label given when the wallet was created; null when none (or not custodial here). */
export async function custodialWalletLabel(deps: Deps, address: string): Promise<string | null> {
  return (await store.findCustodialWallet(deps.db, address))?.label ?? null;
}

/** Signs `message` (e.g. a sign-in challenge) with a custodial wallet's key. */
export function signMessageAsCustodian(deps: Deps, address: string, message: Uint8Array): Promise<Uint8Array> {
  return withCustodialKeypair(deps, address, (keypair) => {
    const secretKey = keypair.secretKey; // a copy: wiped here
    try {
      return ed25519Sign(secretKey.subarray(0, 32), message);
    } finally {
      secretKey.fill(0);
    }
  });
}
