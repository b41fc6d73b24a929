// SQL of marketplace orders and the escrow wallet of each network.
import type { Db } from "../../db/open.ts";
import { joinSum, splitSum } from "../../db/sum.ts";

export const ORDER_STATUSES = [
  "proposed", "declined", "withdrawn", "paid", "delivered", "completed", "cancelled", "expired", "disputed", "refunded",
  "paying", "releasing", "refunding",
] as const;
export type OrderStatus = (typeof ORDER_STATUSES)[number];

export type OrderRow = {
  id: string;
  conversationId: string;
  agentId: string;
  consumerWallet: string;
  providerWallet: string;
  serviceId: string | null;
  description: string;
  price: string;
  amount: bigint;
  token: string;
  deliveryTimeMin: number;
  status: OrderStatus;
  dueAt: number | null;
  deadline: number | null;
  escrowTx: string | null;
  releaseTx: string | null;
  refundTx: string | null;
  feeAmount: bigint | null;
  /** The fee terms the order was paid under (MARKETPLACE_FEE_*); null before payment, and for orders paid before migration 25. */
  feeBps: number | null;
  feeWallet: string | null;
  result: string | null;
  rating: number | null;
  review: string | null;
  reason: string | null;
  offerHash: string | null;
  /** When the offer in offerHash was handed out; null without one. */
  offeredAt: number | null;
  /** The offer's unsigned transaction (handed out again while it can land); null for offers before migration 21. */
  offerWire: Uint8Array | null;
  /** When the provider asked to withdraw while an offer could still land: no new offer is made after it. */
  withdrawRequestedAt: number | null;
  pendingMove: string | null;
  pendingFrom: OrderStatus | null;
  pendingTx: string | null;
  pendingWire: Uint8Array | null;
  pendingValidHeight: number | null;
  createdAt: number;
  updatedAt: number;
};

const COLUMNS = `id, conversation_id AS conversationId, agent_id AS agentId, consumer_wallet AS consumerWallet,
  provider_wallet AS providerWallet, service_id AS serviceId, description, price, CAST(amount AS TEXT) AS amount, token,
  delivery_time_min AS deliveryTimeMin, status, due_at AS dueAt, deadline, escrow_tx AS escrowTx, release_tx AS releaseTx,
  refund_tx AS refundTx, CAST(fee_amount AS TEXT) AS feeAmount, fee_bps AS feeBps, fee_wallet AS feeWallet, result, rating, review, reason, offer_hash AS offerHash, offered_at AS offeredAt, offer_wire AS offerWire, withdraw_requested_at AS withdrawRequestedAt,
  pending_move AS pendingMove, pending_from AS pendingFrom, pending_tx AS pendingTx, pending_wire AS pendingWire,
  pending_valid_height AS pendingValidHeight, created_at AS createdAt, updated_at AS updatedAt`;

type RawOrder = Omit<OrderRow, "amount" | "feeAmount"> & { amount: string; feeAmount: string | null };
const toRow = (raw: RawOrder): OrderRow => ({ ...raw, amount: BigInt(raw.amount), feeAmount: raw.feeAmount === null ? null : BigInt(raw.feeAmount) });

