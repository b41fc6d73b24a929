// Owners: a wallet signed in to the dashboard, created on first use, with the tier the operator sets.
import { authenticateToken } from "../auth/sessions.ts";
import type { Deps } from "../deps.ts";
import { AppError, fieldError } from "../errors.ts";
import { toIso } from "../lib/clock.ts";
import { isProgramOrSysvar } from "../ledger/transactions.ts";
import { isAddress } from "../lib/encoding.ts";
import * as store from "./store.ts";

export type Owner = { walletAddress: string; tier: store.Tier; createdAt: string };

const view = (row: store.OwnerRow): Owner => ({ walletAddress: row.wallet, tier: row.tier, createdAt: toIso(row.createdAt) });

/** The owner a dashboard session token belongs to (created on first use). Token errors pass through. */
export async function ownerOfSession(deps: Deps, sessionToken: string): Promise<Owner> {
  const session = await authenticateToken(deps, sessionToken);
  return view(await store.ensureOwner(deps.db, session.walletAddress, deps.clock.now()));
}

/** GET /dashboard/api/me: who, which tier, and the current use of the tier's limits. */
export function ownerUsage(deps: Deps, owner: Owner) {
  return { walletAddress: owner.walletAddress, tier: owner.tier, usage: deps.paygate.rateLimiter.usage(owner.walletAddress, owner.tier, deps.clock.now()) };
}

export async function listOwners(deps: Deps): Promise<Owner[]> {
  return (await store.listOwners(deps.db)).map(view);
}

export const TIERS: readonly store.Tier[] = ["free", "pro", "unlimited"];

/** `walletgate owners set-tier`: the operator's lever (unlimited is for their own apps and benchmarks). */
export async function setOwnerTier(deps: Deps, walletAddress: string, tier: string): Promise<Owner> {
  if (!isAddress(walletAddress)) throw new AppError("INVALID_ADDRESS", "the owner must be a base58 wallet address of 32 bytes");
  if (!(TIERS as readonly string[]).includes(tier)) throw fieldError("tier", `tier must be one of ${TIERS.join(", ")}`);
  await requireOwnerWallet(deps, walletAddress);
  await store.setOwnerTier(deps.db, walletAddress, tier as store.Tier, deps.clock.now());
  return view((await store.findOwner(deps.db, walletAddress))!);
}

/**
 * An owner is a wallet that signs in (paygate.md). A program's address or a token's mint (this network's
 * USDC mint pasted for a wallet, say: the operator's slip, from `keys create --owner` or `owners set-tier`)
 * never will: its key would see no product, its tier would change nobody's limits. VALIDATION_ERROR on `owner`.
 */
export async function requireOwnerWallet(deps: Deps, owner: string): Promise<void> {
  if (isProgramOrSysvar(owner)) throw fieldError("owner", `owner: ${owner} is a program, not a wallet: an owner is a wallet that signs in`);
  const mint = (await deps.ledger.tokens()).find((t) => t.mint === owner);
  if (mint !== undefined) throw fieldError("owner", `owner: ${owner} is the mint of ${mint.key.toUpperCase()}, not a wallet: an owner is a wallet that signs in`);
}
