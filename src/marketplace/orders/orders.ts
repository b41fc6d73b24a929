// Marketplace orders (marketplace.md "Order states"): the state machine, each transition one conditional
// UPDATE in one database write together with the escrow transfer it causes, and the timers that end
// proposals, missed deadlines and unanswered deliveries.
import type { Deps } from "../../deps.ts";
import { headWithin } from "../../lib/fit.ts";
import { AppError, amountField, invalidField, reasonOf, textField, requirePage } from "../../errors.ts";
import { formatAmount, parseAmount } from "../../lib/amounts.ts";
import { DAY_MS, toIso } from "../../lib/clock.ts";
import { newId } from "../../lib/ids.ts";
import { encodeBase64 } from "../../lib/encoding.ts";
import { blockhashExpiresAt, waitsForFinality, type ParsedTransfer } from "../../ledger/ledger.ts";
import { landingHeightLimit } from "../../ledger/landing.ts";
import { parseTransaction } from "../../ledger/transactions.ts";
import { RECIPIENT_ACCOUNT_MISSING, escrowPayment, escrowPayout, offerPays, offerSearchReadsHistory, offerToken, requireExactTransfer, sentOffer, transfersOfWire } from "./escrow.ts";
import { conversationParties, orderCompletedInWrite, orderEventInWrite, providerMessageInWrite, systemMessageInWrite } from "./parties.ts";
import { currencyToken } from "../../paygate/products.ts";
import { AGENT_LIMITS, usdcToken } from "../agents.ts";
import type { AgentEventType } from "../events.ts";
import { fundsShortfall } from "../../wallets/funds.ts";
import * as store from "./store.ts";

export const PROPOSAL_TTL_MS = DAY_MS;
export const AUTO_RELEASE_MS = 3 * DAY_MS;
/** How long a due payout waiting for its recipient's token account waits before it is looked at again. */
export const PAYOUT_WAIT_MS = 60 * 60_000;
/** An order's delivery time, as an agent's service's: at most a year of minutes. */
export const MAX_DELIVERY_MIN = AGENT_LIMITS.deliveryTime;
/**
 * How long after an offer to a connected consumer (an unsigned escrow transfer) its transaction may still
 * land, finalized on mainnet: its blockhash lives ~150 blocks (60–90 s), with room to spare. A proposal with
 * an offer younger than this is not expired yet: a transfer sent at the last moment is found first.
 */
export const OFFER_LANDING_MS = 3 * 60_000;
/**
 * How long past its expiry a proposal with an offer waits for the ledger to show whether it was sent. Then it
 * expires (logged) rather than hold one of the timer's places for ever.
 */
export const OFFER_SEARCH_GRACE_MS = 60 * 60_000;
/**
 * How many expiring proposals' offers one round of the timers looks for. An offer's look lists its reference
 * and reads what carries it (a request or two on devnet/mainnet, at most ~21); an offer made before references
 * reads its consumer's history (up to ~1,000 requests) and is the round's last look. The others wait for the
 * next rounds: an expired proposal is refused as expired meanwhile, and refunds and releases come first.
 */
export const OFFER_SEARCHES_PER_ROUND = 10;
const MAX_TEXT = 4000;

export type OrderView = {
  orderId: string;
  conversationId: string;
  agentId: string;
  consumerWallet: string;
  providerWallet: string;
  serviceId: string | null;
  description: string;
  price: string;
  token: string;
  deliveryTime: number;
  status: store.OrderStatus;
  deadline: string | null;
  escrowTx: string | null;
  releaseTx: string | null;
  refundTx: string | null;
  result: string | null;
  rating: number | null;
  review: string | null;
  createdAt: string;
  updatedAt: string;
};

export function orderView(row: store.OrderRow): OrderView {
  return {
    orderId: row.id,
    conversationId: row.conversationId,
    agentId: row.agentId,
    consumerWallet: row.consumerWallet,
    providerWallet: row.providerWallet,
    serviceId: row.serviceId,
    description: row.description,
    price: row.price,
    token: row.token,
    deliveryTime: row.deliveryTimeMin,
    status: row.status,
    deadline: row.deadline === null ? null : toIso(row.deadline),
    escrowTx: row.escrowTx,
    releaseTx: row.releaseTx,
    refundTx: row.refundTx,
    result: row.result,
    rating: row.rating,
    review: row.review,
    createdAt: toIso(row.createdAt),
    updatedAt: toIso(row.updatedAt),
  };
}

type Side = "consumer" | "provider";

const notFound = () => new AppError("NOT_FOUND", "no such order");
const wrongState = (row: store.OrderRow, action: string) => new AppError("INVALID_STATE", `cannot ${action} an order that is ${row.status}`);

/** textField, with null for an optional text left empty. */
function checkText(value: string | undefined, field: string, max: number, required: boolean): string | null {
  const text = textField(value, field, max, required);
  return text === "" ? null : text;
}

/** The order as `wallet` may see it, acting as `side`: a stranger hears NOT_FOUND, the other side FORBIDDEN. */
async function orderFor(deps: Deps, orderId: string, wallet: string, side: Side): Promise<store.OrderRow> {
  const row = await store.findOrder(deps.db, orderId);
  if (row === null) throw notFound();
  const isConsumer = row.consumerWallet === wallet;
  const isProvider = row.providerWallet === wallet;
  if (!isConsumer && !isProvider) throw notFound();
  if ((side === "consumer" && !isConsumer) || (side === "provider" && !isProvider)) {
    throw new AppError("FORBIDDEN", side === "consumer" ? "only the order's consumer can do this" : "only the order's provider can do this");
  }
  return row;
}

