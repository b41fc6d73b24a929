// SQL of payment gating: owners, API keys and products.
import type { Db } from "../db/open.ts";

export type Tier = "free" | "pro" | "unlimited";
export type OwnerRow = { wallet: string; tier: Tier; createdAt: number };

/** The owner record, created (free tier) on first use. */
export function ensureOwner(db: Db, wallet: string, now: number): Promise<OwnerRow> {
  return db.write(() => {
    db.sqlite.query("INSERT INTO owners (wallet, tier, created_at) VALUES (?, 'free', ?) ON CONFLICT (wallet) DO NOTHING").run(wallet, now);
    return db.sqlite.query("SELECT wallet, tier, created_at AS createdAt FROM owners WHERE wallet = ?").get(wallet) as OwnerRow;
  });
}

export async function findOwner(db: Db, wallet: string): Promise<OwnerRow | null> {
  return (db.sqlite.query("SELECT wallet, tier, created_at AS createdAt FROM owners WHERE wallet = ?").get(wallet) as OwnerRow | null) ?? null;
}

export async function listOwners(db: Db): Promise<OwnerRow[]> {
  return db.sqlite.query("SELECT wallet, tier, created_at AS createdAt FROM owners ORDER BY created_at").all() as OwnerRow[];
}

/** Creates the owner if needed and sets its tier. */
export function setOwnerTier(db: Db, wallet: string, tier: Tier, now: number): Promise<void> {
  return db.write(() => {
    db.sqlite
      .query("INSERT INTO owners (wallet, tier, created_at) VALUES (?, ?, ?) ON CONFLICT (wallet) DO UPDATE SET tier = excluded.tier")
      .run(wallet, tier, now);
  });
}

export type ApiKeyRow = {
  id: string;
  owner: string;
  prefix: string;
  label: string;
  createdAt: number;
  lastUsedAt: number | null;
  revokedAt: number | null;
};

const KEY_COLUMNS = "id, owner, prefix, label, created_at AS createdAt, last_used_at AS lastUsedAt, revoked_at AS revokedAt";

export function insertApiKey(db: Db, row: Omit<ApiKeyRow, "lastUsedAt" | "revokedAt"> & { keyHash: string }): Promise<void> {
  return db.write(() => {
    db.sqlite
      .query("INSERT INTO api_keys (id, owner, key_hash, prefix, label, created_at) VALUES (?, ?, ?, ?, ?, ?)")
      .run(row.id, row.owner, row.keyHash, row.prefix, row.label, row.createdAt);
  });
}

/** The key with this hash and its owner's tier; revoked keys too (the caller decides). */
export async function findApiKeyByHash(db: Db, keyHash: string): Promise<(ApiKeyRow & { tier: Tier }) | null> {
  return (
    (db.sqlite
      .query(
        `SELECT k.id, k.owner, k.prefix, k.label, k.created_at AS createdAt, k.last_used_at AS lastUsedAt,
                k.revoked_at AS revokedAt, o.tier
         FROM api_keys k JOIN owners o ON o.wallet = k.owner WHERE k.key_hash = ?`,
      )
      .get(keyHash) as (ApiKeyRow & { tier: Tier }) | null) ?? null
  );
}

export async function listApiKeys(db: Db, owner: string): Promise<ApiKeyRow[]> {
  return db.sqlite.query(`SELECT ${KEY_COLUMNS} FROM api_keys WHERE owner = ? ORDER BY created_at DESC, id`).all(owner) as ApiKeyRow[];
}

/** Revokes an owner's key; false when there is no such key of this owner. Revoking twice keeps the first time. */
export function revokeApiKey(db: Db, owner: string, id: string, now: number): Promise<boolean> {
  return db.write(
    () =>
      db.sqlite.query("UPDATE api_keys SET revoked_at = COALESCE(revoked_at, ?) WHERE id = ? AND owner = ?").run(now, id, owner).changes > 0,
  );
}

