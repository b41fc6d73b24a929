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
 * The message and signature are judged before the consume but reported after it, exactly as if
 * checked in the spec's order (a loser of a race hears NONCE_USED; a bad signature still spends
 * the nonce). That lets what a proof `buys` — the new session's token row, or a revoke-all — be
 * recorded in the same atomic write as the consume: one commit per sign-in, no token without a spent
 * nonce, and no spent nonce without its revoke-all. Returns how many tokens a revoke-all revoked.
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

  const challenge = await store.findChallenge(deps.db, input.nonce);
  if (challenge === null || challenge.wallet !== input.walletAddress) {
    throw new AppError("NONCE_NOT_FOUND", "unknown nonce; request a challenge for this wallet first");
  }
  if (challenge.consumedAt !== null) throw new AppError("NONCE_USED", "this challenge was already used; request a new one");
  if (challenge.expiresAt <= now) throw new AppError("CHALLENGE_EXPIRED", "the challenge has expired; request a new one");

  let failure: AppError | null = null;
  if (input.message !== undefined && input.message !== challenge.message) {
    failure = new AppError("INVALID_SIGNATURE", "message does not match the challenge");
  } else if (!(await deps.verifier.verify(publicKey, utf8.encode(challenge.message), signature))) {
    failure = new AppError("INVALID_SIGNATURE", "signature does not verify for this wallet and challenge");
  }
  // Spent here whatever the verdict: a failed signature needs a fresh challenge.
  const { won, revoked } = await store.consumeChallenge(deps.db, input.nonce, input.walletAddress, now, failure === null ? buys : {});
  if (!won) {
    // Lost to another request, or expired (and perhaps purged) while the signature was checked.
    const after = await store.findChallenge(deps.db, input.nonce);
    if (after === null || (after.consumedAt === null && after.expiresAt <= now)) {
      throw new AppError("CHALLENGE_EXPIRED", "the challenge has expired; request a new one");
    }
    throw new AppError("NONCE_USED", "this challenge was already used; request a new one");
  }
  if (failure !== null) throw failure;
  return { revoked };
}

/** POST /auth/verify and wallet_connect: prove control, then issue a session token (in the same write). */
/**
 * A sign-in: proof of wallet control buying a session. `newCustodialWallet`: wallet_create signing in the
 * wallet it just made, counted as a wallet made, not as a verification attempt of the client's network.
 */
export async function signIn(
  deps: Deps,
  input: SignedChallenge,
  client: ClientInfo,
  /** wallet_create: the new key, stored in the write that spends the nonce and records the token. */
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

