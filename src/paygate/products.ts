// Products owners sell (paygate.md "Products"): feature unlocks and access passes, priced in USDC or the
// service token; created, edited and archived through the Dashboard API, read through /public/*.
import type { Deps } from "../deps.ts";
import { amountField, AppError, invalidField, textField } from "../errors.ts";
import { firstCharacters } from "../lib/text.ts";
import { formatAmount } from "../lib/amounts.ts";
import { headWithin } from "../lib/fit.ts";
import { toIso } from "../lib/clock.ts";
import { newId } from "../lib/ids.ts";
import { clusterName, type TokenInfo } from "../ledger/ledger.ts";
import { requireWalletRecipient } from "../ledger/recipients.ts";
import { enqueueEventInWrite } from "../webhooks/outbox.ts";
import * as store from "./store.ts";

/** Products per owner, archived ones included (they are kept for their purchases): the table is bounded. */
export const MAX_PRODUCTS_PER_OWNER = 1_000;

export type Product = {
  productId: string;
  title: string;
  description: string;
  type: "feature_unlock" | "access";
  price: string;
  currency: string;
  network: string;
  featureIds: string[];
  payTo: string;
  accessDays: number | null;
  redirectOrigins: string[];
  status: "active" | "archived";
  paymentUrl: string;
  createdAt: string;
  updatedAt: string;
};

export type ProductInput = {
  title?: string | undefined;
  description?: string | undefined;
  type?: "feature_unlock" | "access" | undefined;
  price?: string | number | undefined;
  currency?: string | undefined;
  featureIds?: string[] | undefined;
  /** null: the owner's wallet (as when left out at creation) */
  payTo?: string | null | undefined;
  accessDays?: number | null | undefined;
  redirectOrigins?: string[] | undefined;
};

const LIMITS = { title: 200, description: 2000, featureIds: 50, featureIdChars: 64, redirectOrigins: 10, accessDays: 36_500 };
const FEATURE_ID = /^[A-Za-z0-9][A-Za-z0-9_.:-]*$/;

/**
 * The SPL token a currency names: `USDC`, or the service token's symbol, in any case. `field` names the
 * parameter in a VALIDATION_ERROR (the marketplace calls its `paymentMethod`).
 */
export async function currencyToken(deps: Deps, currency: string, field = "currency"): Promise<TokenInfo> {
  const tokens = (await deps.ledger.tokens()).filter((t) => t.kind === "spl");
  const token = tokens.find((t) => t.key.toUpperCase() === currency.toUpperCase());
  if (token === undefined) throw invalidField(field, `one of ${tokens.map((t) => t.key.toUpperCase()).join(", ")}`);
  if (token.mint === null) throw new AppError("NOT_SUPPORTED", `${currency} has no mint on this network (SERVICE_TOKEN_MINT)`);
  return token;
}

type ProductEvent = "product.created" | "product.updated" | "product.archived";

/** The outbox event of a product change, written in the same database write as the change. */
function productEvent(deps: Deps, type: ProductEvent, owner: string, view: Product): () => void {
  return () => {
    const payload = {
      productId: view.productId,
      productTitle: view.title,
      productType: view.type,
      price: view.price,
      currency: view.currency,
      status: view.status,
      timestamp: view.updatedAt,
      network: view.network,
    };
    enqueueEventInWrite(deps, { targetKind: "owner", targetId: owner, type, payload });
  };
}

export async function productView(deps: Deps, row: store.ProductRow): Promise<Product> {
  const token = (await deps.ledger.tokens()).find((t) => t.key === row.token);
  return {
    productId: row.id,
    title: row.title,
    description: row.description,
    type: row.type,
    price: formatAmount(row.price, token?.decimals ?? 6),
    currency: row.token.toUpperCase(),
    network: clusterName(deps.config.network),
    featureIds: row.featureIds,
    payTo: row.payTo,
    accessDays: row.accessDays,
    redirectOrigins: row.redirectOrigins,
    status: row.status,
    paymentUrl: `${deps.baseUrl}/pay/${row.id}`,
    createdAt: toIso(row.createdAt),
    updatedAt: toIso(row.updatedAt),
  };
}

function checkText(value: string, field: "title" | "description", required: boolean): string {
  return textField(value, field, LIMITS[field], required);
}

function checkFeatureIds(ids: string[]): string[] {
  if (ids.length > LIMITS.featureIds) throw invalidField("featureIds", `at most ${LIMITS.featureIds}`);
  for (const id of ids) {
    if (id.length > LIMITS.featureIdChars || !FEATURE_ID.test(id)) throw invalidField("featureIds", `"${firstCharacters(id, 70)}" is not a feature id (letters, digits, _ . : -)`);
  }
  return [...new Set(ids)];
}

function checkOrigins(origins: string[]): string[] {
  if (origins.length > LIMITS.redirectOrigins) throw invalidField("redirectOrigins", `at most ${LIMITS.redirectOrigins}`);
  return origins.map((origin) => {
    let url: URL;
    try {
      url = new URL(origin);
    } catch {
      throw invalidField("redirectOrigins", `"${firstCharacters(origin, 100)}" is not an origin`);
    }
    if ((url.protocol !== "https:" && url.protocol !== "http:") || url.origin !== origin.replace(/\/$/, "")) {
      throw invalidField("redirectOrigins", `"${firstCharacters(origin, 100)}" must be scheme://host[:port] only`);
    }
    return url.origin;
  });
}

