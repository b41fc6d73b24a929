// Feature access tokens (paygate.md "Public API"): `ft_` + 32 random bytes base58, issued with a
// feature_unlock purchase, looked up by SHA-256, kept sealed (AES-256-GCM) so the owner can list them.
import type { Deps } from "../deps.ts";
import { AppError, fieldError, requirePage } from "../errors.ts";
import { decryptAesGcm, encryptAesGcm } from "../lib/aes-gcm.ts";
import { toIso } from "../lib/clock.ts";
import { headWithin } from "../lib/fit.ts";
import { isAddress } from "../lib/encoding.ts";
import { sha256Hex } from "../lib/hash.ts";
import { newSecretBase58 } from "../lib/ids.ts";
import { recordRevocationEvent } from "./events.ts";
import { ownedProductKind } from "./products.ts";
import { clusterName } from "../ledger/ledger.ts";
import * as store from "./store.ts";

const TOKEN_FORMAT = /^ft_[1-9A-HJ-NP-Za-km-z]{32,44}$/;
export const TOKEN_LIST_LIMIT = { default: 100, max: 1000 };

const utf8 = (text: string) => new TextEncoder().encode(text);

/** A new token and its sealed form; the token is seen in clear only by the buyer's confirm and the owner. */
export function mintFeatureToken(deps: Deps, features: string[]): { accessToken: string; sealed: store.NewFeatureToken } {
  const accessToken = `ft_${newSecretBase58(deps.random)}`;
  const tokenHash = sha256Hex(accessToken);
  // The hash as additional data: a sealed token moved onto another row does not open.
  const { iv, ciphertext } = encryptAesGcm(deps.wallets.encryptionKey, utf8(accessToken), utf8(tokenHash), deps.random);
  return { accessToken, sealed: { tokenHash, iv, ciphertext, features } };
}

/** The token in clear. A row that does not open means WALLET_ENCRYPTION_KEY changed: a 500, not a client error. */
export function revealFeatureToken(deps: Deps, row: Pick<store.FeatureTokenRow, "tokenHash" | "iv" | "ciphertext">): string {
  const plain = decryptAesGcm(deps.wallets.encryptionKey, row.iv, row.ciphertext, utf8(row.tokenHash));
  if (plain === null) throw new Error("a stored feature token does not decrypt: was WALLET_ENCRYPTION_KEY changed?");
  return new TextDecoder().decode(plain);
}

/** A feature token's status at `now`: revoked, expired or active. */
export function statusOf(row: Pick<store.FeatureTokenRow, "revokedAt" | "expiresAt">, now: number): store.TokenStatus {
  if (row.revokedAt !== null) return "revoked";
  return row.expiresAt !== null && row.expiresAt <= now ? "expired" : "active";
}

export type TokenRecord = {
  accessToken: string;
  productId: string;
  productTitle: string;
  features: string[];
  walletAddress: string;
  txHash: string;
  status: store.TokenStatus;
  createdAt: string;
  revokedAt?: string;
  expiresAt?: string;
};

function record(deps: Deps, row: store.FeatureTokenRow, now: number): TokenRecord {
  return {
    accessToken: revealFeatureToken(deps, row),
    productId: row.productId,
    productTitle: row.productTitle,
    features: row.features,
    walletAddress: row.wallet,
    txHash: row.txHash,
    status: statusOf(row, now),
    createdAt: toIso(row.createdAt),
    ...(row.revokedAt === null ? {} : { revokedAt: toIso(row.revokedAt) }),
    ...(row.expiresAt === null ? {} : { expiresAt: toIso(row.expiresAt) }),
  };
}

/** The owner's token behind `accessToken`, or null (unknown, malformed, or another owner's: all the same). */
async function ownedToken(deps: Deps, owner: string, accessToken: string): Promise<store.FeatureTokenRow | null> {
  if (!TOKEN_FORMAT.test(accessToken)) return null;
  const row = await store.findFeatureToken(deps.db, sha256Hex(accessToken));
  return row === null || row.owner !== owner ? null : row;
}

export type FeatureVerification =
  | { valid: true; features: string[]; productId: string; productTitle: string; walletAddress: string; createdAt: string; expiresAt?: string }
  | { valid: false; error: string };

/** POST /public/feature/verify: "not valid" is an answer, not an error. */
export async function verifyFeatureToken(deps: Deps, owner: string, accessToken: string): Promise<FeatureVerification> {
  const row = await ownedToken(deps, owner, accessToken);
  if (row === null) return { valid: false, error: "token not found" };
  // Paid on another network than this server's (a database served on several before migration 35).
  const network = clusterName(deps.config.network);
  if (row.network !== network) return { valid: false, error: `token paid on ${row.network}, not ${network}` };
  const status = statusOf(row, deps.clock.now());
  if (status === "revoked") return { valid: false, error: "token revoked" };
  if (status === "expired") return { valid: false, error: "token expired" };
  return {
    valid: true,
    features: row.features,
    productId: row.productId,
    productTitle: row.productTitle,
    walletAddress: row.wallet,
    createdAt: toIso(row.createdAt),
    ...(row.expiresAt === null ? {} : { expiresAt: toIso(row.expiresAt) }),
  };
}

export type TokenQuery = {
  productId?: string | undefined;
  walletAddress?: string | undefined;
  status?: store.TokenStatus | undefined;
  limit?: number | undefined;
  offset?: number | undefined;
};

/** GET /public/feature/tokens: the owner's tokens, newest first, each with the token in clear. */
export async function listFeatureTokens(deps: Deps, owner: string, query: TokenQuery): Promise<{ tokens: TokenRecord[]; total: number; limit: number; offset: number }> {
  const page = requirePage(query, TOKEN_LIST_LIMIT);
  if (query.walletAddress !== undefined && !isAddress(query.walletAddress)) {
    throw fieldError("walletAddress", "walletAddress must be a base58 address of 32 bytes", {}, "INVALID_ADDRESS");
  }
  // A product filter names one of the owner's products: another owner's id is 404, as everywhere.
  if (query.productId !== undefined) ownedProductKind(deps, owner, query.productId);
  const now = deps.clock.now();
  const { rows, total } = await store.listFeatureTokens(deps.db, owner, { productId: query.productId, wallet: query.walletAddress, status: query.status, ...page }, now);
  // At most ~1 MB of records (lib/fit.ts): one carries up to 50 feature ids and a product title, ~4 KB.
  return { tokens: headWithin(rows.map((row) => record(deps, row, now))), total, ...page };
}

/** POST /public/feature/revoke: permanent; revoking again succeeds without a second event. */
export async function revokeFeatureToken(deps: Deps, owner: string, accessToken: string): Promise<{ success: true; message: string }> {
  const row = await ownedToken(deps, owner, accessToken);
  if (row === null) throw new AppError("NOT_FOUND", "no such token");
  const now = deps.clock.now();
  const facts = {
    owner,
    productId: row.productId,
    productTitle: row.productTitle,
    accessToken,
    featureIds: row.features,
    walletAddress: row.wallet,
    txHash: row.txHash,
    timestamp: toIso(now),
    network: clusterName(deps.config.network),
  };
  const outcome = await store.revokeFeatureToken(deps.db, owner, row.tokenHash, now, () => recordRevocationEvent(deps, facts));
  if (outcome === "not_found") throw new AppError("NOT_FOUND", "no such token");
  if (outcome === "already_revoked") return { success: true, message: "Token was already revoked" };
  deps.log.info("feature token revoked", { owner, productId: row.productId, purchaseId: row.purchaseId });
  return { success: true, message: "Token revoked" };
}