/** Runs one transition in its own write (no money moves); INVALID_STATE when a racing change came first. */
async function transition(
  deps: Deps,
  row: store.OrderRow,
  action: string,
  change: store.OrderChange | ((now: number) => store.OrderChange),
  also?: () => void,
): Promise<store.OrderRow> {
  const now = deps.clock.now();
  // A proposal ends only under the offer it was looked at with (settleOfferBeforeEnding, the timer): one
  // offered meanwhile may be paid, and ending the order would strand that payment in escrow.
  const offer = row.status === "proposed" ? row.offerHash : undefined;
  return deps.db.write(() => {
    if (!store.transitionInWrite(deps.db, row.id, row.status, typeof change === "function" ? change(now) : change, now, offer)) {
      const current = store.findOrderInWrite(deps.db, row.id)!;
      if (current.status === row.status) throw new AppError("INVALID_STATE", `the consumer was offered the escrow transfer meanwhile: ${action} again`);
      throw wrongState(current, action);
    }
    also?.();
    return store.findOrderInWrite(deps.db, row.id)!;
  });
}

export type CreateOrderInput = {
  conversationId: string;
  serviceId?: string | undefined;
  description: string;
  price: string | number;
  deliveryTime: number;
  /** The provider's own key for this one proposal: a retry with it answers the order it made (README). */
  idempotencyKey?: string | undefined;
};

/** Proposals open at once in one conversation: a consumer is not to be buried in them (nor the expiry timer). */
export const MAX_OPEN_PROPOSALS = 20;

/**
 * provider_create_order: a proposal in the conversation, open for 24 hours. With an `idempotencyKey` the
 * provider used before, the order it made then, as it stands now (whatever became of it), and nothing new;
 * the key asking for another proposal is VALIDATION_ERROR.
 */
export async function createOrder(deps: Deps, wallet: string, input: CreateOrderInput): Promise<OrderView> {
  const parties = await conversationParties(deps, input.conversationId);
  if (parties === null || (parties.consumerWallet !== wallet && parties.providerWallet !== wallet)) {
    throw new AppError("NOT_FOUND", "no such conversation");
  }
  if (parties.providerWallet !== wallet) throw new AppError("FORBIDDEN", "only the agent's provider can propose an order");
  const description = checkText(input.description, "description", MAX_TEXT, true)!;
  const usdc = await usdcToken(deps);
  const price = amountField(input.price, usdc.decimals, "price");
  if (!Number.isInteger(input.deliveryTime) || input.deliveryTime < 1 || input.deliveryTime > MAX_DELIVERY_MIN) {
    throw invalidField("deliveryTime", `whole minutes from 1 to ${MAX_DELIVERY_MIN}`);
  }
  const now = deps.clock.now();
  const row: store.OrderRow = {
    id: newId("ord", deps.random),
    conversationId: input.conversationId,
    agentId: parties.agentId,
    consumerWallet: parties.consumerWallet,
    providerWallet: parties.providerWallet,
    serviceId: input.serviceId ?? null,
    description,
    price: formatAmount(price, usdc.decimals),
    amount: price,
    token: "usdc",
    deliveryTimeMin: input.deliveryTime,
    status: "proposed",
    dueAt: now + PROPOSAL_TTL_MS,
    deadline: null,
    escrowTx: null, releaseTx: null, refundTx: null, feeAmount: null, feeBps: null, feeWallet: null,
    result: null, rating: null, review: null, reason: null, offerHash: null, offeredAt: null, offerWire: null, withdrawRequestedAt: null,
    pendingMove: null, pendingFrom: null, pendingTx: null, pendingWire: null, pendingValidHeight: null,
    createdAt: now,
    updatedAt: now,
  };
  const key = input.idempotencyKey ?? null;
  const made = await deps.db.write(() => {
    const kept = key === null ? null : store.findOrderByKeyInWrite(deps.db, wallet, key);
    if (kept !== null) {
      if (!sameProposal(kept, row)) {
        throw invalidField("idempotencyKey", `this key proposed another order (${kept.id}); give a new key for a new proposal`);
      }
      return kept;
    }
    // After the key: a proposal retried with its key is answered even if its service was removed since.
    if (input.serviceId !== undefined && !parties.serviceIds.includes(input.serviceId)) throw invalidField("serviceId", "not a service of this agent");
    if (store.openProposalsInWrite(deps.db, input.conversationId) >= MAX_OPEN_PROPOSALS) {
      throw new AppError("INVALID_STATE", `a conversation holds at most ${MAX_OPEN_PROPOSALS} open proposals: withdraw one, or wait for an answer`);
    }
    store.insertOrderInWrite(deps.db, row, key);
    systemMessageInWrite(deps, row, `Order proposed: ${description} — ${row.price} USDC, delivery within ${row.deliveryTimeMin} minutes.`);
    return row;
  });
  return orderView(made);
}

/** Whether a kept order is the proposal asked for again: its conversation, service, text, price and delivery time. */
function sameProposal(kept: store.OrderRow, asked: store.OrderRow): boolean {
  return (
    kept.conversationId === asked.conversationId &&
    kept.serviceId === asked.serviceId &&
    kept.description === asked.description &&
    kept.price === asked.price &&
    kept.deliveryTimeMin === asked.deliveryTimeMin
  );
}

/**
 * Before a proposal ends by withdraw or decline: a connected consumer may have signed and sent the escrow
 * transfer offered to it without presenting it. Ending the proposal then would strand that payment in
 * escrow. So the offer is looked for first (as the expiry timer does): found, the order is paid (and the
 * action refused); while it could still land, the action waits.
 */
async function settleOfferBeforeEnding(deps: Deps, row: store.OrderRow, action: string, beforeWaiting?: () => Promise<void>): Promise<void> {
  if (row.offerHash === null) return;
  const outcome = await sentOfferOutcome(deps, row);
  if (outcome === "paid") throw new AppError("INVALID_STATE", `the consumer paid the offered escrow transfer: the order is paid, and cannot ${action}`);
  if (outcome === "wait") {
    await beforeWaiting?.();
    const wait = secondsUntilLanded(deps, row);
    throw new AppError("INVALID_STATE", `the escrow transfer offered to the consumer may still land: ${action} again in ${wait} s`, { retryAfter: wait });
  }
}

