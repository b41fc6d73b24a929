// API keys of owners: `pk_` + 64 hex, shown once, SHA-256 at rest; the X-API-Key check of /public/*.
import type { Deps } from "../deps.ts";
import { AppError, textField } from "../errors.ts";
import { toIso } from "../lib/clock.ts";
import { sha256Hex } from "../lib/hash.ts";
import { newId } from "../lib/ids.ts";
import { requireOwnerWallet } from "./owners.ts";
import * as store from "./store.ts";

const KEY_FORMAT = /^pk_[0-9a-f]{64}$/;
const PREFIX_CHARS = 12;
/** lastUsedAt is written at most this often per key, never once per request. */
export const LAST_USED_WRITE_MS = 60_000;
/** Keys per owner: unrevoked ones, and all ever made (revoked keys stay listed), so the table is bounded. */
export const MAX_API_KEYS = { live: 100, all: 1_000 } as const;

export type ApiKeyView = { keyId: string; label: string; prefix: string; createdAt: string; lastUsedAt: string | null; revokedAt: string | null };

function view(row: store.ApiKeyRow): ApiKeyView {
  return {
    keyId: row.id,
    label: row.label,
    prefix: row.prefix,
    createdAt: toIso(row.createdAt),
    lastUsedAt: row.lastUsedAt === null ? null : toIso(row.lastUsedAt),
    revokedAt: row.revokedAt === null ? null : toIso(row.revokedAt),
  };
}

/** A key's label: 1 to 100 characters, no control characters (as a product's title). */
export function requireLabel(label: string): string {
  return textField(label, "label", 100, true);
}

/** A new key for `owner` (created if needed); the only time the key itself is seen. */
export async function createApiKey(deps: Deps, owner: string, label: string): Promise<Omit<ApiKeyView, "lastUsedAt" | "revokedAt"> & { key: string }> {
  const clean = requireLabel(label);
  await requireOwnerWallet(deps, owner);
  const now = deps.clock.now();
  await store.ensureOwner(deps.db, owner, now);
  const key = `pk_${Buffer.from(deps.random(32)).toString("hex")}`;
  const row = { id: newId("key", deps.random), owner, prefix: key.slice(0, PREFIX_CHARS), label: clean, createdAt: now };
  if (!(await store.insertApiKey(deps.db, { ...row, keyHash: sha256Hex(key) }, MAX_API_KEYS))) {
    throw new AppError("INVALID_STATE", `an owner can have at most ${MAX_API_KEYS.live} unrevoked API keys and ${MAX_API_KEYS.all} in all`);
  }
  deps.log.info("api key created", { owner, keyId: row.id, prefix: row.prefix });
  return { keyId: row.id, key, label: clean, prefix: row.prefix, createdAt: toIso(now) };
}

export async function listApiKeys(deps: Deps, owner: string): Promise<ApiKeyView[]> {
  return (await store.listApiKeys(deps.db, owner)).map(view);
}

export async function revokeApiKey(deps: Deps, owner: string, keyId: string): Promise<{ revoked: true }> {
  if (!(await store.revokeApiKey(deps.db, owner, keyId, deps.clock.now()))) throw new AppError("NOT_FOUND", "no such API key");
  deps.log.info("api key revoked", { owner, keyId });
  return { revoked: true };
}

/** `walletgate keys revoke <keyId>`: the operator revokes any owner's key. */
export async function revokeApiKeyAsOperator(deps: Deps, keyId: string): Promise<{ revoked: true }> {
  if (!(await store.revokeApiKeyById(deps.db, keyId, deps.clock.now()))) throw new AppError("NOT_FOUND", "no such API key"); // not repeated: a key pasted for its id is a secret
  deps.log.info("api key revoked", { keyId, by: "operator" });
  return { revoked: true };
}

export type KeyCaller = { keyId: string; owner: string; tier: store.Tier };

/**
 * The X-API-Key check. Looked up by hash on every request, so a revoke from any process (dashboard,
 * API, CLI) takes effect on the next one. `touch` records lastUsedAt at most once a minute per key.
 */
export function createKeyAuthenticator(deps: Deps) {
  const lastWritten = new Map<string, number>();
  // Synchronous, as the lookups of every /public/* request are (store.ts).
  return function authenticateApiKey(header: string | null | undefined): KeyCaller {
    if (header === null || header === undefined || header === "") throw new AppError("MISSING_API_KEY", "API key required");
    const invalid = () => new AppError("INVALID_API_KEY", "Invalid or expired API key");
    if (!KEY_FORMAT.test(header)) throw invalid();
    const row = store.findApiKeyByHash(deps.db, sha256Hex(header));
    if (row === null || row.revokedAt !== null) throw invalid();
    const now = deps.clock.now();
    const written = lastWritten.get(row.id) ?? row.lastUsedAt ?? 0;
    if (now - written >= LAST_USED_WRITE_MS) {
      lastWritten.set(row.id, now);
      if (lastWritten.size > 100_000) lastWritten.delete(lastWritten.keys().next().value!);
      // Not awaited: the answer does not wait for a bookkeeping write.
      store.touchApiKeys(deps.db, new Map([[row.id, now]])).catch((err: unknown) => deps.log.warn("api key lastUsedAt not written", { error: String(err) }));
    }
    return { keyId: row.id, owner: row.owner, tier: row.tier };
  };
}
