// What buyers bought, as owners see it (paygate.md "Public API"): access checks, transaction
// verification, the purchase list and revenue statistics.
import type { Deps } from "../deps.ts";
import { AppError, fieldError, requirePage } from "../errors.ts";
import { amountToNumber, formatAmount } from "../lib/amounts.ts";
import { DAY_MS, toIso } from "../lib/clock.ts";
import { isAddress, decodeBase58 } from "../lib/encoding.ts";
import { clusterName, type LedgerTransaction, type TokenInfo } from "../ledger/ledger.ts";
import { ownedProductKind } from "./products.ts";
import * as store from "./store.ts";

export const PURCHASE_LIST_LIMIT = { default: 100, max: 1000 };
export const STATS_DAYS = { default: 30, max: 365 };

/** How a token key is shown and counted: its currency name and decimals. */
export function currencyOf(tokens: readonly TokenInfo[], key: string): { currency: string; decimals: number } {
  return { currency: key.toUpperCase(), decimals: tokens.find((t) => t.key === key)?.decimals ?? 6 };
}

export type PurchaseView = {
  purchaseId: string;
  productId: string;
  productTitle: string;
  walletAddress: string;
  txHash: string;
  amount: string;
  currency: string;
  network: string;
  purchasedAt: string;
  expiresAt?: string;
};

export async function purchaseView(deps: Deps, row: store.PurchaseRow): Promise<PurchaseView> {
  const { currency, decimals } = currencyOf(await deps.ledger.tokens(), row.token);
  return {
    purchaseId: row.id,
    productId: row.productId,
    productTitle: row.productTitle,
    walletAddress: row.wallet,
    txHash: row.txHash,
    amount: formatAmount(row.amount, decimals),
    currency,
    network: row.network,
    purchasedAt: toIso(row.purchasedAt),
    ...(row.expiresAt === null ? {} : { expiresAt: toIso(row.expiresAt) }),
  };
}

export type AccessAnswer = { hasAccess: true; txHash: string; purchasedAt: string; expiresAt?: string } | { hasAccess: false; paymentUrl: string };

/**
 * POST /public/access/check. An access pass grants access until its purchase expires; a feature unlock
 * until its token is revoked or expires. Archived products keep the access already sold.
 */
export function checkAccess(deps: Deps, owner: string, productId: string, walletAddress: string): AccessAnswer {
  if (!isAddress(walletAddress)) throw fieldError("walletAddress", "walletAddress must be a base58 address of 32 bytes", {}, "INVALID_ADDRESS");
  const product = ownedProductKind(deps, owner, productId);
  const now = deps.clock.now();
  // Only a purchase paid on this server's network grants access (one served on several before migration 35
  // may hold another's: a localnet purchase is play money).
  const network = clusterName(deps.config.network);
  const purchase =
    product.type === "feature_unlock"
      ? store.findTokenAccessPurchase(deps.db, product.id, walletAddress, now, network)
      : store.findAccessPurchase(deps.db, product.id, walletAddress, now, network);
  if (purchase === null) return { hasAccess: false, paymentUrl: `${deps.baseUrl}/pay/${product.id}?wallet=${encodeURIComponent(walletAddress)}` };
  return {
    hasAccess: true,
    txHash: purchase.txHash,
    purchasedAt: toIso(purchase.purchasedAt),
    ...(purchase.expiresAt === null ? {} : { expiresAt: toIso(purchase.expiresAt) }),
  };
}

/** A transaction signature: base58 of 64 bytes. */
export function isTxHash(text: string): boolean {
  if (text.length < 64 || text.length > 88) return false;
  return decodeBase58(text)?.length === 64;
}

export type Verification =
  | ({ valid: true; txHash: string } & Omit<PurchaseView, "purchaseId" | "txHash" | "expiresAt">)
  | { valid: false; txHash: string; error: string };

/**
 * GET /public/verify/:txHash: a purchase of this owner's, or why not (another owner's looks like any
 * non-payment). `recordPayment`: asked of a confirmed transaction with no purchase of the owner's (a payment
 * the buyer sent itself, not recorded yet), to record it if it pays one of the owner's checkouts; true when
 * it did. Without it such a transaction reads as no payment until /confirm or the watcher records it.
 */