/** A proposal past its 24 hours ends as expired (the timer, after looking for a paid offer), whatever else is asked. */
function refuseExpiredProposal(deps: Deps, row: store.OrderRow): void {
  if (row.dueAt !== null && row.dueAt <= deps.clock.now()) throw new AppError("INVALID_STATE", "the proposal has expired");
}

/** The moment an offer can no longer land (OFFER_LANDING_MS after it was made). */
const offerLandedBy = (row: store.OrderRow) => row.offeredAt! + OFFER_LANDING_MS;
/** Whole seconds until an offer can no longer land (at least 1: said as a wait). */
const secondsUntilLanded = (deps: Deps, row: store.OrderRow) => Math.max(1, Math.ceil((offerLandedBy(row) - deps.clock.now()) / 1000));

/**
 * A signed offer presented after its blockhash expired (the ledger's own words say "build the transaction
 * again"), worded in this tool's terms: ask again without signedTransaction, once the offer can no longer
 * land (until then asking again is told to wait, since a copy of it may still be sent).
 */
function presentedTooLate(deps: Deps, row: store.OrderRow, err: unknown): unknown {
  const reason = reasonOf(err);
  if (!(err instanceof AppError) || err.code !== "TRANSACTION_REJECTED" || (reason !== "blockhash_expired" && reason !== "blockhash_not_found")) return err;
  const late = "the escrow transfer's blockhash expired before it was presented (an offer lives about a minute)";
  // While a withdraw waits no new offer is made: asking again would only hear so.
  if (row.withdrawRequestedAt !== null) {
    return new AppError("TRANSACTION_REJECTED", `${late}, and the provider is withdrawing this proposal: no new one is offered`, { details: { reason } });
  }
  const wait = row.offeredAt !== null && offerMayLand(deps, row) ? secondsUntilLanded(deps, row) : null;
  return new AppError(
    "TRANSACTION_REJECTED",
    `${late}: call consumer_accept_order again ` +
      (wait === null ? "without signedTransaction for a new one" : `without signedTransaction in ${wait} s for a new one (until then the old one may still land)`),
    { details: { reason }, ...(wait === null ? {} : { retryAfter: wait }) },
  );
}
/** Whether an offer may still land: until then the ledger is not asked for it ("wait"). */
const offerMayLand = (deps: Deps, row: store.OrderRow) => deps.clock.now() < offerLandedBy(row);

export async function withdrawOrder(deps: Deps, wallet: string, orderId: string): Promise<OrderView> {
  const row = await orderFor(deps, orderId, wallet, "provider");
  if (row.status !== "proposed") throw wrongState(row, "withdraw");
  refuseExpiredProposal(deps, row);
  // Kept: a consumer asking for a new offer each time the last one runs out would otherwise hold this off until expiry.
  const requestWithdraw = async () => {
    if (row.withdrawRequestedAt !== null) return;
    const now = deps.clock.now();
    await deps.db.write(() => store.transitionInWrite(deps.db, row.id, "proposed", { withdrawRequestedAt: now }, now));
  };
  await settleOfferBeforeEnding(deps, row, "withdraw", requestWithdraw);
  return orderView(await transition(deps, row, "withdraw", { status: "withdrawn", dueAt: null }, () => systemMessageInWrite(deps, row, "The provider withdrew the order.")));
}

export async function declineOrder(deps: Deps, wallet: string, orderId: string, reason?: string): Promise<OrderView> {
  const row = await orderFor(deps, orderId, wallet, "consumer");
  if (row.status !== "proposed") throw wrongState(row, "decline");
  refuseExpiredProposal(deps, row);
  const why = checkText(reason, "reason", 1000, false);
  await settleOfferBeforeEnding(deps, row, "decline");
  return orderView(
    await transition(deps, row, "decline", { status: "declined", dueAt: null, reason: why }, () => {
      systemMessageInWrite(deps, row, why === null ? "The consumer declined the order." : `The consumer declined the order: ${why}`);
      orderEventInWrite(deps, row, "order.declined", { reason: why });
    }),
  );
}

/** `offered`: the token key of the offer already out, which a consumer that sent it presents. */
const withdrawing = (offered: string | null = null) =>
  new AppError(
    "INVALID_STATE",
    "the provider is withdrawing this proposal: no new escrow transfer is offered for it" +
      (offered === null ? "" : ` (if you sent the one offered before, present it with signedTransaction and paymentMethod "${offered}": it pays the order)`),
  );

/** `expiresAt`: about when the offered transaction's blockhash stops being accepted (sign and present it before). */
export type AcceptResult = { order: OrderView } | { order: OrderView; unsignedTransaction: string; expiresAt: string };

/**
 * consumer_accept_order: pays the price into escrow. A custodial consumer's wallet signs here; a
 * connected one gets the transfer unsigned and calls again with `signedTransaction`. The payment and the
 * move to `paid` commit together: of two racing accepts one pays, the other hears INVALID_STATE and pays nothing.
 */
