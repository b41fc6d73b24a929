// SQL of payment gating: owners, API keys, products, checkouts, purchases and feature tokens.
import type { Db } from "../db/open.ts";
import { LATEST_TIME_MS } from "../lib/clock.ts";
import { joinSum, splitSum } from "../db/sum.ts";
import { inSteps, STEP_ROWS, stepOf } from "../db/steps.ts";

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

/** Records a key unless the owner already has `max.live` unrevoked keys or `max.all` in all: false then. */
export function insertApiKey(db: Db, row: Omit<ApiKeyRow, "lastUsedAt" | "revokedAt"> & { keyHash: string }, max: { live: number; all: number }): Promise<boolean> {
  return db.write(() => {
    const { all, live } = db.sqlite
      .query("SELECT COUNT(*) AS \"all\", COALESCE(SUM(revoked_at IS NULL), 0) AS live FROM api_keys WHERE owner = ?")
      .get(row.owner) as { all: number; live: number };
    if (live >= max.live || all >= max.all) return false;
    db.sqlite
      .query("INSERT INTO api_keys (id, owner, key_hash, prefix, label, created_at) VALUES (?, ?, ?, ?, ?, ?)")
      .run(row.id, row.owner, row.keyHash, row.prefix, row.label, row.createdAt);
    return true;
  });
}

/** What the X-API-Key check needs of a key: its owner's tier too; revoked keys as well (the caller decides). */
export type KeyAuthRow = Pick<ApiKeyRow, "id" | "owner" | "lastUsedAt" | "revokedAt"> & { tier: Tier };

/** The key with this hash, for the check of every /public request: only the columns it needs. */
/** Keys looked up on every /public request: kept until the database next changes (Db.cache). */
const KEYS_KEPT = 10_000;

