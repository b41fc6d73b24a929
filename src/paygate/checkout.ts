// Checkout (paygate.md "Checkout"): the buyer's transaction built around a fresh reference key, found on
// chain by that reference, validated, and turned into a purchase (and token) in one database write.
import { VersionedTransaction } from "@solana/web3.js";
import type { Deps } from "../deps.ts";
import { AppError, errorText, fieldError, outcomeUnknown } from "../errors.ts";
import { formatAmount, parseAmount } from "../lib/amounts.ts";
import { DAY_MS, toIso } from "../lib/clock.ts";
import { isAddress, decodeBase64Strict, encodeBase58, encodeBase64 } from "../lib/encoding.ts";
import { sha256Hex } from "../lib/hash.ts";
import { newId } from "../lib/ids.ts";
import type { LedgerTransaction, ParsedTransfer, TokenInfo } from "../ledger/ledger.ts";
import { associatedTokenAddress, compileTransaction, parseTransaction, requireSignatures, transferInstructions, type ParsedTransaction } from "../ledger/transactions.ts";
import { recordPaymentEvents, type PaymentFacts } from "./events.ts";
import { currencyToken } from "./products.ts";
import { REFERENCE_PAGE, clusterName, referenceSignatures, waitsForFinality } from "../ledger/ledger.ts";
import { landingHeightLimit, mayStillLand, sentMayLand } from "../ledger/landing.ts";
import { currencyOf, isTxHash } from "./purchases.ts";
import * as store from "./store.ts";
import { mintFeatureToken, revealFeatureToken, statusOf } from "./tokens.ts";

export const CHECKOUT_TTL_MS = 15 * 60_000;
/**
 * The watcher gives an unpaid checkout this long past its expiry before closing it: a transaction signed
 * just before expiry can take its blockhash's life (about a minute) to land, and on mainnet some 13 s more
 * to be finalized (only then does the watcher see it).
 */
export const EXPIRY_GRACE_MS = 2 * 60_000;
/**
 * A checkout's reference is listed as ledger.ts's referenceSignatures lists one. Anyone may put a reference seen
 * on chain into transactions of their own, so a paid checkout's reference can carry strangers' transactions
 * too: the payment is looked for among all of them, oldest first.
 */
export { REFERENCE_PAGE, REFERENCE_PAGES } from "../ledger/ledger.ts";
/**
 * Transactions read per look at one checkout (besides those /submit sent). How far the reads got is kept
 * (deps.paygate.referenceReads), so each look goes on from there, and none costs more than this many reads.
 */
export const REFERENCE_READS = 20;
/**
 * Open checkouts the watcher looks at a round (every 5 s), after the recently submitted ones: each look lists
 * the reference's signatures on the ledger (on devnet/mainnet, the operator's RPC quota), so a client opening
 * checkouts it never pays keeps at most this many looks a round going. More open ones wait their turn.
 */
export const WATCH_BATCH = 10;
/** Recently submitted open checkouts the watcher looks at first each round. */
const SUBMITTED_FIRST = 10;
/**
 * Transactions /submit sends for one checkout at most: each is read at every look for its payment, and
 * a buyer needs only a few (a fresh blockhash after one expired, a retry).
 */
export const MAX_SUBMISSIONS = 8;

export type CheckoutView = {
  checkoutId: string;
  reference: string;
  /** Standard base64 of the unsigned wire transaction; the buyer is fee payer and sole signer. */
  transaction: string;
  amount: string;
  currency: string;
  payTo: string;
  expiresAt: string;
};

/**
 * `checkoutId` is named only where /submit answers about another checkout of the wallet for the product
 * (one whose payment may still land, or one that paid lately): that is the checkout to confirm from then
 * on, since the one asked about is never paid.
 */
export type ConfirmResult =
  | { status: "pending"; checkoutId?: string }
  | { status: "completed"; txHash: string; purchaseId: string; accessToken?: string; checkoutId?: string };

type SplToken = TokenInfo & { mint: string };

const mismatch = (reason: string, message: string) => new AppError("PAYMENT_MISMATCH", message, { details: { reason } });
const noCheckout = () => new AppError("NOT_FOUND", "no such checkout for this product");
const expired = () => new AppError("INVALID_STATE", "this checkout expired before it was paid; start a new one");
/** A checkout closed while its reference was too crowded to search: a payment may hide there, and is named by its txHash. */
const expiredCrowded = () =>
  new AppError("INVALID_STATE", "this checkout expired, and its reference carries too many transactions to look for a payment among them: if you paid it, confirm with the payment's txHash");

async function splToken(deps: Deps, key: string): Promise<SplToken> {
  return (await currencyToken(deps, key)) as SplToken; // currencyToken refuses a token without a mint
}

const archived = () => new AppError("INVALID_STATE", "this product is archived and can no longer be bought");

const noProduct = () => new AppError("NOT_FOUND", "no such product");

async function productForSale(deps: Deps, productId: string): Promise<store.ProductRow> {
  const product = await store.findProduct(deps.db, productId);
  if (product === null) throw noProduct();
  if (product.status === "archived") throw archived();
  return product;
}

/**
 * What a checkout's payments are judged against: its product (archived or not: a payment for a checkout
 * opened while the product was for sale is honoured) and the token the checkout is priced in (its own:
 * the owner may have changed the product's since). Null when the product is gone.
 */
async function saleOf(deps: Deps, checkout: store.CheckoutRow): Promise<{ product: store.ProductRow; token: SplToken } | null> {
  const product = await store.findProduct(deps.db, checkout.productId);
  return product === null ? null : { product, token: await splToken(deps, checkout.token) };
}

async function checkoutOf(deps: Deps, productId: string, checkoutId: string): Promise<store.CheckoutRow> {
  const checkout = await store.findCheckout(deps.db, checkoutId);
  if (checkout === null || checkout.productId !== productId) throw noCheckout();
  return checkout;
}

/** How long the chain's time is waited for when a checkout opens: it is optional, the payment transaction is not. */
const CHAIN_TIME_WAIT_MS = 2_000;