/** A new order; with provider_create_order's `idempotencyKey`, kept on it (one order per provider and key). */
export function insertOrderInWrite(db: Db, row: OrderRow, idempotencyKey: string | null = null): void {
  db.sqlite
    .query(
      `INSERT INTO market_orders (id, conversation_id, agent_id, consumer_wallet, provider_wallet, service_id, description, price,
         amount, token, delivery_time_min, status, due_at, deadline, created_at, updated_at, idempotency_key)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    )
    .run(
      row.id, row.conversationId, row.agentId, row.consumerWallet, row.providerWallet, row.serviceId, row.description, row.price,
      row.amount.toString(), row.token, row.deliveryTimeMin, row.status, row.dueAt, row.deadline, row.createdAt, row.updatedAt,
      idempotencyKey,
    );
}

/** The order a provider proposed under an idempotency key; null when none. */
export function findOrderByKeyInWrite(db: Db, providerWallet: string, idempotencyKey: string): OrderRow | null {
  const raw = db.sqlite
    .query(`SELECT ${COLUMNS} FROM market_orders WHERE provider_wallet = ? AND idempotency_key = ?`)
    .get(providerWallet, idempotencyKey) as RawOrder | null;
  return raw === null ? null : toRow(raw);
}

export function findOrderInWrite(db: Db, id: string): OrderRow | null {
  const raw = db.sqlite.query(`SELECT ${COLUMNS} FROM market_orders WHERE id = ?`).get(id) as RawOrder | null;
  return raw === null ? null : toRow(raw);
}

export async function findOrder(db: Db, id: string): Promise<OrderRow | null> {
  return findOrderInWrite(db, id);
}

/** The fields a transition may change. */
export type OrderChange = Partial<
  Pick<
    OrderRow,
    | "status" | "dueAt" | "deadline" | "escrowTx" | "releaseTx" | "refundTx" | "feeAmount" | "feeBps" | "feeWallet" | "result" | "rating" | "review" | "reason"
    | "token" | "amount" | "offerHash" | "offeredAt" | "offerWire" | "withdrawRequestedAt" | "pendingMove" | "pendingFrom" | "pendingTx" | "pendingWire" | "pendingValidHeight"
  >
>;

const CHANGE_COLUMNS: Record<keyof OrderChange, string> = {
  status: "status", dueAt: "due_at", deadline: "deadline", escrowTx: "escrow_tx", releaseTx: "release_tx", refundTx: "refund_tx",
  feeAmount: "fee_amount", feeBps: "fee_bps", feeWallet: "fee_wallet", result: "result", rating: "rating", review: "review", reason: "reason", token: "token", amount: "amount",
  offerHash: "offer_hash", offeredAt: "offered_at", offerWire: "offer_wire", withdrawRequestedAt: "withdraw_requested_at", pendingMove: "pending_move", pendingFrom: "pending_from", pendingTx: "pending_tx", pendingWire: "pending_wire",
  pendingValidHeight: "pending_valid_height",
};

/**
 * Moves the order from `from` with `change` inside the caller's write: one conditional UPDATE, so of two
 * racing transitions exactly one applies. False when it is no longer in `from` — or, with `offerHash`
 * given, when its escrow offer is no longer that one (null: none) — so the caller's look is out of date.
 */
export function transitionInWrite(db: Db, id: string, from: OrderStatus, change: OrderChange, now: number, offerHash?: string | null): boolean {
  const keys = Object.keys(change) as (keyof OrderChange)[];
  const sets = keys.map((k) => `${CHANGE_COLUMNS[k]} = ?`);
  const values = keys.map((k) => {
    const v = change[k];
    return typeof v === "bigint" ? v.toString() : (v ?? null);
  });
  const sameOffer = offerHash === undefined ? "" : " AND offer_hash IS NOT DISTINCT FROM ?";
  const result = db.sqlite
    .query(`UPDATE market_orders SET ${[...sets, "updated_at = ?"].join(", ")} WHERE id = ? AND status = ?${sameOffer}`)
    .run(...values, now, id, from, ...(offerHash === undefined ? [] : [offerHash]));
  return result.changes === 1;
}

export type OrderQuery = { wallet: string; side: "consumer" | "provider"; status: OrderStatus | null; limit: number; offset: number };

export async function listOrders(db: Db, q: OrderQuery): Promise<{ rows: OrderRow[]; total: number }> {
  const column = q.side === "consumer" ? "consumer_wallet" : "provider_wallet";
  const where = `${column} = ?${q.status === null ? "" : " AND status = ?"}`;
  const args = q.status === null ? [q.wallet] : [q.wallet, q.status];
  const rows = (db.sqlite.query(`SELECT ${COLUMNS} FROM market_orders WHERE ${where} ORDER BY created_at DESC, id DESC LIMIT ? OFFSET ?`)
    .all(...args, q.limit, q.offset) as RawOrder[]).map(toRow);
  const { n } = db.sqlite.query(`SELECT COUNT(*) AS n FROM market_orders WHERE ${where}`).get(...args) as { n: number };
  return { rows, total: n };
}

/** The conversation's newest `limit` orders, oldest first, and how many it has in all. */
export async function ordersOfConversation(db: Db, conversationId: string, limit: number): Promise<{ rows: OrderRow[]; total: number }> {
  return db.read(() => {
    const newest = db.sqlite.query(`SELECT ${COLUMNS} FROM market_orders WHERE conversation_id = ? ORDER BY created_at DESC, id DESC LIMIT ?`).all(conversationId, limit) as RawOrder[];
    const { n } = db.sqlite.query("SELECT COUNT(*) AS n FROM market_orders WHERE conversation_id = ?").get(conversationId) as { n: number };
    return { rows: newest.reverse().map(toRow), total: n };
  });
}

/** The order other than `exceptId` that `escrowTx` already paid, if any: one escrow payment pays one order. */
export function orderPaidByInWrite(db: Db, escrowTx: string, exceptId: string): string | null {
  const row = db.sqlite.query("SELECT id FROM market_orders WHERE escrow_tx = ? AND id <> ? LIMIT 1").get(escrowTx, exceptId) as { id: string } | null;
  return row?.id ?? null;
}

/** Orders whose current state ends by itself at or before `now`, oldest first. */
/**
 * Up to `limit` orders whose due time has passed, those that move money first (paid: the deadline's refund;
 * delivered: the auto-release), then proposals to expire, each oldest first: however many proposals fall
 * due, none holds back a consumer's refund or a provider's payment.
 */
export async function dueOrders(db: Db, now: number, limit: number): Promise<OrderRow[]> {
  const due = (statuses: string, n: number) =>
    (db.sqlite.query(
      `SELECT ${COLUMNS} FROM market_orders
       WHERE due_at IS NOT NULL AND due_at <= ? AND status IN (${statuses}) AND (payout_retry_at IS NULL OR payout_retry_at <= ?)
       ORDER BY due_at LIMIT ?`,
    ).all(now, now, n) as RawOrder[]).map(toRow);
  return db.read(() => {
    const money = due("'paid', 'delivered'", limit);
    return money.length >= limit ? money : [...money, ...due("'proposed'", limit - money.length)];
  });
}

/**
 * Whether the order timers have anything to do: an order due by `now`, or one whose escrow transaction is in
 * flight. Two index lookups; most rounds of most servers find nothing, and the timers' module (web3.js with it)
 * is then not loaded.
 */
export async function hasTimerWork(db: Db, now: number): Promise<boolean> {
  return db.read(
    () =>
      db.sqlite.query("SELECT 1 FROM market_orders WHERE due_at IS NOT NULL AND due_at <= ? LIMIT 1").get(now) !== null ||
      db.sqlite.query("SELECT 1 FROM market_orders WHERE pending_tx IS NOT NULL LIMIT 1").get() !== null,
  );
}

/** A due payout that waits (for its recipient's token account) is not looked at again before `at`. */
export async function holdPayout(db: Db, id: string, status: OrderStatus, at: number): Promise<boolean> {
  return db.write(() => db.sqlite.query("UPDATE market_orders SET payout_retry_at = ? WHERE id = ? AND status = ?").run(at, id, status).changes === 1);
}

/**
 * Moves the held payouts' next looks back by a step back of the wall clock (`stepMs` < 0) detected at `now`,
 * as webhook retries move (moveBackPendingDeliveries). One write: payout_retry_at has no index (holds are
 * rare; ~64 ms over 500,000 orders).
 */
export async function moveBackPayoutHolds(db: Db, stepMs: number, now: number): Promise<number> {
  if (!(stepMs < 0)) return 0;
  return db.write(
    () =>
      db.sqlite
        .query(
          `UPDATE market_orders SET payout_retry_at = CASE WHEN payout_retry_at + ? > ? THEN payout_retry_at + ? ELSE ? END
           WHERE payout_retry_at > ?`,
        )
        .run(stepMs, now, stepMs, now, now).changes,
  );
}

/** Proposals still open in a conversation. */
export function openProposalsInWrite(db: Db, conversationId: string): number {
  return (db.sqlite.query("SELECT COUNT(*) AS n FROM market_orders WHERE conversation_id = ? AND status = 'proposed'").get(conversationId) as { n: number }).n;
}

/** Orders with an escrow transaction in flight (RPC networks) recorded at or before `recordedBefore`, oldest first. */
export async function pendingOrders(db: Db, recordedBefore: number, limit: number): Promise<OrderRow[]> {
  return (db.sqlite.query(`SELECT ${COLUMNS} FROM market_orders WHERE pending_tx IS NOT NULL AND updated_at <= ? ORDER BY updated_at LIMIT ?`)
    .all(recordedBefore, limit) as RawOrder[]).map(toRow);
}

/** Sum of base units per token held for orders in escrow (paid, delivered, disputed, and leaving it: releasing, refunding). */
export async function escrowedTotals(db: Db): Promise<Record<string, bigint>> {
  const rows = db.sqlite
    .query(`SELECT token, ${splitSum("amount", "total")} FROM market_orders WHERE status IN ('paid', 'delivered', 'disputed', 'releasing', 'refunding') GROUP BY token`)
    .all() as { token: string; totalHigh: string; totalLow: string }[];
  return Object.fromEntries(rows.map((r) => [r.token, joinSum(r.totalHigh, r.totalLow)]));
}

export async function findEscrow(db: Db, network: string): Promise<string | null> {
  return (db.sqlite.query("SELECT address FROM market_escrow WHERE network = ?").get(network) as { address: string } | null)?.address ?? null;
}

/** Records the network's escrow address unless one exists; returns the one that stands. */
export function saveEscrow(db: Db, network: string, address: string, now: number): Promise<string> {
  return db.write(() => {
    db.sqlite.query("INSERT INTO market_escrow (network, address, created_at) VALUES (?, ?, ?) ON CONFLICT (network) DO NOTHING").run(network, address, now);
    return (db.sqlite.query("SELECT address FROM market_escrow WHERE network = ?").get(network) as { address: string }).address;
  });
}
