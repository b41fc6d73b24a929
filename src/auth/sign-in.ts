// Wallet sign-in: the checks of auth.md "Verification" in their order, then a session token.
import type { Deps } from "../deps.ts";
import { AppError } from "../errors.ts";
import { decodeBase64Strict, isHex } from "../lib/encoding.ts";
import { requireAddress } from "./challenge.ts";
import { verifyHits, walletCreateHits, type Limit } from "./rate-limit.ts";
import { prepareSession, signPreparedSession, type IssuedSession } from "./sessions.ts";
import type { ClientInfo } from "./fingerprint.ts";
import * as store from "./store.ts";

export type SignedChallenge = { walletAddress: string; nonce: string; signature: string; message?: string | undefined };

const utf8 = new TextEncoder();

function requireSignature(signature: string): Uint8Array {
  const bytes = decodeBase64Strict(signature);
  if (bytes !== null && bytes.length === 64) return bytes;
  if (isHex(signature)) {
    throw new AppError("INVALID_SIGNATURE", "signatures are base64, not hex");
  }
  throw new AppError("INVALID_SIGNATURE", "signature must be standard base64 of 64 bytes");
}

/**
 * Steps 1–7: address, signature form, rate limit, nonce, atomic consume, message, strict Ed25519.
 * On success the caller has proved control of the wallet with a fresh, now spent, challenge.
 *
 * The nonce is spent (step 5) before the message and signature are judged, as auth.md orders it: at once, in
 * this turn's write batch, so the loser of a race hears NONCE_USED and a bad signature has spent it. What a
 * proof `buys` — the new session's token row, or a revoke-all — is written once the signature verified, and
 * the answer waits until both writes are on disk (in the order written: no token without its spent nonce).
 * Returns how many tokens a revoke-all revoked.
 */
export async function proveWalletControl(
  deps: Deps,
  input: SignedChallenge,
  client: ClientInfo,
  buys: store.ProofPurchase = {},
  hits: [Limit, string][] = verifyHits(client.ip, input.walletAddress),
): Promise<{ revoked: number }> {
  const publicKey = requireAddress(input.walletAddress);
  const signature = requireSignature(input.signature);
  const now = deps.clock.now();
  deps.auth.rateLimiter.consume(hits, now);

  const spent = store.spendChallenge(deps.db, input.nonce, input.walletAddress, now);
  // Watched from now on: the spend's batch commits at the end of this turn, before the verdict comes back from
  // the worker, and may fail there (a full disk). That failure is this call's answer (never an unhandled
  // rejection, which would end the process), and what the proof buys is then not written without its spent nonce.
  let spendFailed: { error: unknown } | null = null;
  const onDisk = spent.durable.then(
    () => null,
    (error: unknown) => (spendFailed = { error }),
  );
  if (spent.message === null) {
    const failed = await onDisk;
    if (failed !== null) throw failed.error; // a write that failed says so, rather than a nonce code
    throw await unspendable(deps, input, now);
  }
  let failure: AppError | null = null;
  if (input.message !== undefined && input.message !== spent.message) {
    failure = new AppError("INVALID_SIGNATURE", "message does not match the challenge");
  } else if (!(await deps.verifier.verify(publicKey, utf8.encode(spent.message), signature))) {
    failure = new AppError("INVALID_SIGNATURE", "signature does not verify for this wallet and challenge");
  }
  const failedBefore = spendFailed as { error: unknown } | null; // set by onDisk's handler meanwhile
  if (failedBefore !== null) throw failedBefore.error;
  // Settled either way (each watched from the start): written after the spend, the purchase shares its fate, and
  // the spend's error, if any, is the answer.
  const bought = (failure === null ? store.recordProofPurchase(deps.db, input.walletAddress, now, buys) : Promise.resolve(0)).then(
    (revoked) => ({ revoked }),
    (error: unknown) => ({ error }),
  );
  const [failed, purchase] = await Promise.all([onDisk, bought]);
  if (failed !== null) throw failed.error;
  if ("error" in purchase) throw purchase.error;
  if (failure !== null) throw failure;
  return { revoked: purchase.revoked };
}

/** Why a nonce could not be spent, in auth.md's order: unknown (or another wallet's), used, expired. */
async function unspendable(deps: Deps, input: SignedChallenge, now: number): Promise<AppError> {
  const challenge = await store.findChallenge(deps.db, input.nonce);
  if (challenge === null || challenge.wallet !== input.walletAddress) {
    return new AppError("NONCE_NOT_FOUND", "unknown nonce; request a challenge for this wallet first");
  }
  if (challenge.consumedAt !== null) return new AppError("NONCE_USED", "this challenge was already used; request a new one");
  if (challenge.expiresAt <= now) return new AppError("CHALLENGE_EXPIRED", "the challenge has expired; request a new one");
  // Neither (not seen: the UPDATE and this read run on one connection, in one state): it was not spendable.
  return new AppError("NONCE_USED", "this challenge was already used; request a new one");
}

/**
 * A sign-in: proof of wallet control buying a session. `newCustodialWallet`: wallet_create signing in the
 * wallet it just made, counted as a wallet made, not as a verification attempt of the client's network.
 */
export async function signIn(
  deps: Deps,
  input: SignedChallenge,
  client: ClientInfo,
  /** wallet_create: the new key, stored in the write that records the token. */
  newCustodialWallet?: { saveInWrite(): void },
): Promise<IssuedSession> {
  try {
    const prepared = prepareSession(deps, input.walletAddress, client);
    const buys = { token: prepared.record, alsoInWrite: newCustodialWallet?.saveInWrite };
    await proveWalletControl(deps, input, client, buys, newCustodialWallet !== undefined ? walletCreateHits(client.ip) : undefined);
    const issued = signPreparedSession(deps, prepared);
    deps.metrics.signIn("success");
    return issued;
  } catch (err) {
    deps.metrics.signIn(err instanceof AppError ? err.code : "INTERNAL_ERROR");
    throw err;
  }
}

/**
 * POST /auth/revoke-all: proven by a signed challenge, not a token. Every token of the wallet dies,
 * including ones issued earlier that the store never listed, via the per-wallet cutoff.
 */
export async function revokeAllSessions(
  deps: Deps,
  input: SignedChallenge,
  client: ClientInfo,
): Promise<{ revoked: number; walletAddress: string }> {
  // The cutoff is this Unix second; the revocation is written with the nonce's consume (one write).
  const cutoff = Math.floor(deps.clock.now() / 1000) * 1000;
  const { revoked } = await proveWalletControl(deps, input, client, { revokeAllBefore: cutoff });
  return { revoked, walletAddress: input.walletAddress };
}