/** The chain's time now, or 0 when the node cannot say, in time or at all (then the checkout is judged on this server's clock). */
async function chainTimeOrUnknown(deps: Deps): Promise<number> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const late = new Promise<number>((resolve) => {
    timer = setTimeout(() => resolve(0), CHAIN_TIME_WAIT_MS);
  });
  try {
    return await Promise.race([deps.ledger.chainTime().catch(() => 0), late]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * The last block time at which a payment counts as landed before the checkout expired: its expiry on the
 * chain's clock (that stamps the block) or on this server's, whichever is later. The chain's alone would
 * refuse payments this server let the buyer send where the two disagree — a node whose latest block lagged
 * when the checkout opened, or this server's clock stepped back meanwhile — and this server's alone refuses
 * them when it runs behind the chain (a paused VM not yet corrected). Either way the buyer would be charged
 * for nothing.
 */
const inTimeUntil = (checkout: store.CheckoutRow) => (checkout.chainExpiresAt === null ? checkout.expiresAt : Math.max(checkout.chainExpiresAt, checkout.expiresAt));

const isClosed = (deps: Deps, checkout: store.CheckoutRow) => checkout.status === "expired" || deps.clock.now() >= checkout.expiresAt;

/**
 * No transaction is handed out or sent for a checkout this close to its expiry: one sent now could land
 * after it (a blockhash lives 60–90 s, and the chain's clock may differ from ours), and a payment that
 * landed late is refused — the buyer charged, nothing bought.
 */
export const SEND_MARGIN_MS = 2 * 60_000;
const tooLate = () => new AppError("INVALID_STATE", "this checkout expires too soon for a payment to land in time; start a new one");
const closingSoon = (deps: Deps, checkout: store.CheckoutRow) => deps.clock.now() + SEND_MARGIN_MS >= checkout.expiresAt;
/** Whether no new payment can be made for the checkout any more: expired, or too close to it for one to land. */
const pastPaying = (deps: Deps, checkout: store.CheckoutRow) => isClosed(deps, checkout) || closingSoon(deps, checkout);

/**
 * The unsigned payment: CreateAssociatedTokenAccountIdempotent for payTo when its token account is
 * missing (paid by the buyer), then TransferChecked of the price carrying the reference, on a fresh blockhash.
 */
async function paymentTransaction(deps: Deps, checkout: store.CheckoutRow, token: SplToken): Promise<string> {
  const createRecipientAccount = !(await deps.ledger.tokenAccountExists(associatedTokenAddress(checkout.payTo, token.mint)));
  const instructions = transferInstructions({
    from: checkout.wallet,
    to: checkout.payTo,
    feePayer: checkout.wallet,
    amount: checkout.amount,
    spl: { mint: token.mint, decimals: token.decimals },
    createRecipientAccount,
    memo: null,
    // As Solana Pay does: the reference rides on the transfer as a read-only non-signer, so the payment can be
    // found by asking for the reference's transactions.
    reference: checkout.reference,
  });
  return encodeBase64(compileTransaction(instructions, checkout.wallet, (await deps.ledger.latestBlockhash()).blockhash));
}

/**
 * POST /pay/:productId/checkout. Without `checkoutId`, opens a checkout for 15 minutes at today's price;
 * with the id of an open one (same product and wallet), a fresh transaction with the same reference.
 */
export async function startCheckout(
  deps: Deps,
  productId: string,
  walletAddress: string,
  checkoutId?: string,
  limits: { maxAmount?: number | string | undefined; currency?: string | undefined; idempotencyKey?: string | undefined } = {},
): Promise<CheckoutView> {
  if (!isAddress(walletAddress)) throw fieldError("walletAddress", "walletAddress must be a base58 address of 32 bytes", {}, "INVALID_ADDRESS");
  const product = await productForSale(deps, productId);
  let checkout: store.CheckoutRow;
  if (checkoutId !== undefined) {
    checkout = await checkoutOf(deps, productId, checkoutId);
    if (checkout.wallet !== walletAddress) throw noCheckout();
    if (checkout.status === "completed") throw new AppError("INVALID_STATE", "this checkout is already paid");
    if (isClosed(deps, checkout)) throw expired();
    if (closingSoon(deps, checkout)) throw tooLate();
    // Its price is the one fixed when it opened, whatever the product's is now.
    await holdLimits(deps, { price: checkout.amount, token: checkout.token }, limits);
  } else {
    await holdLimits(deps, product, limits);
    const token = await splToken(deps, product.token);
    const now = deps.clock.now();
    checkout = {
      id: newId("chk", deps.random),
      productId: product.id,
      owner: product.owner,
      wallet: walletAddress,
      reference: encodeBase58(deps.random(32)),
      payTo: product.payTo,
      amount: product.price,
      token: token.key,
      createdAt: now,
      expiresAt: now + CHECKOUT_TTL_MS,
      chainExpiresAt: null, // below, with the transaction
      status: "open",
      purchaseId: null,
      // Fixed as the price is: a product changed while its buyer pays does not change what is bought.
      terms: { accessDays: product.accessDays, featureIds: product.featureIds },
      idempotencyKey: limits.idempotencyKey ?? null,
    };
  }
  const token = await splToken(deps, checkout.token);
  const [transaction, chainNow] = await Promise.all([paymentTransaction(deps, checkout, token), checkoutId === undefined ? chainTimeOrUnknown(deps) : 0]);
  if (chainNow > 0) checkout.chainExpiresAt = chainNow + CHECKOUT_TTL_MS;
  // Saved once its transaction could be built: a chain that does not answer leaves no checkout behind for the
  // watcher to look after for 15 minutes (the buyer, told CHAIN_UNAVAILABLE, starts again).
  if (checkoutId === undefined && !(await store.insertCheckout(deps.db, checkout))) {
    // Only a key can be taken: another call with it opened its checkout a moment ago.
    if (limits.idempotencyKey === undefined) throw new AppError("INTERNAL_ERROR", "a checkout id was drawn twice");
    throw new IdempotencyKeyTaken();
  }
  return {
    checkoutId: checkout.id,
    reference: checkout.reference,
    transaction,
    amount: formatAmount(checkout.amount, token.decimals),
    currency: token.key.toUpperCase(),
    payTo: checkout.payTo,
    expiresAt: toIso(checkout.expiresAt),
  };
}

/** checkout_pay's `currency` and `maxAmount`: the price the caller agreed to. */
export type PriceLimits = { maxAmount?: number | string | undefined; currency?: string | undefined };

/**
 * checkout_pay's limits held against a price (`priced`: a product's, or a checkout's own): a price the buyer
 * did not agree to is refused before anything is signed or opened: another currency than `currency`, or more
 * than `maxAmount` of it. `maxAmount` needs `currency`: an owner may change a product's currency, and "2.5" of
 * another token is another price. With `hold: false` (a call that pays nothing, answering a payment already
 * made or on its way) they are only read: what cannot be a price is VALIDATION_ERROR on every call.
 */
async function holdLimits(deps: Deps, priced: { price: bigint; token: string }, limits: PriceLimits, hold = true): Promise<void> {
  if (limits.maxAmount === undefined && limits.currency === undefined) return;
  const token = await splToken(deps, priced.token);
  const symbol = token.key.toUpperCase();
  if (limits.currency === undefined) throw fieldError("currency", "currency is required with maxAmount (the currency the price was seen in)");
  const currency = limits.currency.toUpperCase();
  if (hold && currency !== symbol) {
    throw new AppError("PAYMENT_MISMATCH", `the product is sold in ${symbol}, not ${currency}; nothing was paid`, {
      details: { reason: "mint", currency: symbol },
    });
  }
  if (limits.maxAmount === undefined) return;
  // An amount of the currency named (its decimals), where this service has it.
  const named = currency === symbol ? token : (await deps.ledger.tokens()).find((t) => t.key.toUpperCase() === currency);
  const parsed = parseAmount(limits.maxAmount, (named ?? token).decimals);
  if ("error" in parsed) throw fieldError("maxAmount", `maxAmount ${parsed.error}`);
  if (!hold || priced.price <= parsed.value) return;
  const price = formatAmount(priced.price, token.decimals);
  const most = formatAmount(parsed.value, token.decimals);
  throw new AppError("PAYMENT_MISMATCH", `the product costs ${price} ${symbol}, more than maxAmount ${most} ${symbol}; nothing was paid`, {
    details: { reason: "amount", amount: price, currency: symbol, maxAmount: most },
  });
}

/**
 * checkout_pay's limits read on every call, before anything else is done (holdLimits without holding): a
 * call that answers a payment already made or on its way (a checkoutId's, an earlier call's) pays nothing, so
 * its limits refuse no price, but a maxAmount that is no amount, or comes without currency, is still refused.
 */
export async function readLimits(deps: Deps, productId: string, limits: PriceLimits): Promise<void> {
  if (limits.maxAmount === undefined && limits.currency === undefined) return;
  const product = await store.findProduct(deps.db, productId);
  if (product === null) throw noProduct();
  await holdLimits(deps, product, limits, false);
}

/** Words for a payment below the price, in whole tokens (spec README: amounts are never base units). */
function shortPayment(token: SplToken, paid: bigint, asked: bigint): string {
  const symbol = token.key.toUpperCase();
  return `the payment is ${formatAmount(paid, token.decimals)} ${symbol}; ${formatAmount(asked, token.decimals)} ${symbol} are asked`;
}

/**
 * The rules of paygate.md step 3 on the signed bytes, before anything is sent: fee payer = the checkout's
 * wallet; exactly one token transfer to payTo's token account, a TransferChecked of the checkout's mint
 * and at least its amount, from the wallet's own token account under the wallet's authority, carrying the
 * reference as a read-only non-signer account of that instruction. Returns what it transfers to payTo (at
 * least the price).
 */
function checkSignedPayment(checkout: store.CheckoutRow, token: SplToken, tx: ParsedTransaction, wire: Uint8Array): bigint {
  const mint = token.mint;
  const key = (i: number) => tx.accountKeys[i]!;
  if (key(0) !== checkout.wallet) throw mismatch("payer", "the fee payer must be the checkout's wallet");
  const toPayTo = tx.instructions.flatMap((ix, index) =>
    ix.program === "token" && ix.type !== "invalid" && key(ix.destination) === associatedTokenAddress(checkout.payTo, ix.type === "transferChecked" ? key(ix.mint) : mint)
      ? [{ ix, index }]
      : [],
  );
  // Transfers of other tokens to payTo (a tip) are not the payment, as the landed check sees them (ofCheckoutMint).
  const payments = ofCheckoutMint(toPayTo, ({ ix }) => ix.type !== "transferChecked" || key(ix.mint) === mint);
  if (payments.length !== 1) throw mismatch("recipient", `exactly one transfer to payTo's token account is expected, found ${payments.length}`);
  const { ix, index } = payments[0]!;
  if (ix.type !== "transferChecked") throw mismatch("recipient", "the payment must be a TransferChecked instruction");
  if (key(ix.mint) !== mint) throw mismatch("mint", `the payment must be of mint ${mint}`);
  if (ix.amount < checkout.amount) throw mismatch("amount", shortPayment(token, ix.amount, checkout.amount));
  if (key(ix.owner) !== checkout.wallet || key(ix.source) !== associatedTokenAddress(checkout.wallet, mint)) {
    throw mismatch("payer", "the tokens must come from the checkout wallet's own token account, under its authority");
  }
  // parseTransaction keeps a TransferChecked's four named accounts; the reference is among the extra ones.
  const accounts = VersionedTransaction.deserialize(wire).message.compiledInstructions[index]!.accountKeyIndexes;
  const reference = tx.accountKeys.indexOf(checkout.reference);
  if (reference < 0 || !accounts.includes(reference) || tx.isSigner(reference) || tx.isWritable(reference)) {
    throw mismatch("reference", "the transfer must carry the checkout's reference as a read-only, non-signer account");
  }
  return ix.amount;
}

/**
 * Of the token transfers to payTo, those of the checkout's mint: the others (a tip in another token) are not
 * the payment and do not make it two. When none is of the mint, all of them, so that the one found is refused
 * for its mint rather than as missing. The same rule before sending and after landing. (One gap stays: a second
 * transfer of the mint to a token account payTo owns that is not its associated one is not seen before
 * sending, which reads accounts by address, and is counted after landing, which reads them by owner.)
 */
function ofCheckoutMint<T>(toPayTo: readonly T[], isOfMint: (transfer: T) => boolean): readonly T[] {
  const ofMint = toPayTo.filter(isOfMint);
  return ofMint.length > 0 ? ofMint : toPayTo;
}

/**
 * A landed transaction's instructions. Other programs' instructions (a wallet's added guard or compute
 * settings) and lookup tables do not make its payment none: it ran as a whole, so its TransferChecked moved
 * what it says. One that cannot be read at all is not a payment.
 */
function parsedOrMismatch(tx: LedgerTransaction): ParsedTransaction {
  try {
    return parseTransaction(tx.wire, { loadedAddresses: tx.loadedAddresses });
  } catch (err) {
    if (!(err instanceof AppError)) throw err;
    throw mismatch("instructions", `the transaction is not a checkout payment: ${err.message}`);
  }
}

/**
 * The rules of step 3 on a transaction as the ledger recorded it (owners of token accounts resolved):
 * confirmed, fee payer = wallet, exactly one token transfer to payTo, of the mint, of at least the amount,
 * from the wallet, landed before the checkout expired. Returns that transfer.
 */
export function checkLandedPayment(checkout: store.CheckoutRow, token: SplToken, tx: LedgerTransaction): ParsedTransfer {
  const mint = token.mint;
  if (tx.status === "failed") throw mismatch("failed", `the payment transaction failed${tx.error === null ? "" : `: ${tx.error}`}`);
  if (tx.feePayer !== checkout.wallet) throw mismatch("payer", "the fee payer must be the checkout's wallet");
  const toPayTo = ofCheckoutMint(tx.transfers.filter((t) => t.to === checkout.payTo && t.mint !== null), (t) => t.mint === mint);
  if (toPayTo.length !== 1) throw mismatch("recipient", `exactly one token transfer to payTo is expected, found ${toPayTo.length}`);
  const transfer = toPayTo[0]!;
  if (transfer.mint !== mint) throw mismatch("mint", `the payment must be of mint ${mint}`);
  if (transfer.amount < checkout.amount) throw mismatch("amount", shortPayment(token, transfer.amount, checkout.amount));
  if (transfer.from !== checkout.wallet) throw mismatch("payer", "the tokens must come from the checkout's wallet");
  // 0: the node does not know the block's time (yet). Whether it landed in time cannot be told: asked
  // again later (the watcher skips it without expiring the checkout, as in any chain outage).
  if (tx.timestamp === 0) throw new AppError("CHAIN_UNAVAILABLE", "the payment's block time is not known yet; confirm again shortly");
  if (tx.timestamp > inTimeUntil(checkout)) throw new AppError("INVALID_STATE", "the payment landed after the checkout expired");
  return transfer;
}

/**
 * A completed checkout's answer. The access token is answered to every confirm of the checkout until
 * EXPIRY_GRACE_MS past its expiry (the watcher may have completed it first), and not after: a checkout id
 * is no lasting key to the buyer's token. Later the owner's token list and feature.unlocked have it —
 * and `signedByWallet`: the request carries the wallet's own signature (a /submit), so it is the buyer's.
 */
async function completedResult(deps: Deps, checkout: store.CheckoutRow, purchase: store.PurchaseRow, accessToken?: string, signedByWallet = false): Promise<ConfirmResult> {
  const answered = accessToken !== undefined || signedByWallet || deps.clock.now() <= checkout.expiresAt + EXPIRY_GRACE_MS;
  const token = accessToken === undefined && answered ? await store.findFeatureTokenOfPurchase(deps.db, purchase.id) : null;
  const clear = accessToken ?? (token === null ? undefined : revealFeatureToken(deps, token));
  return { status: "completed", txHash: purchase.txHash, purchaseId: purchase.id, ...(clear === undefined ? {} : { accessToken: clear }) };
}

/** Step 4: the purchase, the checkout completed, the token and the outbox events, in one write. */
async function recordPurchase(deps: Deps, checkout: store.CheckoutRow, product: store.ProductRow, token: SplToken, tx: LedgerTransaction, paid: bigint): Promise<ConfirmResult> {
  const now = deps.clock.now();
  const network = clusterName(deps.config.network);
  const terms = checkout.terms ?? { accessDays: product.accessDays, featureIds: product.featureIds };
  const minted = product.type === "feature_unlock" ? mintFeatureToken(deps, terms.featureIds) : null;
  const { currency, decimals } = currencyOf([token], token.key);
  const facts: Omit<PaymentFacts, "expiresAt"> = {
    owner: checkout.owner,
    productId: product.id,
    productTitle: product.title,
    walletAddress: checkout.wallet,
    txHash: tx.signature,
    amount: formatAmount(paid, decimals),
    currency,
    timestamp: toIso(now),
    network,
    feature: minted === null ? null : { accessToken: minted.accessToken, featureIds: terms.featureIds },
  };
  const outcome = await store.completeCheckout(
    deps.db,
    {
      checkout,
      productType: product.type,
      accessMs: terms.accessDays === null ? null : terms.accessDays * DAY_MS,
      purchase: { id: newId("pur", deps.random), txHash: tx.signature, amount: paid, network, purchasedAt: now },
      token: minted?.sealed ?? null,
    },
    (expiresAt) => recordPaymentEvents(deps, { ...facts, expiresAt: expiresAt === null ? null : toIso(expiresAt) }),
  );
  if (outcome.kind === "gone") throw noCheckout(); // purged meanwhile (decisions.md: NOT_FOUND follows the purge)
  if (outcome.kind === "signature_used") throw new AppError("CONFLICT", "this transaction already paid for another purchase");
  if (outcome.kind === "existing") return completedResult(deps, checkout, outcome.purchase);
  deps.log.info("purchase completed", { purchaseId: outcome.purchase.id, productId: product.id, owner: checkout.owner }); // not the checkout id: see completedResult
  return completedResult(deps, checkout, outcome.purchase, minted?.accessToken);
}

/**
 * Finds the checkout's payment by its reference and completes it; the core of confirm, submit and the
 * watcher. `pending` also while transactions carrying the reference are left unread: then `undecided` is
 * told why. More than one look reads ("unread"): the watcher expires nothing, and its next look reads on.
 * Too many to reach the oldest ("crowded"): no look will ever read them, so the watcher closes the checkout
 * once past its expiry and grace like any unpaid one (a payment hidden there is still named by its txHash).
 */
async function settleCheckout(deps: Deps, read: store.CheckoutRow, undecided: (why: "unread" | "crowded") => void = () => {}): Promise<ConfirmResult> {
  let checkout = read;
  if (checkout.purchaseId !== null) {
    // The purchase may be another request's write of this very turn, read before it is on disk: the token
    // goes out only once it is (or the batch's failure is the answer).
    await deps.db.settled();
    const purchase = await store.findPurchase(deps.db, checkout.purchaseId);
    if (purchase !== null) return completedResult(deps, checkout, purchase);
    // The write that completed it was lost (rolled back): the checkout is open again; look for its payment.
    checkout = (await store.findCheckout(deps.db, checkout.id)) ?? checkout;
    if (checkout.purchaseId !== null) throw new AppError("INTERNAL_ERROR", "a completed checkout without its purchase");
  }
  const sale = await saleOf(deps, checkout);
  if (sale === null) throw noProduct();
  const { product, token } = sale;
  // The transactions /submit sent, read by their signatures: no stranger's transaction can hide them.
  // Judged ones keep their refusal; one not readable (never landed, or a node behind) is null here.
  const submitted = new Map<string, AppError | null>();
  const submissions = await store.listSubmissions(deps.db, checkout.id);
  for (const { signature } of submissions) {
    const outcome = await readPayment(deps, checkout, product, token, signature);
    if (outcome === null || outcome instanceof AppError) submitted.set(signature, outcome);
    else return outcome;
  }
  // Then any payment carrying the reference (a buyer may send one itself), oldest first: if the buyer
  // paid twice, the first payment is the purchase.
  // paygate.md step 3: confirmed, and on mainnet finalized.
  const { signatures, complete } = await referenceSignatures(deps.ledger, checkout.reference, waitsForFinality(deps.config.network));
  if (!complete) {
    // An expired checkout stays so. Otherwise the oldest, where a payment would be, are out of reach: nothing
    // is decided (pending) until the watcher closes it.
    if (checkout.status === "expired") throw expiredCrowded();
    if (deps.paygate.referenceReads.firstCrowded(checkout.id)) {
      deps.log.warn("checkout reference crowded", { checkoutKey: checkoutKey(checkout.id), productId: checkout.productId, transactions: signatures.length });
    }
    // A transaction /submit sent that is not judged yet, or not readable while it can still land or is known
    // to the ledger (a node behind), may be the payment: the watcher keeps looking at it (as it would on an
    // uncrowded reference). Otherwise no look can decide more (one that cannot land any more and that the
    // ledger does not know never landed).
    let submittedUndecided = false;
    for (const kept of submissions) {
      const refused = submitted.get(kept.signature);
      if (refused === undefined) continue;
      const undecidedOne =
        refused === null ? (await mayStillLand(deps, kept)) || (await deps.ledger.transactionStatus(kept.signature)) !== null : outcomeUnknown(refused);
      if (undecidedOne) submittedUndecided = true;
    }
    undecided(submittedUndecided ? "unread" : "crowded");
    return { status: "pending" };
  }
  const reads = deps.paygate.referenceReads;
  const kept = reads.progress(checkout.id);
  const start = kept === null ? 0 : signatures.indexOf(kept.through) + 1; // 0 also when a node no longer lists it
  let newest = kept === null || start === 0 ? null : kept.refusal;
  let refusal: AppError | null = null;
  let contiguous = true; // every transaction before this one refused for good: progress can be kept
  let unread = false;
  for (let i = start, budget = REFERENCE_READS; i < signatures.length; i++) {
    const signature = signatures[i]!;
    // A submitted one was judged above (listed but not readable: undecided); the others are read here.
    let refused = submitted.has(signature) ? (submitted.get(signature) ?? notReadable()) : undefined;
    if (refused === undefined) {
      if (budget-- === 0) {
        unread = true;
        break;
      }
      const outcome = await readPayment(deps, checkout, product, token, signature);
      if (outcome !== null && !(outcome instanceof AppError)) {
        reads.forget(checkout.id);
        return outcome;
      }
      refused = outcome ?? notReadable();
    }
    if (outcomeUnknown(refused)) contiguous = false;
    else {
      newest = refused;
      if (contiguous) reads.record(checkout.id, { through: signature, refusal: refused });
    }
    // The newest refusal is the one reported, but an undecided payment (its block time unknown) wins:
    // a stranger's later transaction with the same reference must not get a paid checkout expired.
    if (refusal?.code !== "CHAIN_UNAVAILABLE") refusal = refused;
  }
  // A submitted transaction read but not listed yet (a node behind) and undecided keeps the checkout open
  // too. (One neither listed nor readable may never have landed: it decides nothing.)
  for (const [signature, refused] of submitted) {
    if (refused !== null && outcomeUnknown(refused) && !signatures.includes(signature)) refusal = refused;
  }
  if (unread && refusal?.code !== "CHAIN_UNAVAILABLE" && checkout.status !== "expired") {
    undecided("unread"); // the next look reads on
    return { status: "pending" };
  }
  if (refusal === null) refusal = newest;
  if (refusal !== null) throw refusal;
  // Expiry counts when the payment landed, not when it is confirmed: only an unpaid checkout expires.
  // So does archiving: it ends only checkouts that were not paid.
  if (product.status === "archived") throw archived();
  if (isClosed(deps, checkout)) throw expired();
  return { status: "pending" };
}

/** Whether a purchase grants access now: an access pass until it expires, a feature unlock while its token is neither revoked nor expired. */
async function stillGrants(deps: Deps, product: store.ProductRow, purchase: store.PurchaseRow): Promise<boolean> {
  const now = deps.clock.now();
  if (product.type !== "feature_unlock") return purchase.expiresAt === null || purchase.expiresAt > now;
  const token = await store.findFeatureTokenOfPurchase(deps.db, purchase.id);
  return token !== null && statusOf(token, now) === "active";
}

/** How log lines name a checkout: never by its id, which with the product id reveals the buyer's token (completedResult). */
export const checkoutKey = (checkoutId: string) => sha256Hex(checkoutId).slice(0, 12);

const notReadable = () => new AppError("CHAIN_UNAVAILABLE", "a transaction carrying this checkout's reference is listed but cannot be read yet");

/**
 * paygate.md step 3 on a recorded transaction (the ledger's view, then the byte-level rules: a
 * TransferChecked into payTo's associated token account from the wallet's own, carrying the reference
 * on that very instruction) and step 4 when it is a payment. Its refusal is returned, not thrown.
 */
async function judgePayment(deps: Deps, checkout: store.CheckoutRow, product: store.ProductRow, token: SplToken, tx: LedgerTransaction): Promise<ConfirmResult | AppError> {
  try {
    const transfer = checkLandedPayment(checkout, token, tx);
    checkSignedPayment(checkout, token, parsedOrMismatch(tx), tx.wire);
    return await recordPurchase(deps, checkout, product, token, tx, transfer.amount);
  } catch (err) {
    if (!(err instanceof AppError)) throw err;
    return err;
  }
}

/** A transaction carrying the checkout's reference, read by signature and judged: its purchase, its refusal, or null while not readable. */
async function readPayment(deps: Deps, checkout: store.CheckoutRow, product: store.ProductRow, token: SplToken, signature: string): Promise<ConfirmResult | AppError | null> {
  const tx = await deps.ledger.getTransaction(signature, { finalized: waitsForFinality(deps.config.network) });
  return tx === null ? null : judgePayment(deps, checkout, product, token, tx);
}

/** Checkouts of one wallet and product an earlier attempt may have paid: how many checkout_pay looks at. */
const EARLIER_ATTEMPTS = 5;

/**
 * A purchase an earlier checkout_pay of this wallet already paid for: the transactions its open checkouts
 * of the product sent (recorded by /submit) are read by signature, newest checkout first, and the first
 * that completed one is returned with what checkout_pay answers. So a payer retrying after an error that
 * came after its payment landed (a lost answer, a chain that stopped answering) is not charged twice.
 * Checkouts that sent nothing are passed over: anyone may open a checkout for any wallet (and crowd its
 * reference), and those must not stop the wallet from buying. Null when none is paid; a chain outage is
 * thrown, as paying would be.
 */
export async function earlierPurchaseOf(deps: Deps, productId: string, walletAddress: string): Promise<CheckoutPayAnswer | null> {
  const earlier = await earlierPayment(deps, productId, walletAddress);
  // Paid, or still landing (pending, with its checkoutId to ask again with): either way, no new payment.
  return earlier === null ? null : checkoutPayAnswer(deps, earlier.checkout, earlier.result);
}

/**
 * The first of the wallet's open checkouts of the product (newest first, at most EARLIER_ATTEMPTS, but
 * `skip`) whose kept transactions paid it or may still land (settleSubmissions), each judged in its own
 * currency; null when none.
 */
async function earlierPayment(deps: Deps, productId: string, walletAddress: string, skip?: string): Promise<{ checkout: store.CheckoutRow; result: ConfirmResult } | null> {
  for (const checkout of await store.findSubmittedOpenCheckoutsOf(deps.db, productId, walletAddress, EARLIER_ATTEMPTS)) {
    const sale = checkout.id === skip ? null : await saleOf(deps, checkout);
    if (sale === null) continue;
    const result = await settleSubmissions(deps, checkout, sale.product, sale.token);
    if (result !== null) return { checkout, result };
  }
  return null;
}

/** The most transactions naming both a checkout's reference and its wallet that /submit reads before sending. */
const SELF_SENT_READS = 8;

/**
 * Before /submit sends: a payment of the checkout that its wallet sent itself, not through /submit (paygate.md:
 * the buyer submits it itself or posts it; its answer lost, say). The transactions naming both the reference
 * and the wallet (listed as confirmed, on mainnet too) are read: the purchase one of them made; `pending`
 * while one is listed but not readable, not final, or not judged yet (its block time unknown). Strangers'
 * transactions that carry the reference but not the wallet cannot be the wallet's payment and are not read.
 * Where a payment cannot be ruled out, nothing is sent and the answer is `pending` (confirm walks them): the
 * reference's listing is full, more than SELF_SENT_READS name both, or the wallet's listing is full (its
 * payment may be older than what it lists: then every transaction on the reference is a candidate). A
 * fresh reference names nothing, which costs one listing.
 */
async function selfSentPayment(deps: Deps, checkout: store.CheckoutRow, product: store.ProductRow, token: SplToken): Promise<ConfirmResult | null> {
  const onReference = await deps.ledger.signatures(checkout.reference, { limit: REFERENCE_PAGE });
  if (onReference.length === 0) return null;
  if (onReference.length >= REFERENCE_PAGE) return { status: "pending" };
  const walletListed = await deps.ledger.signatures(checkout.wallet, { limit: REFERENCE_PAGE });
  const mine = new Set(walletListed);
  const candidates = walletListed.length >= REFERENCE_PAGE ? onReference : onReference.filter((s) => mine.has(s));
  if (candidates.length > SELF_SENT_READS) return { status: "pending" };
  for (const signature of candidates) {
    const outcome = await readPayment(deps, checkout, product, token, signature);
    if (outcome === null || (outcome instanceof AppError && outcomeUnknown(outcome))) return { status: "pending" };
    if (!(outcome instanceof AppError)) return outcome;
  }
  return null;
}

/**
 * The transactions /submit kept for a checkout (but `except`), read by signature: the purchase when one
 * paid it; `pending` while one not seen yet may still land (its blockhash still valid, or on mainnet
 * confirmed but not final): another payment now could be a second one; null when none did or can. One
 * that no longer can land (ledger/landing.ts: never within SENT_KEPT_MS of its sending, nor before the
 * chain is past its landing limit) is forgotten: it frees its place.
 */
async function settleSubmissions(deps: Deps, checkout: store.CheckoutRow, product: store.ProductRow, token: SplToken, except?: string): Promise<ConfirmResult | null> {
  for (const kept of await store.listSubmissions(deps.db, checkout.id)) {
    const { signature } = kept;
    if (signature === except) continue;
    const outcome = await readPayment(deps, checkout, product, token, signature);
    if (outcome instanceof AppError) {
      if (outcomeUnknown(outcome)) throw outcome;
      continue; // refused
    }
    if (outcome !== null) return outcome;
    if (await sentMayLand(deps, kept)) return { status: "pending" };
    await store.dropSubmission(deps.db, checkout.id, signature);
  }
  return null;
}

/** What checkout_pay answers: the confirm result with the checkout's id, price and recipient. */
export type CheckoutPayAnswer = ConfirmResult & { checkoutId: string; amount: string; currency: string; payTo: string };

async function checkoutPayAnswer(deps: Deps, checkout: store.CheckoutRow, result: ConfirmResult): Promise<CheckoutPayAnswer> {
  const token = await splToken(deps, checkout.token);
  return { ...result, checkoutId: checkout.id, amount: formatAmount(checkout.amount, token.decimals), currency: token.key.toUpperCase(), payTo: checkout.payTo };
}

/**
 * checkout_pay with the checkoutId of an earlier call (from its answer, or its error's details): that
 * checkout's outcome, whatever the watcher or a confirm did meanwhile — completed, or `pending` while
 * its payment may still land — and never a new payment. Another wallet's checkout is NOT_FOUND.
 */
export async function resumeCheckout(deps: Deps, productId: string, walletAddress: string, checkoutId: string): Promise<CheckoutPayAnswer> {
  const checkout = await checkoutOf(deps, productId, checkoutId);
  if (checkout.wallet !== walletAddress) throw noCheckout();
  return checkoutPayAnswer(deps, checkout, await settleCheckout(deps, checkout));
}

/** startCheckout with an idempotencyKey another call opened a checkout under first: that one is the purchase. */
export class IdempotencyKeyTaken extends Error {
  constructor() {
    super("another call opened a checkout under this idempotencyKey");
  }
}

/**
 * checkout_pay {idempotencyKey}: the checkout this wallet opened under the key; null when none. A key names
 * one purchase of one product: given again with another product it is VALIDATION_ERROR.
 */
async function checkoutOfKey(deps: Deps, productId: string, walletAddress: string, idempotencyKey: string): Promise<store.CheckoutRow | null> {
  const checkout = await store.findCheckoutByIdempotencyKey(deps.db, walletAddress, idempotencyKey);
  if (checkout !== null && checkout.productId !== productId) {
    throw fieldError("idempotencyKey", `this idempotencyKey names a purchase of another product (${checkout.productId}); give a new key for a new purchase`);
  }
  return checkout;
}

/**
 * checkout_pay {idempotencyKey} (README, decisions.md): the checkout the wallet opened under the key, as a
 * resume answers it, its purchase waited for while a payment of it may still land (as the later of two calls
 * waits); a connected wallet gets a fresh transaction for it when nothing it sent can land. When nothing sent
 * for a custodial wallet's can land (its call ended before paying, or the server stopped before sending), a
 * fresh transaction for it (a CheckoutView), which the caller pays: one purchase per key. Null when the key
 * is new. A retry's currency and maxAmount are held against the checkout's price.
 */
export async function keyedCheckout(
  deps: Deps,
  productId: string,
  walletAddress: string,
  idempotencyKey: string,
  custodial: boolean,
  limits: { maxAmount?: number | string | undefined; currency?: string | undefined },
): Promise<CheckoutPayAnswer | UnsignedCheckout | CheckoutView | null> {
  const found = await checkoutOfKey(deps, productId, walletAddress, idempotencyKey);
  if (found === null) return null;
  try {
    if (!custodial) return await resumeConnectedCheckout(deps, productId, walletAddress, found.id, limits);
    const answer = await resumeCheckout(deps, productId, walletAddress, found.id);
    if (answer.status !== "pending" || answer.checkoutId !== found.id) return answer;
    if (await paymentMayLand(deps, found.id)) {
      try {
        return await followCheckout(deps, productId, walletAddress, found.id);
      } catch (err) {
        // Its payment stopped being able to land while this call waited: the caller pays it, below.
        if (!(err instanceof AppError && err.code === "CONFLICT")) throw err;
      }
    }
    return await startCheckout(deps, productId, walletAddress, found.id, limits);
  } catch (err) {
    // The key's checkout expired (or closes too soon) unpaid: that key is spent; say which to use.
    if (err instanceof AppError && err.code === "INVALID_STATE" && found.purchaseId === null && pastPaying(deps, found)) {
      throw new AppError("INVALID_STATE", `${err.message} (this idempotencyKey's checkout: give a new idempotencyKey to buy)`, err.extra);
    }
    throw err;
  }
}

/**
 * Whether a transaction /submit kept for the checkout may still land (ledger/landing.ts) or the ledger has
 * it: until none can, the checkout may yet be paid by it.
 */
async function paymentMayLand(deps: Deps, checkoutId: string): Promise<boolean> {
  for (const kept of await store.listSubmissions(deps.db, checkoutId)) if (await sentMayLand(deps, kept)) return true;
  return false;
}

/**
 * checkout_pay {checkoutId} from a custodial wallet: resumeCheckout's answer, but CONFLICT instead of
 * `pending` once nothing kept for the checkout can land (the server stopped between keeping its transaction
 * and sending it, say): only this service signs for the wallet, so nothing else will pay it, and the caller
 * would otherwise hear `pending` until the checkout expires.
 */
export async function resumeCustodialCheckout(deps: Deps, productId: string, walletAddress: string, checkoutId: string): Promise<CheckoutPayAnswer> {
  const answer = await resumeCheckout(deps, productId, walletAddress, checkoutId);
  if (answer.status === "pending" && answer.checkoutId === checkoutId && !(await paymentMayLand(deps, checkoutId))) {
    throw new AppError("CONFLICT", "nothing was paid for this checkout, and nothing sent for it can land any more; call checkout_pay again without checkoutId to buy");
  }
  return answer;
}

/** How long checkout_pay waits for the payment of another call it follows to land, and how often it looks. */
const FOLLOW_WAIT_MS = 30_000;
const FOLLOW_POLL_MS = 400; // a slot; the RPC ledger's own confirmation polls as often

/**
 * checkout_pay that found another call's payment of the product on its way (two calls at once, in this
 * process or another): that checkout's outcome, as resumeCheckout answers it, but waited for while the
 * payment, sent a moment ago, may still land — as the call that sent it waits for it — up to
 * FOLLOW_WAIT_MS, `pending` then. CONFLICT when no transaction of it is left that could land (the other
 * call's payment was refused before it went out): nothing was paid, and a call made again buys.
 */
export async function followCheckout(deps: Deps, productId: string, walletAddress: string, checkoutId: string, waitMs = FOLLOW_WAIT_MS): Promise<CheckoutPayAnswer> {
  const giveUpAt = performance.now() + waitMs;
  for (;;) {
    const answer = await resumeCheckout(deps, productId, walletAddress, checkoutId);
    if (answer.status !== "pending" || performance.now() >= giveUpAt) return answer;
    if (!(await paymentMayLand(deps, checkoutId))) {
      throw new AppError("CONFLICT", "another call's payment of this product by this wallet, which this call waited for, was not made: nothing was paid; call again to buy");
    }
    await new Promise((resolve) => setTimeout(resolve, FOLLOW_POLL_MS));
  }
}

/** What checkout_pay hands a connected wallet to sign: the checkout's transaction, id, price, recipient and expiry. */
export type UnsignedCheckout = { unsignedTransaction: string; checkoutId: string; amount: string; currency: string; payTo: string; expiresAt: string };

export function unsignedCheckout({ transaction, checkoutId, amount, currency, payTo, expiresAt }: CheckoutView): UnsignedCheckout {
  return { unsignedTransaction: transaction, checkoutId, amount, currency, payTo, expiresAt };
}

/**
 * checkout_pay {checkoutId} from a connected wallet: the checkout's outcome, as resumeCheckout answers it;
 * but while it is pending with nothing sent through this service for it that can still land (the signed
 * transaction never came back, was refused, e.g. on an expired blockhash, or was kept and never sent: a
 * server stopped in between), a fresh transaction to sign for the same checkout
 * (paygate.md step 1: a fresh blockhash while it is open), so the wallet does not wait for nothing. One the
 * wallet sent itself is found by its reference once it lands; a wallet that did so waits for that instead.
 */
export async function resumeConnectedCheckout(
  deps: Deps,
  productId: string,
  walletAddress: string,
  checkoutId: string,
  /** checkout_pay's currency and maxAmount, held against the checkout's price before a transaction is handed out. */
  limits: { maxAmount?: number | string | undefined; currency?: string | undefined } = {},
): Promise<CheckoutPayAnswer | UnsignedCheckout> {
  const answer = await resumeCheckout(deps, productId, walletAddress, checkoutId);
  if (answer.status !== "pending" || answer.checkoutId !== checkoutId || (await paymentMayLand(deps, checkoutId))) return answer;
  return unsignedCheckout(await startCheckout(deps, productId, walletAddress, checkoutId, limits));
}

/**
 * checkout_pay's second call from a connected wallet: the transaction its first call handed out, signed by
 * the wallet, submitted as /pay/:productId/submit does, for that checkout only (another wallet's is
 * NOT_FOUND). Answers as a custodial wallet's call: the purchase, or pending while it may still land. The
 * call's currency and maxAmount refuse a checkout priced above them before its transaction is sent.
 */
export async function submitOwnCheckout(
  deps: Deps,
  productId: string,
  walletAddress: string,
  checkoutId: string,
  signedBase64: string,
  limits: PriceLimits = {},
): Promise<CheckoutPayAnswer> {
  const checkout = await checkoutOf(deps, productId, checkoutId);
  if (checkout.wallet !== walletAddress) throw noCheckout();
  // This call would pay: its limits are held against the checkout's own price before anything is sent (not
  // where a payment of it is made or may still land: that one is answered as it is).
  if (checkout.purchaseId === null && !(await paymentMayLand(deps, checkoutId))) await holdLimits(deps, { price: checkout.amount, token: checkout.token }, limits);
  // A keyed checkout is a purchase of its own: another key's payment is not its answer.
  const result = await submitCheckout(deps, productId, checkoutId, signedBase64, { answerRecentPurchase: false, otherCheckouts: checkout.idempotencyKey === null });
  // Another call's payment on its way (two at once): that checkout's outcome, waited for.
  if (result.status === "pending" && result.checkoutId !== undefined && result.checkoutId !== checkoutId) {
    return followCheckout(deps, productId, walletAddress, result.checkoutId);
  }
  return checkoutPayAnswer(deps, checkout, result);
}

/**
 * POST /pay/:productId/confirm: `pending` until the payment is found; idempotent once completed. With
 * `txHash` (a payment the buyer sent itself), that transaction is read first, by its signature: no crowd
 * of strangers' transactions carrying the reference can hide it. One that does not pay this checkout is
 * answered with its refusal.
 */
export async function confirmCheckout(deps: Deps, productId: string, checkoutId: string, txHash?: string): Promise<ConfirmResult> {
  // As /public/verify: a txHash that cannot be a signature is refused, not looked for in vain.
  if (txHash !== undefined && !isTxHash(txHash)) throw fieldError("txHash", "txHash must be a transaction signature (base58 of 64 bytes)");
  const checkout = await checkoutOf(deps, productId, checkoutId);
  if (txHash !== undefined && checkout.purchaseId === null) {
    const sale = await saleOf(deps, checkout);
    if (sale === null) throw noProduct();
    const named = await readPayment(deps, checkout, sale.product, sale.token, txHash);
    if (named instanceof AppError) throw named;
    if (named !== null) return named;
    // Not seen yet (or no such transaction): what the reference shows.
  }
  return settleCheckout(deps, checkout);
}

/** The most unpaid checkouts one transaction is judged against by /public/verify (a valid payment names one). */
const VERIFY_CHECKOUTS = 4;

/**
 * /public/verify's question about a confirmed transaction no purchase names: does it pay one of the owner's
 * checkouts (it carries the checkout's reference)? Then it is recorded as /confirm would, now rather than at
 * the watcher's next look; true when that made the purchase. The transaction in hand is judged (on mainnet
 * it is read once more, finalized, as purchases are judged there); a chain failure is thrown, not a "no".
 */
export async function recordPaymentOf(deps: Deps, owner: string, tx: LedgerTransaction): Promise<boolean> {
  let keys: readonly string[];
  try {
    keys = parseTransaction(tx.wire, { loadedAddresses: tx.loadedAddresses }).accountKeys;
  } catch {
    return false; // not a transaction a checkout could be paid with
  }
  const checkouts = await store.findUnpaidCheckoutsByReference(deps.db, owner, keys, VERIFY_CHECKOUTS);
  if (checkouts.length === 0) return false;
  const judged = waitsForFinality(deps.config.network) ? await deps.ledger.getTransaction(tx.signature, { finalized: true }) : tx;
  if (judged === null) return false; // not final yet: not a purchase yet
  let recorded = false;
  for (const checkout of checkouts) {
    const sale = await saleOf(deps, checkout);
    if (sale === null) continue;
    const outcome = await judgePayment(deps, checkout, sale.product, sale.token, judged);
    if (!(outcome instanceof AppError) && outcome.status === "completed") recorded = true;
  }
  return recorded;
}

/**
 * The signature of a signed transaction (standard base64 of its wire bytes) that carries `reference` and
 * that the ledger has; null otherwise.
 */
async function paymentOnChain(deps: Deps, signedBase64: string, reference: string): Promise<string | null> {
  const wire = decodeBase64Strict(signedBase64);
  if (wire === null) return null;
  let parsed: ParsedTransaction;
  try {
    parsed = parseTransaction(wire);
  } catch {
    return null;
  }
  if (!parsed.accountKeys.includes(reference)) return null;
  return (await deps.ledger.getTransaction(parsed.signature)) === null ? null : parsed.signature;
}

/** How long a /submit holds its wallet's payments of a product at most, from its look to its record. */
export const SUBMIT_LEASE_MS = 60_000;
/** How often a /submit waiting for that lease looks again. */
const SUBMIT_LEASE_POLL_MS = 25;

const submitBusy = () => new AppError("CONFLICT", "another payment of this product by this wallet is being made; try again in a moment");

/**
 * One /submit at a time per wallet and product: in this process a queue, and across the processes on the
 * database (the server, each `walletgate mcp`) a lease in it, which `work` records its transaction under.
 * A lease its holder never gave back (the process died) is taken once it runs out.
 */
async function oneSubmitAtATime<T>(
  deps: Deps,
  wallet: string,
  productId: string,
  /** `waitedSince`: when this call began to wait for another process's holder (null: it did not wait). */
  work: (lease: store.SubmitLease, waitedSince: number | null) => Promise<T>,
): Promise<T> {
  return deps.paygate.submitLock.run(`${wallet} ${productId}`, async () => {
    const lease = { wallet, productId, holder: newId("lease", deps.random) };
    const giveUpAt = performance.now() + SUBMIT_LEASE_MS + 5_000;
    let waitedSince: number | null = null;
    while (!(await store.takeSubmitLease(deps.db, lease, deps.clock.now(), deps.clock.now() + SUBMIT_LEASE_MS))) {
      waitedSince ??= deps.clock.now();
      if (performance.now() > giveUpAt) throw submitBusy();
      await new Promise((resolve) => setTimeout(resolve, SUBMIT_LEASE_POLL_MS));
    }
    try {
      return await work(lease, waitedSince);
    } finally {
      await store.dropSubmitLease(deps.db, lease).catch(() => undefined); // else it runs out
    }
  });
}

/**
 * POST /pay/:productId/submit: checks the signed transaction against the checkout before sending it (a
 * mismatch costs the buyer nothing), submits it and waits for confirmation (finalized on mainnet), then
 * confirms. A transaction the buyer already sent itself is confirmed, not refused.
 */
export async function submitCheckout(
  deps: Deps,
  productId: string,
  checkoutId: string,
  signedBase64: string,
  /**
   * A purchase of the product this wallet paid through /submit within a checkout's life is answered
   * instead of paying again (the page: a reload after a lost answer). checkout_pay buys anew on purpose.
   */
  options: {
    answerRecentPurchase?: boolean;
    /**
     * false: the wallet's other checkouts of the product are not looked at (checkout_pay with an
     * idempotencyKey: each key is a purchase of its own, and its retry comes back to its own checkout).
     */
    otherCheckouts?: boolean;
  } = {},
): Promise<ConfirmResult> {
  const checkout = await checkoutOf(deps, productId, checkoutId);
  if (checkout.purchaseId !== null) return settleCheckout(deps, checkout);
  let product: store.ProductRow;
  try {
    product = await productForSale(deps, productId);
    if (isClosed(deps, checkout)) throw expired();
  } catch (err) {
    // Archived, or expired, since: a transaction for this checkout (its reference) the buyer sent itself
    // meanwhile is confirmed as /confirm would (it pays if it landed before the checkout expired); anything
    // else is refused as before.
    const landed = err instanceof AppError && err.code === "INVALID_STATE" ? await paymentOnChain(deps, signedBase64, checkout.reference) : null;
    if (landed === null) throw err;
    return confirmCheckout(deps, productId, checkoutId, landed);
  }
  const wire = decodeBase64Strict(signedBase64);
  if (wire === null) throw fieldError("transaction", "transaction must be standard base64");
  const tx = parseTransaction(wire);
  const token = await splToken(deps, checkout.token);
  const paying = checkSignedPayment(checkout, token, tx, wire);
  const used = await store.findPurchaseByTxHash(deps.db, tx.signature);
  if (used !== null && used.checkoutId !== checkout.id) throw new AppError("CONFLICT", "this transaction already paid for another purchase");
  // Only a transaction the wallet really signed is looked into and kept: anyone may open checkouts for
  // any wallet, and must not record transactions in its name.
  await requireSignatures(deps.verifier, tx);
  // From the look for an earlier payment to the record of this one, one /submit at a time per wallet and
  // product: two at once (two tabs, a client retrying, two processes) would each find nothing and both send.
  const decided = await oneSubmitAtATime(deps, checkout.wallet, productId, async (lease, waitedSince): Promise<ConfirmResult | { onChain: boolean }> => {
    // An earlier transaction of this wallet for this product that paid, or may still land, and this one
    // would pay twice: its answer instead (pending: keep confirming) — for this checkout, or for another
    // one the wallet opened (a page reloaded, a checkout opened anew), whose purchase is the buyer's.
    const earlier = await settleSubmissions(deps, checkout, product, token, tx.signature);
    if (earlier !== null) return earlier;
    // A payment of this checkout the wallet sent itself (and whose answer it then lost, say): its purchase,
    // and nothing sent again.
    const ownPayment = await selfSentPayment(deps, checkout, product, token);
    if (ownPayment !== null) return ownPayment;
    const elsewhere = options.otherCheckouts === false ? null : await earlierPayment(deps, productId, checkout.wallet, checkout.id);
    // This checkout will never be paid then: the caller follows the other one (checkout_pay's callers resume
    // it, so that their answer names the checkout that was paid, not this one).
    if (elsewhere !== null) {
      const follow = elsewhere.result.status === "pending" || options.answerRecentPurchase === false;
      return follow ? { status: "pending", checkoutId: elsewhere.checkout.id } : { ...elsewhere.result, checkoutId: elsewhere.checkout.id };
    }
    // Or one the watcher completed meanwhile (it looks every 5 s): paid within a checkout's life and its grace.
    const since = deps.clock.now() - CHECKOUT_TTL_MS - EXPIRY_GRACE_MS;
    if (options.answerRecentPurchase !== false) {
      const [paid] = await store.findRecentlyPaidSubmittedCheckoutsOf(deps.db, productId, checkout.wallet, since, 1);
      if (paid !== undefined && paid.id !== checkout.id) {
        await deps.db.settled();
        const purchase = await store.findPurchase(deps.db, paid.purchaseId!);
        // The wallet itself signed this request (requireSignatures above): its token is its own to see.
        // Only while that purchase still grants access: after a revoke or an expiry, buying again buys.
        if (purchase !== null && (await stillGrants(deps, product, purchase))) return { ...(await completedResult(deps, paid, purchase, undefined, true)), checkoutId: paid.id };
      }
    } else if (waitedSince !== null && options.otherCheckouts !== false) {
      // checkout_pay, which buys anew on purpose, but waited for another process's /submit of this product
      // by this wallet (two calls at once): a payment that completed meanwhile is this call's answer, as in
      // one process, where the later call finds it still landing.
      const [paid] = await store.findRecentlyPaidSubmittedCheckoutsOf(deps.db, productId, checkout.wallet, waitedSince, 1);
      if (paid !== undefined && paid.id !== checkout.id) return { status: "pending", checkoutId: paid.id };
    }
    // A transaction on chain already (sent by the buyer itself) is confirmed, not sent again. Else a
    // transfer of more than the wallet holds would fail on chain and still cost its fee: refused first.
    const onChain = used !== null || (await deps.ledger.getTransaction(tx.signature)) !== null;
    const held = (await deps.ledger.getBalances(checkout.wallet))[checkout.token] ?? 0n;
    if (!onChain && held < checkout.amount) throw amountShortfall(token, held, checkout.amount);
    // Too close to expiry for a transaction sent now to land in time.
    if (!onChain && closingSoon(deps, checkout)) throw tooLate();
    // Recorded before it is sent: whatever happens next (a lost answer, a crash), its outcome is read by
    // its signature, by confirm, the watcher and checkout_pay's retry.
    const validHeight = onChain ? null : await landingHeightLimit(deps);
    const recorded = await store.recordSubmission(deps.db, checkout.id, { signature: tx.signature, blockhash: tx.recentBlockhash, validHeight }, deps.clock.now(), MAX_SUBMISSIONS, lease);
    if (recorded === "lease lost") throw submitBusy();
    if (!recorded) throw new AppError("INVALID_STATE", `${MAX_SUBMISSIONS} transactions were already sent for this checkout; start a new one`);
    return { onChain };
  });
  if (!("onChain" in decided)) return decided;
  if (decided.onChain) return settleCheckout(deps, checkout);
  try {
    // Tried before it is executed, as the service's own transfers are: the balance read above may be stale
    // (another purchase of the wallet, under another lock, spent it since), and a payment that cannot be
    // made is then INSUFFICIENT_FUNDS with nothing recorded or charged, not a failed transaction and its fee.
    await deps.ledger.submit(wire, { finalized: waitsForFinality(deps.config.network), ownTransfer: true });
  } catch (err) {
    // CONFLICT here means the ledger already has this very transaction: go on and confirm it.
    if (err instanceof AppError && err.code === "CONFLICT") return settleCheckout(deps, checkout);
    // Refused before it was sent (a refusal after sending names its signature: it may have landed, failed
    // or not): it can never land, and nothing need wait for it.
    const sentFirst = err instanceof AppError && typeof (err.extra.details as { signature?: unknown } | undefined)?.signature === "string";
    if (err instanceof AppError && (err.code === "TRANSACTION_REJECTED" || err.code === "INSUFFICIENT_FUNDS") && !sentFirst) {
      await store.dropSubmission(deps.db, checkout.id, tx.signature);
      if (err.code === "INSUFFICIENT_FUNDS") throw await shortfallOf(deps, checkout, token, paying, err);
    }
    throw err;
  }
  return settleCheckout(deps, checkout);
}

/**
 * The wallet holds less of the price's token than the price: `details` {reason "amount", currency, held,
 * needed} (amounts in whole tokens), for a page or a client to word it without reading the message.
 */
function amountShortfall(token: SplToken, held: bigint, needed: bigint): AppError {
  const currency = token.key.toUpperCase();
  const [has, needs] = [formatAmount(held, token.decimals), formatAmount(needed, token.decimals)];
  return new AppError("INSUFFICIENT_FUNDS", `the wallet holds ${has} ${currency}; this purchase needs ${needs} ${currency}`, {
    details: { reason: "amount", currency, held: has, needed: needs },
  });
}

/**
 * The ledger's INSUFFICIENT_FUNDS for a payment the balance check let through, said from the balances: less
 * of the token than the transaction sends ("amount": spent meanwhile, or a payment above the price), else SOL
 * for the network fee and any account the payment opens ("fee"; each ledger words that its own way). The
 * ledger's own error when the balances cannot be read.
 */
async function shortfallOf(deps: Deps, checkout: store.CheckoutRow, token: SplToken, paying: bigint, err: AppError): Promise<AppError> {
  const balances = await deps.ledger.getBalances(checkout.wallet).catch(() => null);
  if (balances === null) return err;
  const held = balances[checkout.token] ?? 0n;
  if (held < paying) return amountShortfall(token, held, paying);
  const sol = formatAmount(balances.sol ?? 0n, 9);
  return new AppError("INSUFFICIENT_FUNDS", `the wallet holds ${sol} SOL, too little for the network fee and any account this payment opens`, {
    details: { reason: "fee", currency: "SOL", held: sol },
  });
}

export type CheckoutWatcher = {
  /** One bounded round: returns how many checkouts it completed or expired. */
  /** One round; ends after the checkout in hand once `stopping` aborts (shutdown). */
  runOnce(stopping?: AbortSignal): Promise<number>;
};

/**
 * Settles open checkouts in rounds of at most `batchSize`, walking them by id so every open checkout gets
 * its turn; one still unpaid `EXPIRY_GRACE_MS` after its expiry is closed. A chain outage expires nothing.
 */
export function createCheckoutWatcher(deps: Deps, options: { batchSize?: number } = {}): CheckoutWatcher {
  const batchSize = options.batchSize ?? WATCH_BATCH;
  let after = "";
  return {
    async runOnce(stopping) {
      // First the checkouts /submit sent a payment for lately (a crash may have cut its answer off), then
      // the next of all open ones in turn: a paid one is completed on the first round after a restart.
      const submitted = await store.listRecentlySubmittedOpenCheckouts(deps.db, deps.clock.now() - CHECKOUT_TTL_MS - EXPIRY_GRACE_MS, SUBMITTED_FIRST);
      const inTurn = await store.listOpenCheckouts(deps.db, after, batchSize);
      after = inTurn.length < batchSize ? "" : inTurn.at(-1)!.id;
      const seen = new Set(submitted.map((c) => c.id));
      const batch = [...submitted, ...inTurn.filter((c) => !seen.has(c.id))];
      let changed = 0;
      for (const checkout of batch) {
        if (stopping?.aborted) break;
        let open = false; // transactions left for the next look: it may be paid
        try {
          const result = await settleCheckout(deps, checkout, (why) => (open = why === "unread"));
          if (result.status === "completed") {
            changed++;
            continue;
          }
          if (open) continue;
        } catch (err) {
          if (outcomeUnknown(err)) {
            // Cut short by a shutdown (the ledger stopped under it): the next start settles it.
            if (!stopping?.aborted) deps.log.warn("checkout not settled", { checkoutKey: checkoutKey(checkout.id), productId: checkout.productId, error: errorText(err) });
            continue;
          }
        }
        if (deps.clock.now() > checkout.expiresAt + EXPIRY_GRACE_MS && (await store.expireCheckout(deps.db, checkout.id))) changed++;
      }
      return changed;
    },
  };
}