export async function acceptOrder(
  deps: Deps,
  wallet: string,
  input: { orderId: string; conversationId: string; paymentMethod: string; signedTransaction?: string | undefined },
): Promise<AcceptResult> {
  const row = await orderFor(deps, input.orderId, wallet, "consumer");
  if (row.conversationId !== input.conversationId) throw notFound();
  if (row.status !== "proposed") throw wrongState(row, "accept");
  refuseExpiredProposal(deps, row);
  const token = await currencyToken(deps, input.paymentMethod, "paymentMethod");
  // The price is written in USDC; paid in the service token it is the same number of whole tokens.
  const parsed = parseAmount(row.price, token.decimals);
  if ("error" in parsed) throw invalidField("paymentMethod", `the price ${row.price} cannot be paid in ${token.key}: ${parsed.error}`);
  // Asked again for the offer (a retry, a second tab): the offer already made, while it can still land — two
  // different transfers, both signed and sent, would pay twice for one order. Once it cannot, whether it
  // landed decides: the order is paid, or a new offer is made.
  if (input.signedTransaction === undefined && row.offerHash !== null) {
    // While a withdraw waits no new offer is made, so the ledger is not asked for the old one here: each ask
    // would cost RPC requests again. The withdraw and the expiry timer look for it (and a
    // consumer that sent it presents it with signedTransaction); the offer stays recorded for them.
    const again = await offerAgain(deps, row, token.key, parsed.value, row.withdrawRequestedAt === null);
    if (again !== null) return again;
  }
  if (input.signedTransaction === undefined && row.withdrawRequestedAt !== null) throw withdrawing(row.offerHash === null ? null : offerToken(row.offerHash));
  const builtAt = deps.clock.now();
  const payment = await escrowPayment(deps, { from: wallet, token: token.key, amount: parsed.value, signed: input.signedTransaction, offerHash: row.offerHash, offerWire: row.offerWire });
  if (payment.kind === "unsigned") {
    // Recorded before it is handed out, and only while the order is still proposed (and under the offer
    // looked at above): a transfer handed out for an order withdrawn, declined or expired meanwhile would be
    // paid into escrow for nothing.
    const now = deps.clock.now();
    const offered = await deps.db.write(() => {
      // A withdraw asked for since the order was read: no new offer (it would start a new window).
      if (store.findOrderInWrite(deps.db, row.id)?.withdrawRequestedAt != null) return "withdrawing" as const;
      return store.transitionInWrite(deps.db, row.id, "proposed", { offerHash: payment.offerHash, offeredAt: now, offerWire: payment.wire }, now, row.offerHash);
    });
    if (offered === "withdrawing") throw withdrawing();
    if (!offered) {
      // Another request made its offer first (two at once): that one is the offer.
      const current = (await store.findOrder(deps.db, row.id))!;
      const again =
        current.status === "proposed" && current.offerHash !== null ? await offerAgain(deps, current, token.key, parsed.value, current.withdrawRequestedAt === null) : null;
      if (again === null) throw wrongState(current, "accept");
      return again;
    }
    return { order: orderView(row), unsignedTransaction: payment.transaction, expiresAt: blockhashExpiresAt(builtAt) };
  }
  const move: Move = { kind: "accept", token: token.key, amount: parsed.value.toString() };
  // On an RPC network what moved is not seen before the order is recorded paying: what the bytes move is
  // checked instead, backing the offer's hash there as the transfers applied back it on localnet.
  if (deps.config.network !== "localnet") requireExactTransfer(await transfersOfWire(deps, payment.wire, payment.intent), payment.intent);
  const done = await runMove(deps, row, "proposed", "accept", move, payment.wire, (transfers) => requireExactTransfer(transfers, payment.intent)).catch(
    async (err: unknown) => {
      // The ledger's shortfall names token accounts and base units; the consumer's balances say it in tokens.
      if (err instanceof AppError && err.code === "INSUFFICIENT_FUNDS") throw await fundsShortfall(deps, payment.intent, payment.wire, err);
      throw presentedTooLate(deps, row, err);
    },
  );
  return { order: orderView(done) };
}

/**
 * The answer to a connected consumer asking again while an offer is out: that same transaction while its
 * blockhash is valid; the paid order when it landed; null (make a new one) when it can no longer land.
 */
async function offerAgain(deps: Deps, row: store.OrderRow, token: string, amount: bigint, readHistory: boolean): Promise<AcceptResult | null> {
  if (row.offerWire !== null && (await deps.ledger.blockhashValid(parseTransaction(row.offerWire).recentBlockhash))) {
    if (offerPays(row.offerHash!, token, amount)) {
      return { order: orderView(row), unsignedTransaction: encodeBase64(row.offerWire), expiresAt: blockhashExpiresAt(row.offeredAt!) };
    }
    const offered = offerToken(row.offerHash!);
    // While a withdraw waits no new offer follows: asking again would only hear so.
    const wait = secondsUntilLanded(deps, row);
    throw new AppError(
      "INVALID_STATE",
      `an escrow transfer in another currency (paymentMethod "${offered}") was offered and may still land: sign and present it with that paymentMethod` +
        (readHistory ? `, or ask again in ${wait} s` : "; the provider is withdrawing, so no new one is offered"),
      readHistory ? { retryAfter: wait } : {},
    );
  }
  // While it may still land, "wait" from the time alone: the ledger is asked once it cannot (asks in that
  // window would otherwise each cost RPC requests); not at all when `readHistory`
  // is false (null: no new offer follows, and whoever ends the order reads it).
  const outcome = readHistory || offerMayLand(deps, row) ? await sentOfferOutcome(deps, row) : "none";
  if (outcome === "paid") return { order: orderView((await store.findOrder(deps.db, row.id))!) };
  if (outcome === "wait") {
    const wait = secondsUntilLanded(deps, row); // one reading of the clock: the words and retryAfter agree
    throw new AppError(
      "INVALID_STATE",
      readHistory
        ? `the escrow transfer offered before may still land: present it signed, or ask again in ${wait} s`
        : `the escrow transfer offered before may still land: present it signed (paymentMethod "${offerToken(row.offerHash!)}"); the provider is withdrawing, so no new one is offered`,
      readHistory ? { retryAfter: wait } : {},
    );
  }
  return null;
}

export async function deliverOrder(deps: Deps, wallet: string, input: { orderId: string; result: string; message?: string | undefined }): Promise<OrderView> {
  const row = await orderFor(deps, input.orderId, wallet, "provider");
  if (row.status !== "paid") throw wrongState(row, "deliver");
  if (row.dueAt !== null && row.dueAt <= deps.clock.now()) throw new AppError("INVALID_STATE", "the delivery deadline has passed; the order is refunded");
  const result = checkText(input.result, "result", MAX_TEXT, true)!;
  const message = checkText(input.message, "message", MAX_TEXT, false);
  return orderView(
    await transition(deps, row, "deliver", (now) => ({ status: "delivered", result, dueAt: now + AUTO_RELEASE_MS }), () => {
      systemMessageInWrite(deps, row, "The provider delivered the order.");
      // What the provider wrote with it is its own message (mcp.md: provider_deliver_order's `message`).
      if (message !== null) providerMessageInWrite(deps, row, message);
    }),
  );
}