// The lookups of every /public/* request (the key, the product, the access) answer synchronously: they are
// read through Db.cache from bun:sqlite, and an async frame for each measured ~10 % of the access check's
// rate (BENCHMARKS.md, fourteenth pass). A store over a networked database would return promises here, and
// their callers (keys.ts, products.ts, purchases.ts) would await them again.
export function findApiKeyByHash(db: Db, keyHash: string): KeyAuthRow | null {
  return db.cache<KeyAuthRow | null>("api_keys.key_hash", KEYS_KEPT).get(keyHash, () =>
    // Two primary-key reads: measured ~9 us against ~25 us for the same as one JOIN.
    db.read(() => {
      const key = db.sqlite
        .query("SELECT id, owner, last_used_at AS lastUsedAt, revoked_at AS revokedAt FROM api_keys WHERE key_hash = ?")
        .get(keyHash) as Omit<KeyAuthRow, "tier"> | null;
      if (key === null) return null;
      const owner = db.sqlite.query("SELECT tier FROM owners WHERE wallet = ?").get(key.owner) as { tier: Tier } | null;
      return owner === null ? null : { ...key, tier: owner.tier };
    }),
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
  /** Base units of `token`, up to 2^63-1 (read as text: beyond 2^53 a JS number is not exact). */
  price: bigint;
  token: string;
  featureIds: string[];
  payTo: string;
  accessDays: number | null;
  redirectOrigins: string[];
  status: "active" | "archived";
  createdAt: number;
  updatedAt: number;
};

type RawProduct = Omit<ProductRow, "price" | "featureIds" | "redirectOrigins"> & { price: string; featureIds: string; redirectOrigins: string };

const PRODUCT_COLUMNS = `id, owner, title, description, type, CAST(price AS TEXT) AS price, token, feature_ids AS featureIds, pay_to AS payTo,
  access_days AS accessDays, redirect_origins AS redirectOrigins, status, created_at AS createdAt, updated_at AS updatedAt`;

function toProduct(raw: RawProduct): ProductRow {
  return {
    ...raw,
    price: BigInt(raw.price),
    featureIds: JSON.parse(raw.featureIds) as string[],
    redirectOrigins: JSON.parse(raw.redirectOrigins) as string[],
  };
}

/** A product's owner and type only (the access check of every /public/access/check); null when unknown. */
/** Products looked up by every access check: kept until the database next changes (Db.cache). */
const PRODUCTS_KEPT = 10_000;

export function findProductKind(db: Db, id: string): Pick<ProductRow, "id" | "owner" | "type"> | null {
  return db
    .cache<Pick<ProductRow, "id" | "owner" | "type"> | null>("products.kind", PRODUCTS_KEPT)
    .get(id, () => db.read(() => db.sqlite.query("SELECT id, owner, type FROM products WHERE id = ?").get(id) as Pick<ProductRow, "id" | "owner" | "type"> | null));
}

/**
 * Records a product unless the owner has `maxPerOwner` already (false then), and runs `alsoInWrite`
 * inside the same write (the product's outbox event commits with it).
 */
export function insertProduct(db: Db, row: ProductRow, maxPerOwner: number, alsoInWrite?: () => void): Promise<boolean> {
  return db.write(() => {
    const { count } = db.sqlite.query("SELECT COUNT(*) AS count FROM products WHERE owner = ?").get(row.owner) as { count: number };
    if (count >= maxPerOwner) return false;
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
    return true;
  });
}

/** A product by id, whoever owns it (the checkout page, verification); null when unknown. */
export async function findProduct(db: Db, id: string): Promise<ProductRow | null> {
  const raw = db.read(() => db.sqlite.query(`SELECT ${PRODUCT_COLUMNS} FROM products WHERE id = ?`).get(id) as RawProduct | null);
  return raw === null ? null : toProduct(raw);
}

export async function listProducts(db: Db, owner: string): Promise<ProductRow[]> {
  return (db.sqlite.query(`SELECT ${PRODUCT_COLUMNS} FROM products WHERE owner = ? ORDER BY created_at DESC, id`).all(owner) as RawProduct[]).map(
    toProduct,
  );
}

/** A product's status and last change time as a write left them. */
export type ProductNow = { status: ProductRow["status"]; updatedAt: number };

/**
 * Writes an edit's fields if the row is still as it was read (`readUpdatedAt`: every edit moves `updated_at`
 * forward by at least a millisecond, so it works as the row's version), then runs `alsoInWrite` in the same
 * write with the status and time the row has, and resolves with them; null, writing nothing, when another
 * change came in between. The status is never written: an archive racing the edit stays archived.
 */
export function updateProduct(db: Db, row: ProductRow, readUpdatedAt: number, alsoInWrite?: (now: ProductNow) => void): Promise<ProductNow | null> {
  return db.write(() => {
    const now = db.sqlite
      .query(
        `UPDATE products SET title = ?, description = ?, price = ?, token = ?, feature_ids = ?, pay_to = ?, access_days = ?,
           redirect_origins = ?, updated_at = MAX(updated_at + 1, ?) WHERE id = ? AND owner = ? AND updated_at = ?
         RETURNING status, updated_at AS updatedAt`,
      )
      .get(
        row.title,
        row.description,
        row.price,
        row.token,
        JSON.stringify(row.featureIds),
        row.payTo,
        row.accessDays,
        JSON.stringify(row.redirectOrigins),
        row.updatedAt,
        row.id,
        row.owner,
        readUpdatedAt,
      ) as ProductNow | null;
    if (now !== null) alsoInWrite?.(now);
    return now;
  });
}

/**
 * Archives an active product of `owner`, running `alsoInWrite` in the same write only then, with the time
 * the row now has; null when it was not active.
 */
export function archiveProduct(db: Db, owner: string, id: string, now: number, alsoInWrite: (updatedAt: number) => void): Promise<number | null> {
  return db.write(() => {
    const archived = db.sqlite
      .query("UPDATE products SET status = 'archived', updated_at = MAX(updated_at + 1, ?) WHERE id = ? AND owner = ? AND status = 'active' RETURNING updated_at AS updatedAt")
      .get(now, id, owner) as { updatedAt: number } | null;
    if (archived === null) return null;
    alsoInWrite(archived.updatedAt);
    return archived.updatedAt;
  });
}

// ---- checkouts ----

export type CheckoutStatus = "open" | "completed" | "expired";

export type CheckoutRow = {
  id: string;
  productId: string;
  owner: string;
  wallet: string;
  reference: string;
  payTo: string;
  amount: bigint;
  token: string;
  createdAt: number;
  expiresAt: number;
  /** The expiry on the chain's clock (the chain's time at opening + the TTL); null when the node could not say. */
  chainExpiresAt: number | null;
  status: CheckoutStatus;
  purchaseId: string | null;
  /** What the payment buys, fixed when the checkout opened; null for checkouts opened before migration 30. */
  terms: CheckoutTerms | null;
  /** checkout_pay's key for this purchase (migration 45); null for the page's checkouts and keyless calls. */
  idempotencyKey: string | null;
};

/** A checkout's terms besides its price: the access it grants and the features a feature unlock's token names. */
export type CheckoutTerms = { accessDays: number | null; featureIds: string[] };

// Amounts are read as text and turned into bigint: bun:sqlite's numbers lose precision past 2^53.
const CHECKOUT_COLUMNS = `id, product_id AS productId, owner, wallet, reference, pay_to AS payTo, CAST(amount AS TEXT) AS amount, token,
  created_at AS createdAt, expires_at AS expiresAt, chain_expires_at AS chainExpiresAt, status, purchase_id AS purchaseId, terms,
  idempotency_key AS idempotencyKey`;

type RawCheckout = Omit<CheckoutRow, "amount" | "terms"> & { amount: string; terms: string | null };

const toCheckout = (raw: RawCheckout): CheckoutRow => ({
  ...raw,
  amount: BigInt(raw.amount),
  terms: raw.terms === null ? null : (JSON.parse(raw.terms) as CheckoutTerms),
});

/**
 * A new open checkout; with an `idempotencyKey` (checkout_pay's), false when the wallet already has a
 * checkout under that key (then nothing is written).
 */
export function insertCheckout(db: Db, row: Omit<CheckoutRow, "status" | "purchaseId">): Promise<boolean> {
  return db.write(() => {
    const inserted = db.sqlite
      .query(
        `INSERT INTO checkouts (id, product_id, owner, wallet, reference, pay_to, amount, token, created_at, expires_at, chain_expires_at, status, terms, idempotency_key)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'open', ?, ?)
         ON CONFLICT DO NOTHING`,
      )
      .run(
        row.id,
        row.productId,
        row.owner,
        row.wallet,
        row.reference,
        row.payTo,
        row.amount,
        row.token,
        row.createdAt,
        row.expiresAt,
        row.chainExpiresAt,
        row.terms === null ? null : JSON.stringify(row.terms),
        row.idempotencyKey,
      );
    return inserted.changes === 1;
  });
}

/** The checkout the wallet opened under checkout_pay's `idempotencyKey`, whichever product it is of; null when none. */
export async function findCheckoutByIdempotencyKey(db: Db, wallet: string, idempotencyKey: string): Promise<CheckoutRow | null> {
  const raw = db.sqlite.query(`SELECT ${CHECKOUT_COLUMNS} FROM checkouts WHERE wallet = ? AND idempotency_key = ?`).get(wallet, idempotencyKey) as RawCheckout | null;
  return raw === null ? null : toCheckout(raw);
}

export async function findCheckout(db: Db, id: string): Promise<CheckoutRow | null> {
  const raw = db.sqlite.query(`SELECT ${CHECKOUT_COLUMNS} FROM checkouts WHERE id = ?`).get(id) as RawCheckout | null;
  return raw === null ? null : toCheckout(raw);
}

/** At most `limit` of the owner's checkouts not yet paid whose reference is one of `addresses` (a transaction's account keys). */
export async function findUnpaidCheckoutsByReference(db: Db, owner: string, addresses: readonly string[], limit: number): Promise<CheckoutRow[]> {
  return (
    db.sqlite
      .query(`SELECT ${CHECKOUT_COLUMNS} FROM checkouts WHERE reference IN (SELECT value FROM json_each(?)) AND owner = ? AND purchase_id IS NULL LIMIT ?`)
      .all(JSON.stringify(addresses), owner, limit) as RawCheckout[]
  ).map(toCheckout);
}

/** The wallet's open checkouts of a product that /submit sent a transaction for, newest first (at most `limit`). */
export async function findSubmittedOpenCheckoutsOf(db: Db, productId: string, wallet: string, limit: number): Promise<CheckoutRow[]> {
  return (
    db.sqlite
      .query(
        `SELECT ${CHECKOUT_COLUMNS} FROM checkouts WHERE status = 'open' AND product_id = ? AND wallet = ?
           AND EXISTS (SELECT 1 FROM checkout_submissions s WHERE s.checkout_id = checkouts.id)
         ORDER BY created_at DESC, id DESC LIMIT ?`,
      )
      .all(productId, wallet, limit) as RawCheckout[]
  ).map(toCheckout);
}

/** Open checkouts with ids after `afterId`, in id order (the watcher's round). */
/** Open checkouts /submit sent a transaction for since `since`, newest submission first (the watcher's first look). */
export async function listRecentlySubmittedOpenCheckouts(db: Db, since: number, limit: number): Promise<CheckoutRow[]> {
  return (
    db.sqlite
      .query(
        `SELECT ${CHECKOUT_COLUMNS} FROM checkouts WHERE id IN (
           SELECT s.checkout_id FROM checkout_submissions s JOIN checkouts c ON c.id = s.checkout_id
           WHERE s.submitted_at > ? AND c.status = 'open' ORDER BY s.submitted_at DESC LIMIT ?)`,
      )
      .all(since, limit) as RawCheckout[]
  ).map(toCheckout);
}

export async function listOpenCheckouts(db: Db, afterId: string, limit: number): Promise<CheckoutRow[]> {
  return (
    db.sqlite.query(`SELECT ${CHECKOUT_COLUMNS} FROM checkouts WHERE status = 'open' AND id > ? ORDER BY id LIMIT ?`).all(afterId, limit) as RawCheckout[]
  ).map(toCheckout);
}

/**
 * A transaction /submit sent for a checkout: its signature, its recent blockhash, and `validHeight`, the block
 * height past which it can no longer land (ledger/landing.ts; null on rows kept before it was recorded).
 */
export type Submission = { signature: string; blockhash: string; validHeight: number | null };
export type KeptSubmission = Submission & { submittedAt: number };

/**
 * The wallet's checkouts of a product that a transaction /submit sent paid since `since`, newest first
 * (at most `limit`): a page reloaded after a lost answer must not pay again for what just landed.
 */
export async function findRecentlyPaidSubmittedCheckoutsOf(db: Db, productId: string, wallet: string, since: number, limit: number): Promise<CheckoutRow[]> {
  return (
    db.sqlite
      .query(
        `SELECT ${CHECKOUT_COLUMNS} FROM checkouts WHERE id IN (
           SELECT p.checkout_id FROM purchases p JOIN checkout_submissions s ON s.checkout_id = p.checkout_id AND s.signature = p.tx_hash
           WHERE p.product_id = ? AND p.wallet = ? AND p.purchased_at >= ?
           ORDER BY p.purchased_at DESC LIMIT ?)`,
      )
      .all(productId, wallet, since, limit) as RawCheckout[]
  ).map(toCheckout);
}

/** Who holds a wallet's payments of a product (checkout_submit_leases), and until when. */
export type SubmitLease = { wallet: string; productId: string; holder: string };

/** Takes the lease for `holder` until `until`, unless another holds it past `now`: true when taken. */
export function takeSubmitLease(db: Db, lease: SubmitLease, now: number, until: number): Promise<boolean> {
  return db.write(
    () =>
      db.sqlite
        .query(
          `INSERT INTO checkout_submit_leases (wallet, product_id, holder, until) VALUES (?, ?, ?, ?)
           ON CONFLICT (wallet, product_id) DO UPDATE SET holder = excluded.holder, until = excluded.until
           WHERE checkout_submit_leases.until <= ? RETURNING holder`,
        )
        .get(lease.wallet, lease.productId, lease.holder, until, now) !== null,
  );
}

/** Gives the lease back (if still `holder`'s). */
export function dropSubmitLease(db: Db, lease: SubmitLease): Promise<void> {
  return db.write(() => {
    db.sqlite.query("DELETE FROM checkout_submit_leases WHERE wallet = ? AND product_id = ? AND holder = ?").run(lease.wallet, lease.productId, lease.holder);
  });
}

/** Deletes leases that ran out before `before` (their holder died holding them). */
export function dropLapsedSubmitLeases(db: Db, before: number): Promise<void> {
  return db.write(() => {
    db.sqlite.query("DELETE FROM checkout_submit_leases WHERE until < ?").run(before);
  });
}

/**
 * Records a transaction about to be sent for a checkout (before it is sent); false when the checkout
 * already holds `max` others (the same one again is no new one); "lease lost" when `lease` is given and no
 * longer held (it ran out, and another process may have taken it): then nothing is recorded.
 */
export function recordSubmission(db: Db, checkoutId: string, submission: Submission, now: number, max: number, lease?: SubmitLease): Promise<boolean | "lease lost"> {
  return db.write(() => {
    if (lease !== undefined) {
      const held = db.sqlite
        .query("SELECT 1 AS held FROM checkout_submit_leases WHERE wallet = ? AND product_id = ? AND holder = ? AND until > ?")
        .get(lease.wallet, lease.productId, lease.holder, now);
      if (held === null) return "lease lost";
    }
    const { n } = db.sqlite
      .query("SELECT count(*) AS n FROM checkout_submissions WHERE checkout_id = ? AND signature <> ?")
      .get(checkoutId, submission.signature) as { n: number };
    if (n >= max) return false;
    db.sqlite
      .query("INSERT INTO checkout_submissions (checkout_id, signature, blockhash, submitted_at, valid_height) VALUES (?, ?, ?, ?, ?) ON CONFLICT DO NOTHING")
      .run(checkoutId, submission.signature, submission.blockhash, now, submission.validHeight);
    return true;
  });
}

/** Forgets a submission the ledger refused outright: it was not sent, and can never land. */
export function dropSubmission(db: Db, checkoutId: string, signature: string): Promise<void> {
  return db.write(() => {
    db.sqlite.query("DELETE FROM checkout_submissions WHERE checkout_id = ? AND signature = ?").run(checkoutId, signature);
  });
}

/** The transactions /submit sent for a checkout, oldest first. */
export async function listSubmissions(db: Db, checkoutId: string): Promise<KeptSubmission[]> {
  return db.sqlite
    .query("SELECT signature, blockhash, submitted_at AS submittedAt, valid_height AS validHeight FROM checkout_submissions WHERE checkout_id = ? ORDER BY submitted_at, signature")
    .all(checkoutId) as KeptSubmission[];
}

/** Marks an open checkout expired; false when it is no longer open. */
export function expireCheckout(db: Db, id: string): Promise<boolean> {
  return db.write(() => db.sqlite.query("UPDATE checkouts SET status = 'expired' WHERE id = ? AND status = 'open'").run(id).changes > 0);
}

/** Whether any checkout is open: the watcher has nothing to look at otherwise (and its module stays unloaded). */
export async function anyOpenCheckout(db: Db): Promise<boolean> {
  return db.read(() => db.sqlite.query("SELECT 1 FROM checkouts WHERE status = 'open' LIMIT 1").get() !== null);
}

/** Deletes checkouts marked expired (unpaid, nothing left to land) whose expiry is before `before`, with their kept transactions. */
export async function purgeExpiredCheckouts(db: Db, before: number, stopping?: AbortSignal): Promise<number> {
  // In steps of STEP_ROWS checkouts, each with its submissions, one write each (db/steps.ts). Both
  // statements pick the same checkouts: the same order, ties broken by id, in the same write.
  const due = `SELECT id FROM checkouts WHERE status = 'expired' AND expires_at < ? ORDER BY expires_at, id LIMIT ${STEP_ROWS}`;
  return inSteps(
    db,
    0,
    () => {
      db.sqlite.query(`DELETE FROM checkout_submissions WHERE checkout_id IN (${due})`).run(before);
      return stepOf(db.sqlite.query(`DELETE FROM checkouts WHERE id IN (${due})`).run(before).changes);
    },
    stopping,
  );
}

// ---- purchases ----

export type PurchaseRow = {
  id: string;
  owner: string;
  productId: string;
  productTitle: string;
  checkoutId: string;
  wallet: string;
  txHash: string;
  amount: bigint;
  token: string;
  network: string;
  purchasedAt: number;
  expiresAt: number | null;
};

type RawPurchase = Omit<PurchaseRow, "amount"> & { amount: string };

const PURCHASE_COLUMNS = `p.id, p.owner, p.product_id AS productId, pr.title AS productTitle, p.checkout_id AS checkoutId, p.wallet,
  p.tx_hash AS txHash, CAST(p.amount AS TEXT) AS amount, p.token, p.network, p.purchased_at AS purchasedAt, p.expires_at AS expiresAt`;
const PURCHASE_FROM = "purchases p JOIN products pr ON pr.id = p.product_id";

const toPurchase = (raw: RawPurchase): PurchaseRow => ({ ...raw, amount: BigInt(raw.amount) });

function purchaseWhere(db: Db, where: string, ...params: (string | number)[]): PurchaseRow | null {
  const raw = db.sqlite.query(`SELECT ${PURCHASE_COLUMNS} FROM ${PURCHASE_FROM} WHERE ${where}`).get(...params) as RawPurchase | null;
  return raw === null ? null : toPurchase(raw);
}

export async function findPurchase(db: Db, id: string): Promise<PurchaseRow | null> {
  return purchaseWhere(db, "p.id = ?", id);
}

export async function findPurchaseByTxHash(db: Db, txHash: string): Promise<PurchaseRow | null> {
  return purchaseWhere(db, "p.tx_hash = ?", txHash);
}

/** The sealed feature token to issue with a purchase. */
export type NewFeatureToken = { tokenHash: string; iv: Uint8Array; ciphertext: Uint8Array; features: string[] };

export type CompleteCheckout = {
  checkout: CheckoutRow;
  productType: "feature_unlock" | "access";
  /** null: access does not expire. */
  accessMs: number | null;
  purchase: { id: string; txHash: string; amount: bigint; network: string; purchasedAt: number };
  /** feature_unlock only. */
  token: NewFeatureToken | null;
};

export type CompleteOutcome =
  | { kind: "created"; purchase: PurchaseRow }
  | { kind: "existing"; purchase: PurchaseRow }
  | { kind: "signature_used"; purchase: PurchaseRow }
  /** The checkout was purged while its payment was judged (expired unpaid a week ago, confirmed late). */
  | { kind: "gone" };

/**
 * Completes a checkout in one write: the purchase, the checkout marked completed, the feature token,
 * and `alsoInWrite` (the outbox events) — or nothing, when the checkout was already completed (the
 * same purchase, idempotent) or the signature already bought something else. Decided inside the write,
 * so concurrent confirms make one purchase. Access runs `accessMs` from the later of now and the
 * wallet's current expiry for this product (buying again while access lasts extends it).
 */
export function completeCheckout(db: Db, input: CompleteCheckout, alsoInWrite?: (expiresAt: number | null) => void): Promise<CompleteOutcome> {
  return db.write((): CompleteOutcome => {
    const { checkout, purchase } = input;
    const current = db.sqlite.query("SELECT purchase_id AS purchaseId FROM checkouts WHERE id = ?").get(checkout.id) as { purchaseId: string | null } | null;
    if (current === null) return { kind: "gone" };
    if (current.purchaseId) return { kind: "existing", purchase: purchaseWhere(db, "p.id = ?", current.purchaseId)! };
    const used = purchaseWhere(db, "p.tx_hash = ?", purchase.txHash);
    if (used !== null) return { kind: "signature_used", purchase: used };

    let expiresAt: number | null = null;
    if (input.accessMs !== null) {
      const now = purchase.purchasedAt;
      // For a feature unlock, access is the live token's; for an access pass, the purchase's. Only access paid on
      // this purchase's network extends it (a database served on several networks before migration 35).
      const latest = (
        input.productType === "feature_unlock"
          ? db.sqlite
              .query(
                `SELECT MAX(t.expires_at) AS until FROM feature_tokens t JOIN purchases p ON p.id = t.purchase_id
                 WHERE t.product_id = ? AND t.wallet = ? AND t.revoked_at IS NULL AND t.expires_at > ? AND p.network = ?`,
              )
              .get(checkout.productId, checkout.wallet, now, purchase.network)
          : db.sqlite
              .query("SELECT MAX(expires_at) AS until FROM purchases WHERE product_id = ? AND wallet = ? AND expires_at > ? AND network = ?")
              .get(checkout.productId, checkout.wallet, now, purchase.network)
      ) as { until: number | null };
      // Passes bought one after another add up, to the last time an ISO date of four digits can write.
      expiresAt = Math.min(Math.max(now, latest.until ?? now) + input.accessMs, LATEST_TIME_MS);
    }

    db.sqlite
      .query(
        `INSERT INTO purchases (id, owner, product_id, checkout_id, wallet, tx_hash, amount, token, network, purchased_at, expires_at)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
      )
      .run(
        purchase.id,
        checkout.owner,
        checkout.productId,
        checkout.id,
        checkout.wallet,
        purchase.txHash,
        purchase.amount,
        checkout.token,
        purchase.network,
        purchase.purchasedAt,
        expiresAt,
      );
    db.sqlite.query("UPDATE checkouts SET status = 'completed', purchase_id = ? WHERE id = ?").run(purchase.id, checkout.id);
    if (input.token !== null) {
      db.sqlite
        .query(
          `INSERT INTO feature_tokens (token_hash, token_iv, token_ciphertext, owner, product_id, purchase_id, wallet, features, created_at, expires_at, access_ms)
           VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
        )
        .run(
          input.token.tokenHash,
          input.token.iv,
          input.token.ciphertext,
          checkout.owner,
          checkout.productId,
          purchase.id,
          checkout.wallet,
          JSON.stringify(input.token.features),
          purchase.purchasedAt,
          expiresAt,
          expiresAt === null ? null : input.accessMs,
        );
    }
    alsoInWrite?.(expiresAt);
    return { kind: "created", purchase: purchaseWhere(db, "p.id = ?", purchase.id)! };
  });
}