/** The operator's revoke (CLI): any owner's key by id; false when unknown. */
export function revokeApiKeyById(db: Db, id: string, now: number): Promise<boolean> {
  return db.write(() => db.sqlite.query("UPDATE api_keys SET revoked_at = COALESCE(revoked_at, ?) WHERE id = ?").run(now, id).changes > 0);
}

export function touchApiKeys(db: Db, usedAt: ReadonlyMap<string, number>): Promise<void> {
  return db.write(() => {
    const touch = db.sqlite.query("UPDATE api_keys SET last_used_at = MAX(COALESCE(last_used_at, 0), ?) WHERE id = ?");
    for (const [id, at] of usedAt) touch.run(at, id);
  });
}

export type ProductRow = {
  id: string;
  owner: string;
  title: string;
  description: string;
  type: "feature_unlock" | "access";
  price: number;
  token: string;
  featureIds: string[];
  payTo: string;
  accessDays: number | null;
  redirectOrigins: string[];
  status: "active" | "archived";
  createdAt: number;
  updatedAt: number;
};

type RawProduct = Omit<ProductRow, "featureIds" | "redirectOrigins"> & { featureIds: string; redirectOrigins: string };

const PRODUCT_COLUMNS = `id, owner, title, description, type, price, token, feature_ids AS featureIds, pay_to AS payTo,
  access_days AS accessDays, redirect_origins AS redirectOrigins, status, created_at AS createdAt, updated_at AS updatedAt`;

function toProduct(raw: RawProduct): ProductRow {
  return { ...raw, featureIds: JSON.parse(raw.featureIds) as string[], redirectOrigins: JSON.parse(raw.redirectOrigins) as string[] };
}

/** `alsoInWrite` runs inside the same write (the product's outbox event commits with it). */
export function insertProduct(db: Db, row: ProductRow, alsoInWrite?: () => void): Promise<void> {
  return db.write(() => {
    alsoInWrite?.();
    db.sqlite
      .query(
        `INSERT INTO products (id, owner, title, description, type, price, token, feature_ids, pay_to, access_days, redirect_origins, status, created_at, updated_at)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
      )
      .run(
        row.id,
        row.owner,
        row.title,
        row.description,
        row.type,
        row.price,
        row.token,
        JSON.stringify(row.featureIds),
        row.payTo,
        row.accessDays,
        JSON.stringify(row.redirectOrigins),
        row.status,
        row.createdAt,
        row.updatedAt,
      );
  });
}

/** A product by id, whoever owns it (the checkout page, verification); null when unknown. */
export async function findProduct(db: Db, id: string): Promise<ProductRow | null> {
  const raw = db.sqlite.query(`SELECT ${PRODUCT_COLUMNS} FROM products WHERE id = ?`).get(id) as RawProduct | null;
  return raw === null ? null : toProduct(raw);
}

export async function listProducts(db: Db, owner: string): Promise<ProductRow[]> {
  return (db.sqlite.query(`SELECT ${PRODUCT_COLUMNS} FROM products WHERE owner = ? ORDER BY created_at DESC, id`).all(owner) as RawProduct[]).map(
    toProduct,
  );
}

export function updateProduct(db: Db, row: ProductRow, alsoInWrite?: () => void): Promise<void> {
  return db.write(() => {
    alsoInWrite?.();
    db.sqlite
      .query(
        `UPDATE products SET title = ?, description = ?, price = ?, token = ?, feature_ids = ?, pay_to = ?, access_days = ?,
           redirect_origins = ?, status = ?, updated_at = ? WHERE id = ? AND owner = ?`,
      )
      .run(
        row.title,
        row.description,
        row.price,
        row.token,
        JSON.stringify(row.featureIds),
        row.payTo,
        row.accessDays,
        JSON.stringify(row.redirectOrigins),
        row.status,
        row.updatedAt,
        row.id,
        row.owner,
      );
  });
}