/**
 * A transition that moves money through the escrow, as data: whoever sees its transaction confirmed (the
 * caller now, or the reconciler after a lost answer or a restart) finishes it the same way.
 */
type Move =
  | { kind: "accept"; token: string; amount: string }
  | { kind: "refund"; to: "cancelled" | "expired" | "refunded"; reason: string | null; note: string; event: AgentEventType | null }
  | { kind: "release"; rating: number | null; review: string | null; note: string; fee: string };

/** The state an order waits in while its escrow transaction is in flight on an RPC network. */
const PENDING: Record<Move["kind"], store.OrderStatus> = { accept: "paying", refund: "refunding", release: "releasing" };
const NOT_PENDING = { pendingMove: null, pendingFrom: null, pendingTx: null, pendingWire: null, pendingValidHeight: null } as const;
/** A recorded transaction is left to the request that sent it for this long before the reconciler looks. */
export const RECONCILE_AFTER_MS = 120_000;
/** Answers after which the transaction certainly did not land. */
const REFUSED = new Set(["TRANSACTION_REJECTED", "INSUFFICIENT_FUNDS", "PAYMENT_MISMATCH", "VALIDATION_ERROR"]);

/**
 * Refusals a transaction already on the ledger gets when sent again: a duplicate (CONFLICT), or its blockhash
 * no longer known or valid (the ledger checks that first), as when a consumer sent its escrow transfer itself
 * and presents it a minute later. Its signature is then looked up before the order is refused.
 */
function mayHaveLanded(err: unknown): boolean {
  if (!(err instanceof AppError)) return false;
  const reason = reasonOf(err);
  return err.code === "CONFLICT" || reason === "blockhash_expired" || reason === "blockhash_not_found";
}

/** One escrow payment pays one order: a transaction that already paid another is PAYMENT_MISMATCH. SYNCHRONOUS, in a write. */
function refuseReusedPayment(deps: Deps, row: store.OrderRow, signature: string): void {
  if (store.orderPaidByInWrite(deps.db, signature, row.id) !== null) {
    throw new AppError("PAYMENT_MISMATCH", "this transaction already paid another order", { details: { reason: "transaction" } });
  }
}

/** The move's final change, message, event and agent counters. SYNCHRONOUS, in the write that finishes it; false when the order was not in `from`. */
function finishInWrite(deps: Deps, row: store.OrderRow, from: store.OrderStatus, move: Move, signature: string): boolean {
  const now = deps.clock.now();
  if (move.kind === "accept") {
    refuseReusedPayment(deps, row, signature);
    const deadline = now + row.deliveryTimeMin * 60_000;
    // The fee is the one in force when the consumer pays, whoever releases the money later.
    const { feeBps, feeWallet } = deps.config.marketplace;
    const change: store.OrderChange = {
      ...NOT_PENDING, status: "paid", token: move.token, amount: BigInt(move.amount), escrowTx: signature, deadline, dueAt: deadline,
      feeBps: feeWallet === null ? 0 : feeBps, feeWallet,
    };
    if (!store.transitionInWrite(deps.db, row.id, from, change, now)) return false;
    systemMessageInWrite(deps, row, `The consumer paid ${row.price} ${move.token.toUpperCase()} into escrow. Deadline: ${toIso(deadline)}.`);
    orderEventInWrite(deps, row, "order.accepted", { escrowTx: signature, deadline: toIso(deadline), price: row.price, token: move.token });
    return true;
  }
  if (move.kind === "refund") {
    const change: store.OrderChange = { ...NOT_PENDING, status: move.to, refundTx: signature, dueAt: null, ...(move.reason === null ? {} : { reason: move.reason }) };
    if (!store.transitionInWrite(deps.db, row.id, from, change, now)) return false;
    systemMessageInWrite(deps, row, move.note);
    // With the reason, as a proposal's expiry carries its own: a provider tells a missed deadline from it.
    if (move.event !== null) orderEventInWrite(deps, row, move.event, { refundTx: signature, ...(move.reason === null ? {} : { reason: move.reason }) });
    return true;
  }
  const change: store.OrderChange = {
    ...NOT_PENDING, status: "completed", releaseTx: signature, feeAmount: BigInt(move.fee), dueAt: null, rating: move.rating, review: move.review,
  };
  if (!store.transitionInWrite(deps.db, row.id, from, change, now)) return false;
  orderCompletedInWrite(deps, row.agentId, move.rating);
  systemMessageInWrite(deps, row, move.note);
  orderEventInWrite(deps, row, "order.completed", { releaseTx: signature, rating: move.rating, review: move.review });
  return true;
}

/**
 * Sends a move's transaction. On the embedded ledger the order change commits in the same write as the
 * transfer (`check` sees what moved first). On an RPC network a chain transaction cannot sit inside a
 * database transaction: the order waits in paying/releasing/refunding with the signed transaction
 * recorded, is finished when the chain confirms it, goes back when the chain refuses it, and is left to
 * the reconciler (runOrderTimers) when the answer is unknown.
 */