/** The purchase granting `wallet` access to an access product now: the one lasting longest, newest first. */
/**
 * An access-check answer kept until the database next changes (Db.cache) or until `until`, the first time
 * it could change with no commit at all (an expiry); `loadedAt` guards against a clock set back.
 */
type KeptAccess = { purchase: PurchaseRow | null; loadedAt: number; until: number };
/** Access checks answered from memory between commits: one entry per product and wallet asked about. */
const ACCESS_KEPT = 20_000;

function keptAccess(db: Db, name: string, productId: string, wallet: string, now: number, load: () => KeptAccess): PurchaseRow | null {
  return db.cache<KeptAccess>(name, ACCESS_KEPT).get(`${productId} ${wallet}`, load, (kept) => now >= kept.loadedAt && now < kept.until).purchase;
}

/**
 * The access pass `wallet` holds for a product now: of its unexpired purchases, the one that lasts longest.
 * Kept until that one expires — then all of them have — or no purchase at all, which only a commit changes.
 */
export function findAccessPurchase(db: Db, productId: string, wallet: string, now: number, network: string): PurchaseRow | null {
  return keptAccess(db, "purchases.access", productId, wallet, now, () =>
    db.read(() => {
      // Most checks are for wallets that never bought: one index probe answers them without the ordered join.
      const purchase =
        db.sqlite.query("SELECT 1 FROM purchases WHERE product_id = ? AND wallet = ? LIMIT 1").get(productId, wallet) === null
          ? null
          : purchaseWhere(
              db,
              `p.product_id = ? AND p.wallet = ? AND (p.expires_at IS NULL OR p.expires_at > ?) AND p.network = ?
               ORDER BY p.expires_at IS NULL DESC, p.expires_at DESC, p.purchased_at DESC LIMIT 1`,
              productId,
              wallet,
              now,
              network,
            );
      return { purchase, loadedAt: now, until: purchase?.expiresAt ?? Infinity };
    }),
  );
}