function checkAccessDays(days: number | null): number | null {
  if (days === null) return null;
  if (!Number.isInteger(days) || days < 1 || days > LIMITS.accessDays) throw invalidField("accessDays", `a whole number of days, 1 to ${LIMITS.accessDays}`);
  return days;
}

/** The wallet paid for a product: the owner's own, or another that is a wallet (not a mint, a token account or a program). */
async function checkPayTo(deps: Deps, payTo: string, owner: string): Promise<string> {
  if (payTo !== owner) await requireWalletRecipient(deps, payTo, "payTo");
  return payTo;
}

export async function createProduct(deps: Deps, owner: string, input: ProductInput): Promise<Product> {
  if (input.type !== "feature_unlock" && input.type !== "access") throw invalidField("type", "feature_unlock or access");
  if (input.price === undefined) throw invalidField("price", "required");
  const token = await currencyToken(deps, input.currency ?? "USDC");
  const featureIds = checkFeatureIds(input.featureIds ?? []);
  if (input.type === "feature_unlock" && featureIds.length === 0) throw invalidField("featureIds", "a feature_unlock product unlocks at least one feature");
  const now = deps.clock.now();
  await store.ensureOwner(deps.db, owner, now);
  const row: store.ProductRow = {
    id: newId("prod", deps.random),
    owner,
    title: checkText(input.title ?? "", "title", true),
    description: checkText(input.description ?? "", "description", false),
    type: input.type,
    price: amountField(input.price, token.decimals, "price"),
    token: token.key,
    featureIds,
    payTo: await checkPayTo(deps, input.payTo ?? owner, owner),
    accessDays: checkAccessDays(input.accessDays ?? null),
    redirectOrigins: checkOrigins(input.redirectOrigins ?? []),
    status: "active",
    createdAt: now,
    updatedAt: now,
  };
  const view = await productView(deps, row);
  if (!(await store.insertProduct(deps.db, row, MAX_PRODUCTS_PER_OWNER, productEvent(deps, "product.created", owner, view)))) {
    throw new AppError("INVALID_STATE", `an owner can have at most ${MAX_PRODUCTS_PER_OWNER} products (archived ones included)`);
  }
  return view;
}

/** A row of the owner's; another owner's or an unknown id is NOT_FOUND (a stranger never learns it exists). */
function mine<T extends { owner: string }>(row: T | null, owner: string): T {
  if (row === null || row.owner !== owner) throw new AppError("NOT_FOUND", "no such product");
  return row;
}

/** The owner's product (see `mine`). */
export async function ownedProduct(deps: Deps, owner: string, productId: string): Promise<store.ProductRow> {
  return mine(await store.findProduct(deps.db, productId), owner);
}

/** The owner's product's id and type only: what an access check needs, read without the rest. */
/** Synchronous, as the lookups of every access check are (store.ts). */
export function ownedProductKind(deps: Deps, owner: string, productId: string): Pick<store.ProductRow, "id" | "owner" | "type"> {
  return mine(store.findProductKind(deps.db, productId), owner);
}

export async function getProduct(deps: Deps, owner: string, productId: string): Promise<Product> {
  return productView(deps, await ownedProduct(deps, owner, productId));
}

/** What a buyer's checkout page shows of a product: no owner, feature list or payment address. */
export type BuyerProduct = Pick<Product, "productId" | "title" | "description" | "type" | "price" | "currency" | "network" | "accessDays" | "redirectOrigins" | "status">;

/** GET /pay/:productId/product: any product, active or archived (the page says which), without an API key. */
export async function buyerProduct(deps: Deps, productId: string): Promise<BuyerProduct> {
  const row = await store.findProduct(deps.db, productId);
  if (row === null) throw new AppError("NOT_FOUND", "no such product");
  const { productId: id, title, description, type, price, currency, network, accessDays, redirectOrigins, status } = await productView(deps, row);
  return { productId: id, title, description, type, price, currency, network, accessDays, redirectOrigins, status };
}

/**
 * A page of the owner's products, newest first, from `offset`: as many as fit in lib/fit.ts's page of JSON (one
 * at least). An owner may keep 1,000 products of ~8 KB each at their fields' limits, and an answer of 8 MB
 * per request, held until a slow client reads it, took ~15 MB of memory each (1.7 GB for 100 at once).
 * The answer is paygate.md's `{ products }` when the rest of the list fits (from offset 0: all of it); a page cut
 * short adds `hasMore: true` and `total`: ask again from `offset` + the products returned.
 */
export async function listProducts(deps: Deps, owner: string, offset = 0): Promise<{ products: Product[]; total?: number; hasMore?: true }> {
  const rows = await store.listProducts(deps.db, owner);
  const products = headWithin(await Promise.all(rows.slice(offset).map((row) => productView(deps, row))));
  return offset + products.length < rows.length ? { products, total: rows.length, hasMore: true } : { products };
}