async function runMove(
  deps: Deps,
  row: store.OrderRow,
  from: store.OrderStatus,
  action: string,
  move: Move,
  wire: Uint8Array,
  check?: (transfers: readonly ParsedTransfer[]) => void,
): Promise<store.OrderRow> {
  const stale = () => wrongState(store.findOrderInWrite(deps.db, row.id)!, action);
  if (deps.config.network === "localnet") {
    try {
      await deps.ledger.submit(wire, {
        ownTransfer: true,
        alongside: (applied) => {
          check?.(applied.transfers);
          if (!finishInWrite(deps, row, from, move, applied.signature)) throw stale();
        },
      });
    } catch (err) {
      if (!mayHaveLanded(err)) {
        // Refused by the ledger before the order's own check ran (the escrow short because a racing call
        // paid this order out first): the order moved on, and that is the answer (marketplace.md:
        // INVALID_STATE), not the ledger's, whatever else the escrow holds.
        const now = await store.findOrder(deps.db, row.id);
        if (now !== null && now.status !== from) throw wrongState(now, action);
        throw err;
      }
      // The very transaction is already on the ledger (the consumer sent it itself): finish from what it moved.
      const landed = await deps.ledger.getTransaction(parseTransaction(wire).signature);
      if (landed === null || landed.status !== "confirmed") throw err;
      check?.(landed.transfers);
      await deps.db.write(() => {
        if (!finishInWrite(deps, row, from, move, landed.signature)) throw stale();
      });
    }
    return (await store.findOrder(deps.db, row.id))!;
  }
  const signature = parseTransaction(wire).signature;
  // An upper bound of the height until which this transaction can land (landing.ts).
  const validHeight = await landingHeightLimit(deps);
  const pending = PENDING[move.kind];
  await deps.db.write(() => {
    if (move.kind === "accept") refuseReusedPayment(deps, row, signature); // before anything is sent
    const recorded: store.OrderChange = { status: pending, pendingMove: JSON.stringify(move), pendingFrom: from, pendingTx: signature, pendingWire: wire, pendingValidHeight: validHeight };
    if (!store.transitionInWrite(deps.db, row.id, from, recorded, deps.clock.now())) throw stale();
  });
  try {
    await deps.ledger.submit(wire, { ownTransfer: true, finalized: waitsForFinality(deps.config.network) });
  } catch (err) {
    // "Expired" is one node's view of the height: a node behind it may still take the transaction, so it is
    // left to the reconciler, which gives it up only a margin of blocks later (as after a lost answer).
    if (reasonOf(err) === "blockhash_expired") {
      throw new AppError("CHAIN_UNAVAILABLE", `the escrow transaction ${signature} has not landed yet; the order settles by itself once the chain tells`, {
        details: { signature },
      });
    }
    // Already on chain (the consumer broadcast it itself, perhaps before its blockhash ran out): finished
    // below. A refusal goes back to where it was; anything else is the reconciler's.
    const landed = mayHaveLanded(err) ? await deps.ledger.getTransaction(signature) : null;
    if (landed?.status !== "confirmed") {
      if (err instanceof AppError && REFUSED.has(err.code)) await revertMove(deps, row.id, pending, from);
      throw err;
    }
  }
  await deps.db.write(() => {
    // The reconciler may have finished it meanwhile with this very transaction (a slow answer): done, not stale.
    if (!finishInWrite(deps, row, pending, move, signature) && !finishedWith(store.findOrderInWrite(deps.db, row.id)!, signature)) throw stale();
  });
  return (await store.findOrder(deps.db, row.id))!;
}

/** Whether an order's escrow transaction of record is `signature` and it is no longer pending. */
function finishedWith(row: store.OrderRow, signature: string): boolean {
  return row.pendingTx === null && (row.escrowTx === signature || row.releaseTx === signature || row.refundTx === signature);
}

async function revertMove(deps: Deps, orderId: string, pending: store.OrderStatus, from: store.OrderStatus): Promise<void> {
  await deps.db.write(() => store.transitionInWrite(deps.db, orderId, pending, { ...NOT_PENDING, status: from }, deps.clock.now()));
}

/** Settles one order whose escrow transaction is in flight: finish, go back, or send it again. */
async function reconcile(deps: Deps, row: store.OrderRow): Promise<boolean> {
  const move = JSON.parse(row.pendingMove!) as Move;
  const from = row.pendingFrom!;
  // The height first: a transaction not found after it was read cannot land later once that height is past its limit.
  const height = await deps.ledger.blockHeight();
  const landed = await deps.ledger.getTransaction(row.pendingTx!);
  if (landed?.status === "confirmed") return deps.db.write(() => finishInWrite(deps, row, row.status, move, row.pendingTx!));
  if (landed?.status === "failed") {
    await revertMove(deps, row.id, row.status, from);
    return true;
  }
  if (height > row.pendingValidHeight!) {
    // One "not found" is not proof: a node that pruned the transaction, or a load-balanced one answering
    // from behind, says null for a transfer that went through, and going back would let the order pay (or
    // be paid) again. So the ledger's whole history is asked too, a second question (often another node).
    const status = await deps.ledger.transactionStatus(row.pendingTx!);
    if (status === "confirmed") return deps.db.write(() => finishInWrite(deps, row, row.status, move, row.pendingTx!));
    if (status === "processed") return false; // seen, not yet confirmed: asked again next round
    await revertMove(deps, row.id, row.status, from); // failed, or unknown to the whole history
    return true;
  }
  try {
    await deps.ledger.submit(row.pendingWire!, { ownTransfer: true, finalized: waitsForFinality(deps.config.network) });
  } catch {
    // Refused on the way (a lagging node, a simulation) or still unknown: the bytes sent before stay valid
    // until their height, so nothing goes back before then. Asked again next round.
    return false;
  }
  return deps.db.write(() => finishInWrite(deps, row, row.status, move, row.pendingTx!));
}

/**
 * The memo of an escrow payout: it names the order, so no two orders' payouts are ever the same bytes. Two
 * equal payouts (one recipient, amount and token) in one blockhash's life were otherwise distinct only by a
 * random compute limit, and a repeat looked like this order's payout already on the ledger (CONFLICT): the
 * order was finished with the other order's transaction and no money moved.
 */
const payoutMemo = (row: store.OrderRow, kind: "refund" | "release") => `walletgate order ${row.id} ${kind}`;

