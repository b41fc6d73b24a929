// Issues sign-in challenges: a single-use nonce and the exact SIWS-shaped message to sign.
import type { Deps } from "../deps.ts";
import { AppError } from "../errors.ts";
import { decodeAddress } from "../lib/encoding.ts";
import { newSecretBase58 } from "../lib/ids.ts";
import { toIso } from "../lib/clock.ts";
import { challengeHits } from "./rate-limit.ts";
import * as store from "./store.ts";
import type { ClientInfo } from "./fingerprint.ts";

export type Challenge = { nonce: string; message: string; expiresAt: string };

export function buildChallengeMessage(p: {
  /** BASE_URL's host, with the port when it is not the default. */
  host: string;
  baseUrl: string;
  network: string;
  walletAddress: string;
  nonce: string;
  issuedAtMs: number;
  expiresAtMs: number;
}): string {
  return [
    `${p.host} wants you to sign in with your Solana account:`,
    p.walletAddress,
    "",
    "Sign this message to authenticate with walletgate. It does not send a transaction or cost a fee.",
    "",
    `URI: ${p.baseUrl}`,
    "Version: 1",
    `Chain ID: solana:${p.network}`,
    `Nonce: ${p.nonce}`,
    `Issued At: ${toIso(p.issuedAtMs)}`,
    `Expiration Time: ${toIso(p.expiresAtMs)}`,
  ].join("\n");
}

export function requireAddress(walletAddress: string): Uint8Array {
  const key = decodeAddress(walletAddress);
  if (key === null) throw new AppError("INVALID_ADDRESS", "wallet address must be base58 of 32 bytes");
  return key;
}

export async function issueChallenge(deps: Deps, walletAddress: string, client: ClientInfo): Promise<Challenge> {
  requireAddress(walletAddress);
  const now = deps.clock.now();
  deps.auth.rateLimiter.consume(challengeHits(client.ip, walletAddress), now);
  const nonce = newSecretBase58(deps.random);
  const expiresAt = now + deps.config.challengeTtlMs;
  const message = buildChallengeMessage({
    host: deps.baseHost,
    baseUrl: deps.baseUrl,
    network: deps.config.network,
    walletAddress,
    nonce,
    issuedAtMs: now,
    expiresAtMs: expiresAt,
  });
  await store.insertChallenge(deps.db, { nonce, wallet: walletAddress, message, issuedAt: now, expiresAt });
  return { nonce, message, expiresAt: toIso(expiresAt) };
}