/**
 * The purchase behind `wallet`'s live (neither revoked nor expired) token for a feature unlock. Kept until
 * the first of those tokens expires (the answer may change then), or while there is none, until a commit.
 */
export function findTokenAccessPurchase(db: Db, productId: string, wallet: string, now: number, network: string): PurchaseRow | null {
  return keptAccess(db, "purchases.token_access", productId, wallet, now, () =>
    db.read(() => {
      if (db.sqlite.query("SELECT 1 FROM feature_tokens WHERE product_id = ? AND wallet = ? LIMIT 1").get(productId, wallet) === null) {
        return { purchase: null, loadedAt: now, until: Infinity };
      }
      const live = "product_id = ? AND wallet = ? AND revoked_at IS NULL AND (expires_at IS NULL OR expires_at > ?)";
      const purchase = purchaseWhere(
        db,
        `p.id IN (SELECT purchase_id FROM feature_tokens WHERE ${live}) AND p.network = ?
         ORDER BY p.expires_at IS NULL DESC, p.expires_at DESC, p.purchased_at DESC LIMIT 1`,
        productId,
        wallet,
        now,
        network,
      );
      const { until } = db.sqlite.query(`SELECT MIN(expires_at) AS until FROM feature_tokens WHERE ${live}`).get(productId, wallet, now) as {
        until: number | null;
      };
      return { purchase, loadedAt: now, until: until ?? Infinity };
    }),
  );
}