export async function verifyTransaction(
  deps: Deps,
  owner: string,
  txHash: string,
  recordPayment?: (tx: LedgerTransaction) => Promise<boolean>,
): Promise<Verification> {
  if (!isTxHash(txHash)) {
    throw fieldError("txHash", "txHash must be a transaction signature (base58 of 64 bytes)");
  }
  let purchase = await store.findPurchaseByTxHash(deps.db, txHash);
  if (purchase === null || purchase.owner !== owner) {
    const tx = await deps.ledger.getTransaction(txHash);
    if (tx === null) return { valid: false, txHash, error: "transaction not found" };
    if (tx.status === "failed") return { valid: false, txHash, error: "transaction failed" };
    if (recordPayment === undefined || !(await recordPayment(tx))) return { valid: false, txHash, error: "not a payment for your products" };
    purchase = await store.findPurchaseByTxHash(deps.db, txHash);
  }
  if (purchase !== null && purchase.owner === owner) {
    const view = await purchaseView(deps, purchase);
    return {
      valid: true,
      txHash,
      productId: view.productId,
      productTitle: view.productTitle,
      walletAddress: view.walletAddress,
      amount: view.amount,
      currency: view.currency,
      network: view.network,
      purchasedAt: view.purchasedAt,
    };
  }
  return { valid: false, txHash, error: "not a payment for your products" };
}

export async function listPurchases(
  deps: Deps,
  owner: string,
  query: { productId?: string | undefined; limit?: number | undefined; offset?: number | undefined },
): Promise<{ purchases: PurchaseView[]; total: number }> {
  const page = requirePage(query, PURCHASE_LIST_LIMIT);
  if (query.productId !== undefined) ownedProductKind(deps, owner, query.productId); // as listFeatureTokens
  const { rows, total } = await store.listPurchases(deps.db, owner, { productId: query.productId, ...page });
  return { purchases: await Promise.all(rows.map((row) => purchaseView(deps, row))), total };
}

export type Stats = { totalRevenue: number; totalTransactions: number; productCount: number; revenueByCurrency: Record<string, string> };

/**
 * GET /public/stats. totalRevenue is USDC only, as a number of whole USDC (the source document's shape);
 * revenueByCurrency has every currency products can be priced in, as decimal strings.
 */
export async function ownerStats(deps: Deps, owner: string): Promise<Stats> {
  const tokens = (await deps.ledger.tokens()).filter((t) => t.kind === "spl");
  const byToken = await store.revenueByToken(deps.db, owner);
  const revenueByCurrency: Record<string, string> = {};
  for (const token of tokens) {
    const { currency, decimals } = currencyOf(tokens, token.key);
    revenueByCurrency[currency] = formatAmount(byToken.find((r) => r.token === token.key)?.revenue ?? 0n, decimals);
  }
  const usdc = byToken.find((r) => r.token === "usdc")?.revenue ?? 0n;
  return {
    totalRevenue: amountToNumber(usdc, currencyOf(tokens, "usdc").decimals),
    totalTransactions: byToken.reduce((n, r) => n + r.count, 0),
    productCount: await store.countProducts(deps.db, owner),
    revenueByCurrency,
  };
}

/** GET /dashboard/api/stats: the /public/stats numbers and one entry per UTC day, oldest first, today included. */
export async function ownerStatsWithDaily(
  deps: Deps,
  owner: string,
  days: number = STATS_DAYS.default,
): Promise<Stats & { daily: { date: string; revenue: string; transactions: number }[] }> {
  if (!Number.isInteger(days) || days < 1 || days > STATS_DAYS.max) {
    throw fieldError("days", `days must be a whole number from 1 to ${STATS_DAYS.max}`);
  }
  const today = Math.floor(deps.clock.now() / DAY_MS);
  const first = today - days + 1;
  const rows = await store.dailyRevenue(deps.db, owner, first * DAY_MS);
  const usdcDecimals = currencyOf(await deps.ledger.tokens(), "usdc").decimals;
  const daily = Array.from({ length: days }, (_, i) => {
    const day = first + i;
    const ofDay = rows.filter((r) => r.day === day);
    const usdc = ofDay.find((r) => r.token === "usdc")?.revenue ?? 0n;
    return {
      date: toIso(day * DAY_MS).slice(0, 10),
      revenue: formatAmount(usdc, usdcDecimals), // an amount: a decimal string (spec/README.md), as prices are
      transactions: ofDay.reduce((n, r) => n + r.count, 0),
    };
  });
  return { ...(await ownerStats(deps, owner)), daily };
}