/** Escrow back to the consumer in full, and the order to `to`. */
async function refund(deps: Deps, row: store.OrderRow, from: store.OrderStatus, to: "cancelled" | "expired" | "refunded", action: string, reason: string | null, note: string, event: AgentEventType | null) {
  const wire = await escrowPayout(deps, { to: row.consumerWallet, party: "consumer", token: row.token, amount: row.amount, memo: payoutMemo(row, "refund") });
  return runMove(deps, row, from, action, { kind: "refund", to, reason, note, event }, wire);
}

/** Escrow to the provider (less the marketplace fee, to the fee wallet, in the same transaction), and the order to `completed`. */
async function release(deps: Deps, row: store.OrderRow, from: store.OrderStatus, rating: number | null, review: string | null, note: string) {
  // The terms the order was paid under; an order paid before they were kept, those of this process.
  const { feeBps, feeWallet } = row.feeBps !== null ? { feeBps: row.feeBps, feeWallet: row.feeWallet } : deps.config.marketplace;
  const fee = feeWallet === null ? 0n : (row.amount * BigInt(feeBps)) / 10_000n;
  const payout =
    fee === 0n
      ? { to: row.providerWallet, party: "provider" as const, token: row.token, amount: row.amount }
      : fee >= row.amount
        ? { to: feeWallet!, party: null, token: row.token, amount: row.amount } // a fee of 100 %
        : { to: row.providerWallet, party: "provider" as const, token: row.token, amount: row.amount - fee, split: { to: feeWallet!, amount: fee } };
  const wire = await escrowPayout(deps, { ...payout, memo: payoutMemo(row, "release") });
  return runMove(deps, row, from, "complete", { kind: "release", rating, review, note, fee: (fee >= row.amount ? row.amount : fee).toString() }, wire);
}

export async function cancelOrder(deps: Deps, wallet: string, orderId: string, reason?: string): Promise<OrderView> {
  const row = await orderFor(deps, orderId, wallet, "provider");
  if (row.status !== "paid") throw wrongState(row, "cancel");
  const why = checkText(reason, "reason", 1000, false);
  const note = `The provider cancelled the order${why === null ? "" : `: ${why}`}. The payment went back to the consumer.`;
  return orderView(await refund(deps, row, "paid", "cancelled", "cancel", why, note, null));
}

export async function completeOrder(deps: Deps, wallet: string, input: { orderId: string; rating?: number | undefined; review?: string | undefined }): Promise<OrderView> {
  const row = await orderFor(deps, input.orderId, wallet, "consumer");
  if (row.status !== "delivered") throw wrongState(row, "complete");
  if (input.rating !== undefined && (!Number.isInteger(input.rating) || input.rating < 1 || input.rating > 5)) throw invalidField("rating", "a whole number from 1 to 5");
  const review = checkText(input.review, "review", 1000, false);
  return orderView(await release(deps, row, "delivered", input.rating ?? null, review, "The consumer accepted the delivery; the payment went to the provider."));
}

export async function disputeOrder(deps: Deps, wallet: string, orderId: string, reason: string): Promise<OrderView> {
  const row = await orderFor(deps, orderId, wallet, "consumer");
  if (row.status !== "delivered") throw wrongState(row, "dispute");
  if (row.dueAt !== null && row.dueAt <= deps.clock.now()) throw new AppError("INVALID_STATE", "72 hours have passed since delivery: the order completes");
  const why = checkText(reason, "reason", 1000, true)!;
  return orderView(
    await transition(deps, row, "dispute", { status: "disputed", reason: why, dueAt: null }, () => {
      systemMessageInWrite(deps, row, `The consumer disputed the delivery: ${why}. The payment stays in escrow until the operator decides.`);
      orderEventInWrite(deps, row, "order.disputed", { reason: why });
    }),
  );
}

/** `walletgate orders resolve`: the operator ends a dispute by releasing to the provider or refunding the consumer. */
export async function resolveDispute(deps: Deps, orderId: string, outcome: "release" | "refund"): Promise<OrderView> {
  const row = await store.findOrder(deps.db, orderId);
  if (row === null) throw notFound();
  if (row.status !== "disputed") throw wrongState(row, "resolve");
  if (outcome === "release") return orderView(await release(deps, row, "disputed", null, null, "The operator resolved the dispute for the provider; the payment went to the provider."));
  return orderView(await refund(deps, row, "disputed", "refunded", "resolve", null, "The operator resolved the dispute for the consumer; the payment went back to the consumer.", null));
}

export const ORDER_LIST_LIMIT = { default: 20, max: 100 };

export async function listOrders(deps: Deps, wallet: string, side: Side, q: { status?: string | undefined; limit?: number | undefined; offset?: number | undefined }) {
  const statuses: readonly string[] = store.ORDER_STATUSES;
  if (q.status !== undefined && !statuses.includes(q.status)) throw invalidField("status", `one of ${statuses.join(", ")}`);
  const { limit, offset } = requirePage(q, ORDER_LIST_LIMIT);
  const { rows, total } = await store.listOrders(deps.db, { wallet, side, status: (q.status as store.OrderStatus) ?? null, limit, offset });
  // At most PAGE_MAX_CHARS of orders (lib/fit.ts): go on from offset + the orders returned, up to total.
  return { orders: headWithin(rows.map(orderView)), total, limit, offset };
}

/** Orders a conversation view shows: its newest ones (all of a wallet's are paged by consumer_list_orders / provider_list_orders). */
export const CONVERSATION_ORDERS_SHOWN = 100;

export async function ordersOfConversation(deps: Deps, conversationId: string): Promise<{ orders: OrderView[]; ordersTotal: number }> {
  const { rows, total } = await store.ordersOfConversation(deps.db, conversationId, CONVERSATION_ORDERS_SHOWN);
  return { orders: headWithin(rows.map(orderView)), ordersTotal: total };
}