export async function listPurchases(db: Db, owner: string, query: { productId?: string | undefined; limit: number; offset: number }): Promise<{ rows: PurchaseRow[]; total: number }> {
  // One product's: through its own index ("+" keeps the owner's off), not all of the owner's purchases.
  const where = query.productId === undefined ? "p.owner = ?" : "+p.owner = ? AND p.product_id = ?";
  const params = query.productId === undefined ? [owner] : [owner, query.productId];
  const { total } = db.sqlite.query(`SELECT COUNT(*) AS total FROM purchases p WHERE ${where}`).get(...params) as { total: number };
  // The page's ids first, from the index alone, then its rows: a deep page skips index entries, not joined rows.
  const page = `SELECT p.id FROM purchases p WHERE ${where} ORDER BY p.purchased_at DESC, p.id LIMIT ? OFFSET ?`;
  const rows = db.sqlite
    .query(`SELECT ${PURCHASE_COLUMNS} FROM ${PURCHASE_FROM} WHERE p.id IN (${page}) ORDER BY p.purchased_at DESC, p.id`)
    .all(...params, query.limit, query.offset) as RawPurchase[];
  return { rows: rows.map(toPurchase), total };
}

type SplitRevenue = { revenueHigh: string; revenueLow: string };

/** Revenue (base units) and purchase count per token key, of purchases at or after `since`. */
export async function revenueByToken(db: Db, owner: string, since = 0): Promise<{ token: string; revenue: bigint; count: number }[]> {
  const rows = db.sqlite
    .query(`SELECT token, ${splitSum("amount", "revenue")}, COUNT(*) AS count FROM purchases WHERE owner = ? AND purchased_at >= ? GROUP BY token`)
    .all(owner, since) as ({ token: string; count: number } & SplitRevenue)[];
  return rows.map((r) => ({ token: r.token, count: r.count, revenue: joinSum(r.revenueHigh, r.revenueLow) }));
}

