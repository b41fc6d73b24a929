// One-time dashboard sign-in links for headless servers (`walletgate dashboard-link`): made by proving
// control of a wallet with its keypair, redeemed once for a session token of that wallet.
import type { Deps } from "../deps.ts";
import { AppError, fieldError } from "../errors.ts";
import { issueChallenge } from "../auth/challenge.ts";
import { issueSessionSpending, type IssuedSession } from "../auth/sessions.ts";
import { proveWalletControl } from "../auth/sign-in.ts";
import type { ClientInfo } from "../auth/fingerprint.ts";
import { ed25519Sign } from "../lib/ed25519-sign.ts";
import { decodeBase58, encodeBase58, encodeBase64 } from "../lib/encoding.ts";
import { sha256Hex } from "../lib/hash.ts";
import { newSecretBase58 } from "../lib/ids.ts";
import { DAY_MS } from "../lib/clock.ts";
import * as store from "./store.ts";

export const LINK_TTL_MS = 10 * 60_000;
const PURGE_AFTER_MS = DAY_MS;
const CODE_BYTES = 32;
const CODE_MAX_CHARS = 44; // base58 of 32 bytes never needs more; bounds the quadratic decoder

/** Who makes a link, as the challenge's rate limit and the proof see it. */
const LINK_CLIENT: ClientInfo = { ip: "127.0.0.1", userAgent: "walletgate dashboard-link" };

export type DashboardLink = { url: string; walletAddress: string; expiresAt: number };

const utf8 = new TextEncoder();

/**
 * Proves control of the keypair's wallet exactly as a browser does (challenge, sign, verify), so a
 * keypair whose public half is not its secret half's fails with INVALID_SIGNATURE; then records a fresh
 * code (its SHA-256 only) for LINK_TTL_MS. The code travels in the URL fragment, which browsers never
 * send, so it stays out of access logs and Referer headers.
 */
export async function createDashboardLink(deps: Deps, secretKey: Uint8Array): Promise<DashboardLink> {
  if (secretKey.length !== 64) throw fieldError("keypair", "a Solana keypair is 64 bytes: the 32-byte seed, then the public key");
  const walletAddress = encodeBase58(secretKey.subarray(32));
  const challenge = await issueChallenge(deps, walletAddress, LINK_CLIENT);
  const signature = encodeBase64(ed25519Sign(secretKey.subarray(0, 32), utf8.encode(challenge.message)));
  await proveWalletControl(deps, { walletAddress, nonce: challenge.nonce, signature, message: challenge.message }, LINK_CLIENT);

  const code = newSecretBase58(deps.random);
  const now = deps.clock.now();
  const expiresAt = now + LINK_TTL_MS;
  await store.insertLink(deps.db, { codeHash: sha256Hex(code), wallet: walletAddress, createdAt: now, expiresAt });
  return { url: `${deps.baseUrl}/dashboard#link=${code}`, walletAddress, expiresAt };
}

function requireLinkCode(code: string): string {
  const bytes = code.length <= CODE_MAX_CHARS ? decodeBase58(code) : null;
  if (bytes === null || bytes.length !== CODE_BYTES) {
    throw fieldError("code", "a sign-in link code is base58 of 32 bytes");
  }
  return code;
}

/**
 * Spends a link (one of any number of racing redeems wins) and issues a new session token for its wallet,
 * as sign-in does: in one write, so a link is never spent without its session.
 */
export async function redeemDashboardLink(deps: Deps, code: string, client: ClientInfo): Promise<IssuedSession> {
  const codeHash = sha256Hex(requireLinkCode(code));
  const now = deps.clock.now();
  const link = await store.findLink(deps.db, codeHash);
  const issued = link === null ? null : await issueSessionSpending(deps, link.wallet, client, () => store.consumeLinkInWrite(deps.db, codeHash, link.wallet, now));
  if (issued !== null) return issued;
  // A link code is a server-issued single-use secret with a lifetime, as a challenge nonce is: the
  // catalogue's nonce codes name its three failures (unknown, replayed, expired) exactly.
  const row = await store.findLink(deps.db, codeHash);
  if (row === null) throw new AppError("NONCE_NOT_FOUND", "unknown sign-in link; run `walletgate dashboard-link` for a new one");
  if (row.usedAt !== null) throw new AppError("NONCE_USED", "this sign-in link was already used; run `walletgate dashboard-link` for a new one");
  throw new AppError("CHALLENGE_EXPIRED", "this sign-in link has expired; run `walletgate dashboard-link` for a new one");
}

/** The purge's part: links expired or used more than a day ago (kept a day to tell "used" from "unknown"). */
export async function purgeDashboardLinks(deps: Deps): Promise<{ dashboardLinks: number }> {
  return { dashboardLinks: await store.purgeLinks(deps.db, deps.clock.now() - PURGE_AFTER_MS) };
}