/**
 * A step back of the wall clock moves the payouts held for a token account (their next look) with it, as
 * it moves webhook retries. An order's deadline and other due times do not move: they were told to both
 * parties as times of day, and are kept as told. Returns how many moved.
 */
export function movePayoutHoldsWithClock(deps: Pick<Deps, "db">, stepMs: number, now: number): Promise<number> {
  return store.moveBackPayoutHolds(deps.db, stepMs, now);
}

/**
 * One round of the timers: proposals unanswered for 24 hours expire; paid orders past their deadline
 * expire with a full refund; deliveries unanswered for 72 hours are completed and released; escrow
 * transactions in flight on an RPC network are settled. Due times and transactions are stored, so a
 * restart loses nothing. Returns how many orders moved.
 */
export async function runOrderTimers(deps: Deps, batch = 50, stopping?: AbortSignal): Promise<number> {
  let moved = 0;
  for (const row of await store.pendingOrders(deps.db, deps.clock.now() - RECONCILE_AFTER_MS, batch)) {
    if (stopping?.aborted) return moved;
    try {
      if (await reconcile(deps, row)) moved++;
    } catch (err) {
      if (!stopping?.aborted) deps.log.warn("escrow transaction not settled yet", { orderId: row.id, error: String(err) });
    }
  }
  let searches = 0;
  for (const row of await store.dueOrders(deps.db, deps.clock.now(), batch)) {
    if (stopping?.aborted) return moved;
    try {
      if (row.status === "proposed") {
        // A look for a sent offer costs RPC requests on devnet/mainnet: a few a round, the rest next round.
        const reads = row.offerHash !== null && !offerMayLand(deps, row);
        if (reads && searches >= OFFER_SEARCHES_PER_ROUND) continue;
        if (reads) searches += offerSearchReadsHistory(row.offerHash!) ? OFFER_SEARCHES_PER_ROUND : 1;
        // A look whose reference was too crowded read the history instead: the round's last look too.
        const offer = row.offerHash === null ? "none" : await sentOfferOutcome(deps, row, () => (searches = Math.max(searches, OFFER_SEARCHES_PER_ROUND)));
        if (offer === "wait") continue;
        if (offer === "paid") {
          moved++;
          continue;
        }
        await transition(deps, row, "expire", { status: "expired", dueAt: null }, () => {
          systemMessageInWrite(deps, row, "The proposal expired unanswered.");
          orderEventInWrite(deps, row, "order.expired", { reason: "proposal_expired" });
        });
      } else if (row.status === "paid") {
        await refund(deps, row, "paid", "expired", "expire", "deadline_passed", "The deadline passed without a delivery; the payment went back to the consumer.", "order.expired");
      } else if (row.status === "delivered") {
        await release(deps, row, "delivered", null, null, "No answer for 72 hours after delivery: the order completed and the payment went to the provider.");
      } else {
        continue;
      }
      moved++;
    } catch (err) {
      const held = err instanceof AppError ? (err.extra.details as { reason?: string; wallet?: string } | undefined) : undefined;
      if (held?.reason === RECIPIENT_ACCOUNT_MISSING) {
        // The party has no token account to be paid into (escrow.ts): looked at again in an hour, so that such
        // orders never fill a round's batch ahead of the others. due_at stays: it also bounds deliver and dispute.
        await store.holdPayout(deps.db, row.id, row.status, deps.clock.now() + PAYOUT_WAIT_MS);
        deps.log.info("order payout waits for its recipient's token account", { orderId: row.id, wallet: held.wallet });
        continue;
      }
      // A racing transition got there first (INVALID_STATE): nothing to do. Anything else is retried next round.
      if (!(err instanceof AppError && err.code === "INVALID_STATE") && !stopping?.aborted) deps.log.warn("order timer failed", { orderId: row.id, error: String(err) });
    }
  }
  return moved;
}

/**
 * Before a proposal with an offer expires: a connected consumer may have signed and sent the offered escrow
 * transfer itself without presenting it. Found on the ledger, it finishes the accept (paid once: the
 * transition is conditional, as when the consumer presents it), and the order is not expired. `wait` while
 * the offer could still land; a ledger that cannot be read throws (the order stays proposed, looked at again
 * next round) for up to OFFER_SEARCH_GRACE_MS past the proposal's expiry.
 */
async function sentOfferOutcome(deps: Deps, row: store.OrderRow, readsHistory?: () => void): Promise<"paid" | "none" | "wait"> {
  const offeredAt = row.offeredAt!; // set with every offer (migration 13 filled in older ones)
  if (offerMayLand(deps, row)) return "wait";
  let sent: Awaited<ReturnType<typeof sentOffer>>;
  try {
    sent = await sentOffer(deps, row.consumerWallet, { offerHash: row.offerHash!, offeredAt }, readsHistory);
  } catch (err) {
    if (row.dueAt === null || deps.clock.now() < row.dueAt + OFFER_SEARCH_GRACE_MS) throw err; // looked at again next round
    deps.log.warn("proposal expired without its offer looked for: a transfer its consumer sent itself may be in escrow", { orderId: row.id, error: String(err) });
    return "none";
  }
  if (sent === null) return "none";
  const move: Move = { kind: "accept", token: sent.token, amount: sent.amount.toString() };
  try {
    await deps.db.write(() => {
      if (!finishInWrite(deps, row, "proposed", move, sent.signature)) throw wrongState(store.findOrderInWrite(deps.db, row.id)!, "accept");
    });
  } catch (err) {
    if (err instanceof AppError && err.code === "PAYMENT_MISMATCH") return "none"; // it paid another order
    throw err;
  }
  deps.log.info("order paid by an escrow transfer its consumer sent", { orderId: row.id });
  return "paid";
}

/** The escrow invariant: what the escrow holds per token for orders in paid, delivered or disputed. */
export function escrowedTotals(deps: Deps): Promise<Record<string, bigint>> {
  return store.escrowedTotals(deps.db);
}