/** The same per UTC day (day = Unix ms / 86,400,000), from `since`. */
export async function dailyRevenue(db: Db, owner: string, since: number): Promise<{ day: number; token: string; revenue: bigint; count: number }[]> {
  const rows = db.sqlite
    .query(
      `SELECT purchased_at / 86400000 AS day, token, ${splitSum("amount", "revenue")}, COUNT(*) AS count
       FROM purchases WHERE owner = ? AND purchased_at >= ? GROUP BY day, token`,
    )
    .all(owner, since) as ({ day: number; token: string; count: number } & SplitRevenue)[];
  return rows.map((r) => ({ day: r.day, token: r.token, count: r.count, revenue: joinSum(r.revenueHigh, r.revenueLow) }));
}

export async function countProducts(db: Db, owner: string): Promise<number> {
  return (db.sqlite.query("SELECT COUNT(*) AS n FROM products WHERE owner = ?").get(owner) as { n: number }).n;
}

// ---- feature tokens ----

export type FeatureTokenRow = {
  tokenHash: string;
  iv: Uint8Array;
  ciphertext: Uint8Array;
  owner: string;
  productId: string;
  productTitle: string;
  purchaseId: string;
  txHash: string;
  /** The cluster name of the network its purchase was paid on. */
  network: string;
  wallet: string;
  features: string[];
  createdAt: number;
  expiresAt: number | null;
  revokedAt: number | null;
};