function sameProduct(a: store.ProductRow, b: store.ProductRow): boolean {
  const list = (x: readonly string[]) => JSON.stringify(x);
  return (
    a.title === b.title && a.description === b.description && a.price === b.price && a.token === b.token && a.payTo === b.payTo &&
    a.accessDays === b.accessDays && list(a.featureIds) === list(b.featureIds) && list(a.redirectOrigins) === list(b.redirectOrigins)
  );
}

/** Attempts of an edit that finds the product changed by another request between its read and its write. */
const EDIT_ATTEMPTS = 10;

/**
 * Applies the fields of `patch` to the product as it is when written: an edit made from a row that another
 * change has since replaced is made again from the new row, so two edits of different fields at once both
 * land (the last of two edits of one field wins).
 */
export async function updateProduct(deps: Deps, owner: string, productId: string, patch: ProductInput): Promise<Product> {
  for (let attempt = 1; ; attempt++) {
    const edited = await editProduct(deps, owner, productId, patch);
    if (edited !== null) return edited;
    if (attempt === EDIT_ATTEMPTS) throw new AppError("CONFLICT", "the product kept changing while this edit was made: send it again");
  }
}

/** One attempt of updateProduct: null when the product changed between its read and its write. */
async function editProduct(deps: Deps, owner: string, productId: string, patch: ProductInput): Promise<Product | null> {
  const row = await ownedProduct(deps, owner, productId);
  if (patch.type !== undefined && patch.type !== row.type) throw invalidField("type", "cannot change; create another product");
  // The row's own token is null when the service no longer has it (SERVICE_TOKEN_SYMBOL changed since).
  const current = (await deps.ledger.tokens()).find((t) => t.key === row.token) ?? null;
  const token = patch.currency === undefined ? current : await currencyToken(deps, patch.currency);
  const gone = () => `${row.token.toUpperCase()} is no longer one of this service's currencies`;
  let price = row.price;
  if (token === null) {
    if (patch.price !== undefined) throw invalidField("currency", `required with price: ${gone()}`);
  } else if (patch.price !== undefined) {
    price = amountField(patch.price, token.decimals, "price");
  } else if (token.key !== row.token) {
    // The same price in the new currency (1.5 USDC → 1.5 WGT): the stored units read at the old one's scale.
    if (current === null) throw invalidField("price", `required: ${gone()}`);
    price = amountField(formatAmount(row.price, current.decimals), token.decimals, "price");
  }
  const featureIds = patch.featureIds === undefined ? row.featureIds : checkFeatureIds(patch.featureIds);
  const payTo = patch.payTo === undefined ? row.payTo : (patch.payTo ?? owner);
  if (row.type === "feature_unlock" && featureIds.length === 0) throw invalidField("featureIds", "a feature_unlock product unlocks at least one feature");
  const next: store.ProductRow = {
    ...row,
    title: patch.title === undefined ? row.title : checkText(patch.title, "title", true),
    description: patch.description === undefined ? row.description : checkText(patch.description, "description", false),
    price,
    token: token?.key ?? row.token,
    featureIds,
    // Checked only when it changes: the dashboard's form sends it back with every edit.
    payTo: payTo === row.payTo ? payTo : await checkPayTo(deps, payTo, owner),
    accessDays: patch.accessDays === undefined ? row.accessDays : checkAccessDays(patch.accessDays),
    redirectOrigins: patch.redirectOrigins === undefined ? row.redirectOrigins : checkOrigins(patch.redirectOrigins),
    updatedAt: deps.clock.now(),
  };
  // An edit that changes nothing writes nothing and tells no webhook.
  if (sameProduct(row, next)) return productView(deps, row);
  const view = await productView(deps, next);
  // The status and time are the row's at the write (an archive may have come in between): in the event and the answer.
  const now = await store.updateProduct(deps.db, next, row.updatedAt, (at) =>
    productEvent(deps, "product.updated", owner, { ...view, status: at.status, updatedAt: toIso(at.updatedAt) })(),
  );
  return now === null ? null : { ...view, status: now.status, updatedAt: toIso(now.updatedAt) };
}

/**
 * Archived products cannot be bought; access already sold stays. Archiving twice is harmless: only the
 * write that changes the status emits product.archived.
 */
export async function archiveProduct(deps: Deps, owner: string, productId: string): Promise<Product> {
  const row = await ownedProduct(deps, owner, productId);
  if (row.status === "archived") return productView(deps, row);
  const now = deps.clock.now();
  const view = await productView(deps, { ...row, status: "archived", updatedAt: now });
  // The time is the row's as the write left it (a change in the same millisecond moves it on): in the event and the answer.
  const archivedAt = await store.archiveProduct(deps.db, owner, productId, now, (at) => productEvent(deps, "product.archived", owner, { ...view, updatedAt: toIso(at) })());
  if (archivedAt === null) return productView(deps, await ownedProduct(deps, owner, productId)); // archived meanwhile by another request
  return { ...view, updatedAt: toIso(archivedAt) };
}