type RawToken = Omit<FeatureTokenRow, "features"> & { features: string };

const TOKEN_COLUMNS = `t.token_hash AS tokenHash, t.token_iv AS iv, t.token_ciphertext AS ciphertext, t.owner, t.product_id AS productId,
  pr.title AS productTitle, t.purchase_id AS purchaseId, p.tx_hash AS txHash, p.network, t.wallet, t.features, t.created_at AS createdAt,
  t.expires_at AS expiresAt, t.revoked_at AS revokedAt`;
const TOKEN_FROM = "feature_tokens t JOIN purchases p ON p.id = t.purchase_id JOIN products pr ON pr.id = t.product_id";

const toToken = (raw: RawToken): FeatureTokenRow => ({ ...raw, features: JSON.parse(raw.features) as string[] });

export async function findFeatureToken(db: Db, tokenHash: string): Promise<FeatureTokenRow | null> {
  const raw = db.sqlite.query(`SELECT ${TOKEN_COLUMNS} FROM ${TOKEN_FROM} WHERE t.token_hash = ?`).get(tokenHash) as RawToken | null;
  return raw === null ? null : toToken(raw);
}

export async function findFeatureTokenOfPurchase(db: Db, purchaseId: string): Promise<FeatureTokenRow | null> {
  const raw = db.sqlite.query(`SELECT ${TOKEN_COLUMNS} FROM ${TOKEN_FROM} WHERE t.purchase_id = ?`).get(purchaseId) as RawToken | null;
  return raw === null ? null : toToken(raw);
}

export type TokenStatus = "active" | "revoked" | "expired";

export type TokenFilter = {
  productId?: string | undefined;
  wallet?: string | undefined;
  status?: TokenStatus | undefined;
  limit: number;
  offset: number;
};

/** The owner's tokens, newest first, with the total the filter matches; status is judged at `now`. */
export async function listFeatureTokens(db: Db, owner: string, filter: TokenFilter, now: number): Promise<{ rows: FeatureTokenRow[]; total: number }> {
  // One product's: through its own index ("+" keeps the owner's off), not all of the owner's tokens.
  const clauses = [filter.productId === undefined ? "t.owner = ?" : "+t.owner = ?"];
  const params: (string | number)[] = [owner];
  if (filter.productId !== undefined) {
    clauses.push("t.product_id = ?");
    params.push(filter.productId);
  }
  if (filter.wallet !== undefined) {
    clauses.push("t.wallet = ?");
    params.push(filter.wallet);
  }
  if (filter.status === "revoked") clauses.push("t.revoked_at IS NOT NULL");
  if (filter.status === "active") {
    clauses.push("t.revoked_at IS NULL AND (t.expires_at IS NULL OR t.expires_at > ?)");
    params.push(now);
  }
  if (filter.status === "expired") {
    clauses.push("t.revoked_at IS NULL AND t.expires_at <= ?");
    params.push(now);
  }
  const where = clauses.join(" AND ");
  const { total } = db.sqlite.query(`SELECT COUNT(*) AS total FROM feature_tokens t WHERE ${where}`).get(...params) as { total: number };
  // The page's keys first (from the index alone when only the owner filters), then its rows.
  const page = `SELECT t.token_hash FROM feature_tokens t WHERE ${where} ORDER BY t.created_at DESC, t.token_hash LIMIT ? OFFSET ?`;
  const rows = db.sqlite
    .query(`SELECT ${TOKEN_COLUMNS} FROM ${TOKEN_FROM} WHERE t.token_hash IN (${page}) ORDER BY t.created_at DESC, t.token_hash`)
    .all(...params, filter.limit, filter.offset) as RawToken[];
  return { rows: rows.map(toToken), total };
}

/**
 * After a revocation: the buyer's live tokens of the product are laid end to end again, as their purchases
 * did (each runs its own `access_ms` from the later of its purchase and the latest expiry of the tokens
 * written before it that were then live and are unrevoked now), so time a revoked token passed on to later
 * ones is taken back. In the order they were written (rowid), which is the order each was extended in, even
 * if the clock stepped back between two purchases. Only shortens; tokens whose own time is unknown (before
 * migration 36) keep their expiry but still count for those after them. Inside the revoking write.
 */
function withdrawCarriedTime(db: Db, productId: string, wallet: string, network: string, now: number): void {
  const tokens = db.sqlite
    .query(
      `SELECT t.token_hash AS tokenHash, t.purchase_id AS purchaseId, t.created_at AS createdAt, t.expires_at AS expiresAt,
              t.access_ms AS accessMs, t.revoked_at AS revokedAt
       FROM feature_tokens t JOIN purchases p ON p.id = t.purchase_id
       WHERE t.product_id = ? AND t.wallet = ? AND p.network = ? ORDER BY t.rowid`,
    )
    .all(productId, wallet, network) as { tokenHash: string; purchaseId: string; createdAt: number; expiresAt: number | null; accessMs: number | null; revokedAt: number | null }[];
  let latest = -Infinity; // the latest end of the unrevoked tokens with an expiry laid so far
  const shorten = db.sqlite.query("UPDATE feature_tokens SET expires_at = ? WHERE token_hash = ?");
  const shortenPurchase = db.sqlite.query("UPDATE purchases SET expires_at = ? WHERE id = ?");
  for (const t of tokens) {
    if (t.revokedAt !== null || t.expiresAt === null) continue;
    let expiresAt = t.expiresAt;
    if (t.accessMs !== null && t.expiresAt > now) {
      // From the later of its purchase and the end of those before it (one that ended before its purchase carries nothing).
      expiresAt = Math.min(t.expiresAt, Math.max(t.createdAt, latest) + t.accessMs);
      if (expiresAt < t.expiresAt) {
        shorten.run(expiresAt, t.tokenHash);
        shortenPurchase.run(expiresAt, t.purchaseId);
      }
    }
    latest = Math.max(latest, expiresAt);
  }
}

/**
 * Revokes the owner's token (permanent); `alsoInWrite` (the feature.revoked event) runs only when this
 * call revoked it. "not_found" for an unknown token or another owner's.
 */
export function revokeFeatureToken(db: Db, owner: string, tokenHash: string, now: number, alsoInWrite?: () => void): Promise<"revoked" | "already_revoked" | "not_found"> {
  return db.write(() => {
    const row = db.sqlite
      .query(
        `SELECT t.revoked_at AS revokedAt, t.expires_at AS expiresAt, t.product_id AS productId, t.wallet, p.network
         FROM feature_tokens t JOIN purchases p ON p.id = t.purchase_id WHERE t.token_hash = ? AND t.owner = ?`,
      )
      .get(tokenHash, owner) as { revokedAt: number | null; expiresAt: number | null; productId: string; wallet: string; network: string } | null;
    if (row === null) return "not_found";
    if (row.revokedAt !== null) return "already_revoked";
    db.sqlite.query("UPDATE feature_tokens SET revoked_at = ? WHERE token_hash = ?").run(now, tokenHash);
    // Also when it has ended: the days it passed on live in the later tokens, which may still run.
    if (row.expiresAt !== null) withdrawCarriedTime(db, row.productId, row.wallet, row.network, now);
    alsoInWrite?.();
    return "revoked";
  });
}
