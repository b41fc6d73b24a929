// The marketplace's escrow: one custodial service wallet per network, and the signed transactions that
// move money into and out of it (orders.ts decides when and how they are sent).
import type { Deps } from "../../deps.ts";
import { AppError, fieldError } from "../../errors.ts";
import { decodeBase64Strict, encodeBase58, encodeBase64 } from "../../lib/encoding.ts";
import { sha256Hex } from "../../lib/hash.ts";
import { referenceSignatures, waitsForFinality, type LedgerTransaction, type ParsedTransfer, type TransferIntent } from "../../ledger/ledger.ts";
import {
  ATA_PROGRAM, SYSTEM_PROGRAM, TOKEN_2022_PROGRAM, TOKEN_PROGRAM, associatedTokenAddress, parseTransaction, transfersOf, type LoadedAddresses, type TokenAccountInfo,
} from "../../ledger/transactions.ts";
import { createCustodialWallet } from "../../wallets/custody.ts";
import { requireFundsToSign } from "../../wallets/funds.ts";
import { signerFor } from "../../wallets/signer.ts";
import * as store from "./store.ts";

/** SOL the escrow keeps for fees and recipients' token accounts; on localnet it is topped up from the faucet. */
const ESCROW_SOL_FLOOR = 50_000_000n; // 0.05 SOL
const ESCROW_SOL_TOP_UP = 1_000_000_000n; // 1 SOL

/**
 * The network's escrow wallet, created (custodial) on first use. Two first uses at once may each create a
 * wallet; the first one recorded stands and the other is never used (it holds nothing).
 */
export async function escrowWallet(deps: Deps): Promise<string> {
  const network = deps.config.network;
  const known = await store.findEscrow(deps.db, network);
  if (known !== null) return known;
  const { address } = await createCustodialWallet(deps, `marketplace escrow (${network})`);
  return store.saveEscrow(deps.db, network, address, deps.clock.now());
}

/** Keeps enough SOL in the escrow for the fees of its transfers (localnet faucet; elsewhere the operator funds it). */
async function fuelEscrow(deps: Deps, escrow: string): Promise<void> {
  if (deps.config.network !== "localnet") return;
  if ((await deps.ledger.getBalances(escrow)).sol! < ESCROW_SOL_FLOOR) await deps.ledger.airdrop(escrow, { sol: ESCROW_SOL_TOP_UP });
}

const messageHash = (wire: Uint8Array) => sha256Hex(parseTransaction(wire).messageBytes);
/**
 * What an offer to a connected consumer binds: the message to sign, the payment it makes, and the reference key
 * its transfer carries (which the message names too), by which it is found once sent. Offers made before
 * references have none: those are looked for in the consumer's history.
 */
const offerOf = (hash: string, intent: TransferIntent) =>
  `${hash}:${intent.token}:${intent.amount}:${intent.to}` + (intent.reference === undefined ? "" : `:${intent.reference}`);

export type EscrowPayment =
  | { kind: "signed"; wire: Uint8Array; intent: TransferIntent }
  /** For a connected consumer to sign; `offerHash` names the message it must sign and the payment it makes. */
  | { kind: "unsigned"; transaction: string; wire: Uint8Array; offerHash: string };

/**
 * Consumer → escrow: signed here for a custodial consumer; for a connected one, unsigned (nothing moves)
 * unless it passes `signed`, which must pay the offer made to it last (`offerHash`, `offerWire`; paysOffer).
 */
export async function escrowPayment(
  deps: Deps,
  payment: { from: string; token: string; amount: bigint; signed?: string | undefined; offerHash: string | null; offerWire: Uint8Array | null },
): Promise<EscrowPayment> {
  const escrow = await escrowWallet(deps);
  const intent: TransferIntent = { from: payment.from, to: escrow, token: payment.token, amount: payment.amount };
  const signer = await signerFor(deps, payment.from);
  if (signer.kind === "custodial") {
    // Its payment is signed here: a transaction it passes would be ignored while money moves, so it is refused.
    if (payment.signed !== undefined) {
      throw fieldError("signedTransaction", "signedTransaction is for connected wallets: this wallet is custodial and its escrow payment is signed by the service; call without it");
    }
    return { kind: "signed", wire: await signer.sign(await deps.ledger.buildTransfer(intent)), intent };
  }
  if (payment.signed === undefined) {
    const offered: TransferIntent = { ...intent, reference: encodeBase58(deps.random(32)) };
    const wire = await deps.ledger.buildTransfer(offered);
    // Handed out only when the consumer's balances cover it (as wallet_transfer's): a payment it cannot make
    // would fail on chain and still cost its fee.
    await requireFundsToSign(deps, offered, wire);
    return { kind: "unsigned", transaction: encodeBase64(wire), wire, offerHash: offerOf(messageHash(wire), offered) };
  }
  const wire = decodeBase64Strict(payment.signed);
  if (wire === null) throw fieldError("signedTransaction", "signedTransaction must be standard base64");
  try {
    parseTransaction(wire, { loadedAddresses: null });
  } catch {
    throw fieldError("signedTransaction", "signedTransaction is not a serialized Solana transaction");
  }
  // The offer names its message and what it pays: a transaction offered for another token or amount is refused.
  // (What the bytes move is checked before anything is sent: requireExactTransfer, orders.ts.)
  const offer = payment.offerHash === null ? null : parseOffer(payment.offerHash);
  const samePayment = offer !== null && offer.intent.token === intent.token && offer.intent.amount === intent.amount && offer.intent.to === intent.to;
  if (!samePayment || !paysOffer(wire, null, { offer: offer!, intent, mint: await mintOf(deps, intent.token) }, blockhashOf(payment.offerWire))) {
    throw new AppError("PAYMENT_MISMATCH", "sign the escrow transfer this tool returned last (call it without signedTransaction for a fresh one)", {
      details: { reason: "transaction" },
    });
  }
  return { kind: "signed", wire, intent };
}

type Offer = NonNullable<ReturnType<typeof parseOffer>>;

/** The blockhash of an offer's transaction (kept since migration 21); null for an older record. */
function blockhashOf(offerWire: Uint8Array | null): string | null {
  return offerWire === null ? null : parseTransaction(offerWire).recentBlockhash;
}

/** An offer as a payment is judged against it: its record, the payment it makes (from its consumer), and the mint of its token. */
type OfferCheck = { offer: Offer; intent: TransferIntent; mint: string | null };

const mintOf = async (deps: Deps, token: string) => (await deps.ledger.tokens()).find((t) => t.key === token)?.mint ?? null;

/** Whether an instruction's data is the System program's AdvanceNonceAccount (instruction 4). */
function advancesNonce(data: Uint8Array): boolean {
  return data.length === 4 && new DataView(data.buffer, data.byteOffset, 4).getUint32(0, true) === 4;
}

/** Programs whose instructions a variant of an offer may not carry besides its one transfer: they move or open accounts. */
const ACCOUNT_PROGRAMS: ReadonlySet<string> = new Set([SYSTEM_PROGRAM, TOKEN_PROGRAM, TOKEN_2022_PROGRAM, ATA_PROGRAM]);

/**
 * Whether these bytes are the payment of an offer: its very message; or, for an offer with a reference, one
 * carrying the reference whose only account-moving instruction is the offered TransferChecked — of the mint,
 * from the consumer's associated token account under its authority, into the escrow's — with what a
 * consumer's wallet adds around it (compute settings, a memo, another program's guard): before it lands only
 * the consumer knows the reference. What it moves is the caller's to check too (requireExactTransfer).
 * `onBlockhash`: to be sent now, it must be on the offer's blockhash as well, so that it can land no later than
 * the offer could (a new offer follows once that one cannot); a landed one is the consumer's payment whatever
 * its blockhash. `loadedAddresses`: a landed transaction's (instructions of programs the service does not
 * model are then read, not refused).
 */
function paysOffer(wire: Uint8Array, loadedAddresses: LoadedAddresses | null, check: OfferCheck | null, onBlockhash?: string | null): boolean {
  if (check === null) return false;
  const { offer, intent, mint } = check;
  let tx: ReturnType<typeof parseTransaction>;
  try {
    tx = parseTransaction(wire, { loadedAddresses });
  } catch {
    return false;
  }
  if (sha256Hex(tx.messageBytes) === offer.hash) return true;
  if (offer.reference === undefined || mint === null || !tx.accountKeys.includes(offer.reference)) return false;
  if (onBlockhash !== undefined && tx.recentBlockhash !== onBlockhash) return false;
  const key = (i: number) => tx.accountKeys[i];
  const source = associatedTokenAddress(intent.from, mint);
  const destination = associatedTokenAddress(intent.to, mint);
  let transfers = 0;
  for (const [i, ix] of tx.instructions.entries()) {
    if (ix.program === "computeBudget" || ix.program === "memo") continue;
    if (ix.program === "other" && !ACCOUNT_PROGRAMS.has(ix.programId)) continue;
    // A durable nonce's advance, first as the runtime requires: the consumer signed offline, its blockhash the nonce.
    if (i === 0 && ix.program === "other" && ix.programId === SYSTEM_PROGRAM && advancesNonce(ix.data)) continue;
    // The escrow's account opened as the offer opens it (idempotent, paid by the consumer).
    if (ix.program === "ata" && ix.type !== "invalid" && key(ix.account) === destination) continue;
    const offered =
      ix.program === "token" && ix.type === "transferChecked" &&
      key(ix.mint) === mint && key(ix.source) === source && key(ix.destination) === destination && key(ix.owner) === intent.from;
    if (!offered) return false;
    transfers++;
  }
  return transfers === 1;
}

/** What moved must be exactly the payment asked for: one transfer, from the consumer, to the escrow, of the price. */
export function requireExactTransfer(transfers: readonly ParsedTransfer[], intent: TransferIntent): void {
  const mismatch = (reason: string, message: string) => new AppError("PAYMENT_MISMATCH", message, { details: { reason } });
  if (transfers.length !== 1) throw mismatch("transfers", "the escrow payment must be one transfer");
  const [t] = transfers;
  if (t!.from !== intent.from) throw mismatch("payer", "the escrow payment must come from the consumer's wallet");
  if (t!.to !== intent.to) throw mismatch("recipient", "the escrow payment must go to the escrow wallet");
  if (t!.token !== intent.token) throw mismatch("mint", `the escrow payment must be in ${intent.token}`);
  if (t!.amount !== intent.amount) throw mismatch("amount", "the escrow payment must be exactly the order's price");
}

/**
 * What a payment's bytes would move, read before they are sent: on an RPC network nothing is moved alongside
 * the order's change for requireExactTransfer to look at, so it looks at this. The token accounts known are
 * the payer's and the escrow's associated ones; a transfer touching any other is kept, between the accounts
 * it names (and so refused).
 */
export async function transfersOfWire(deps: Deps, wire: Uint8Array, intent: TransferIntent): Promise<ParsedTransfer[]> {
  const tokens = (await deps.ledger.tokens()).filter((t) => t.mint !== null);
  const accounts = new Map<string, TokenAccountInfo>();
  for (const t of tokens) {
    for (const owner of [intent.from, intent.to]) accounts.set(associatedTokenAddress(owner, t.mint!), { mint: t.mint!, owner, decimals: t.decimals });
  }
  const mintKey = (mint: string) => tokens.find((t) => t.mint === mint)?.key ?? null;
  return transfersOf(parseTransaction(wire), (a) => accounts.get(a) ?? null, mintKey, { keepUnresolved: true });
}

/** How far back, before an offer was recorded, a transaction paying it is looked for (clocks of the chain and of this server differ). */
const OFFER_CLOCK_SLACK_MS = 5 * 60_000;
/** An offer without a reference: the consumer's history is read this many transactions at a time, at most OFFER_SEARCH_PAGES times. */
const OFFER_SEARCH_PAGE = 100;
const OFFER_SEARCH_PAGES = 10;
/**
 * Transactions carrying an offer's reference read per look, oldest first (one RPC request each on devnet and
 * mainnet). Before the payment lands only the consumer knows the reference, so the payment it sent is the first
 * of them; strangers can only add theirs after it.
 */
export const OFFER_REFERENCE_READS = 20;

/** Whether an offer (`offerOf`) makes this payment: token and amount (the recipient is always the escrow). */
export function offerPays(offerHash: string, token: string, amount: bigint): boolean {
  const offer = parseOffer(offerHash);
  return offer !== null && offer.intent.token === token && offer.intent.amount === amount;
}

/** Whether looking for an offer's payment reads its consumer's history (an offer made before references). */
export function offerSearchReadsHistory(offerHash: string): boolean {
  const offer = parseOffer(offerHash);
  return offer !== null && offer.reference === undefined;
}

/** The token key an offer pays in (`usdc`, or the service token's); null for a record it cannot read. */
export function offerToken(offerHash: string): string | null {
  return parseOffer(offerHash)?.intent.token ?? null;
}

/** An offer's parts (`offerOf`): the message hash, the payment it makes and its reference; null when it is not one. */
function parseOffer(offerHash: string): { hash: string; intent: Omit<TransferIntent, "from" | "reference">; reference: string | undefined } | null {
  const [hash, token, amount, to, reference, ...rest] = offerHash.split(":");
  if (hash === undefined || token === undefined || amount === undefined || to === undefined || rest.length > 0 || !/^[0-9]+$/.test(amount)) return null;
  return { hash, intent: { token, amount: BigInt(amount), to }, reference };
}

/**
 * The escrow payment a connected consumer signed and sent itself (`wallet_submit_transaction`, or its own
 * RPC) for the offer recorded at `offeredAt`, without presenting it to `consumer_accept_order`: a confirmed
 * transaction that pays the offer (paysOffer: its message, or a wallet's variant of it) and moves exactly the
 * offered payment; null when there is none. Looked at before an order with an offer ends, so that money sent to the escrow for it is not left
 * there. It is looked for among the transactions carrying the offer's reference (a listing, and a read or two);
 * an offer made before references, in the consumer's history back to the offer's time (at most
 * OFFER_SEARCH_PAGES pages; a busier wallet than that is logged and not searched further). A transaction that
 * already paid another order is refused when the order is finished (orders.ts).
 */
export async function sentOffer(
  deps: Deps,
  consumer: string,
  offered: { offerHash: string; offeredAt: number },
  /** Told when the look reads the consumer's history (up to ~1,000 RPC requests): the timers count it so. */
  readsHistory: () => void = () => {},
): Promise<{ signature: string; token: string; amount: bigint } | null> {
  const offer = parseOffer(offered.offerHash);
  if (offer === null) return null;
  const intent: TransferIntent = { from: consumer, ...offer.intent };
  const check: OfferCheck = { offer, intent, mint: await mintOf(deps, intent.token) };
  if (offer.reference !== undefined) {
    const found = await sentWithReference(deps, check);
    if (found !== "crowded") return found;
    // Strangers can crowd a reference once the payment on it is public (~0.05 SOL for 10,000 transactions):
    // the consumer's own history still holds it.
    deps.log.warn("escrow offer's reference crowded: its consumer's history is read instead", { consumer });
  }
  readsHistory();
  const since = offered.offeredAt - OFFER_CLOCK_SLACK_MS;
  let before: string | undefined;
  for (let page = 0; page < OFFER_SEARCH_PAGES; page++) {
    // A payment listed but not readable yet must not read as "not sent" (the order would end with the money
    // in escrow): the page is asked complete; when it is not, what is readable is still looked at, and
    // only if the offer is not among it is CHAIN_UNAVAILABLE the answer (asked again later).
    const query = { limit: OFFER_SEARCH_PAGE, before, finalized: waitsForFinality(deps.config.network) };
    let unreadable: AppError | null = null;
    let txs: LedgerTransaction[];
    try {
      txs = await deps.ledger.history(consumer, { ...query, complete: true });
    } catch (err) {
      if (!(err instanceof AppError) || err.code !== "CHAIN_UNAVAILABLE") throw err;
      unreadable = err;
      txs = await deps.ledger.history(consumer, query);
    }
    const scanned = scanForOffer(txs, check, since);
    if (scanned !== "ended" && scanned !== "on") return scanned;
    if (unreadable !== null) throw unreadable;
    if (scanned === "ended" || txs.length === 0) return null;
    // Not "fewer than a page, so the end": an RPC history leaves out what its node could not return.
    before = txs[txs.length - 1]!.signature;
  }
  deps.log.warn("escrow payment not searched to the offer's time: the consumer's history is longer", { consumer, pages: OFFER_SEARCH_PAGES });
  return null;
}

/**
 * sentOffer for an offer with a reference: its transactions oldest first, at most OFFER_REFERENCE_READS of them.
 * One listed but not readable yet (a node behind) is CHAIN_UNAVAILABLE (looked at again later), never "not
 * sent"; a reference too crowded to reach its oldest is "crowded".
 */
async function sentWithReference(deps: Deps, check: OfferCheck) {
  const { offer, intent } = check;
  const finalized = waitsForFinality(deps.config.network);
  const { signatures, complete } = await referenceSignatures(deps.ledger, offer.reference!, finalized);
  if (!complete) return "crowded" as const;
  let unreadable = false;
  for (const signature of signatures.slice(0, OFFER_REFERENCE_READS)) {
    const tx = await deps.ledger.getTransaction(signature, { finalized });
    if (tx === null) {
      unreadable = true;
      continue;
    }
    const scanned = scanForOffer([tx], check, 0);
    if (scanned !== "on" && scanned !== "ended") return scanned;
  }
  if (unreadable) throw new AppError("CHAIN_UNAVAILABLE", "a transaction carrying the offer's reference is listed but cannot be read yet");
  if (signatures.length > OFFER_REFERENCE_READS) deps.log.warn("escrow payment not searched past the offer reference's oldest transactions", { consumer: intent.from, transactions: signatures.length });
  return null;
}

/** A page of history, newest first: the offer's payment, "ended" past the offer's time, or "on" to the next page. */
function scanForOffer(txs: readonly LedgerTransaction[], check: OfferCheck, since: number) {
  const { intent } = check;
  for (const tx of txs) {
    // A node may not know a transaction's time (0): it is looked at, and the search goes on past it.
    if (tx.timestamp > 0 && tx.timestamp < since) return "ended" as const;
    if (tx.status !== "confirmed" || !paysOffer(tx.wire, tx.loadedAddresses, check)) continue;
    try {
      requireExactTransfer(tx.transfers, intent);
    } catch {
      continue;
    }
    return { signature: tx.signature, token: intent.token, amount: intent.amount };
  }
  return "on" as const;
}

/** Why a payout waits: its recipient has no token account, and the escrow does not pay to open one. */
export const RECIPIENT_ACCOUNT_MISSING = "recipient_account_missing";

/**
 * On an RPC network (escrowPayout asks only there) the escrow does not open a party's token account: the rent it would pay (~0.002 SOL)
 * goes to whoever closes the account, so a party closing its account after each payout of a tiny order
 * would draw the operator's SOL out of the escrow, one order at a time. A payout to a party without an
 * account waits for it (`INVALID_STATE`, reason `recipient_account_missing`). The embedded ledger's escrow
 * is fuelled by the faucet and opens accounts as any sender does.
 */
async function requireRecipientAccount(deps: Deps, party: "provider" | "consumer", wallet: string, tokenKey: string): Promise<void> {
  const mint = await mintOf(deps, tokenKey);
  if (mint === null) return;
  if (await deps.ledger.tokenAccountExists(associatedTokenAddress(wallet, mint))) return;
  const symbol = tokenKey.toUpperCase();
  throw new AppError(
    "INVALID_STATE",
    `the ${party}'s wallet ${wallet} has no ${symbol} token account, and the escrow does not pay to open one (any ${symbol} transfer to the wallet opens it); the order stays as it is: ask again once it has one (a payout that fell due is tried again every hour)`,
    { details: { reason: RECIPIENT_ACCOUNT_MISSING, wallet, token: tokenKey } },
  );
}

/**
 * Escrow → `to` (and `split` to the fee wallet, same transaction), signed with the escrow's key. `party`:
 * the order's side `to` is, whose token account must exist already (requireRecipientAccount); null for
 * the operator's fee wallet.
 */
export async function escrowPayout(
  deps: Deps,
  payout: { to: string; party: "provider" | "consumer" | null; token: string; amount: bigint; split?: { to: string; amount: bigint } | undefined; memo: string },
): Promise<Uint8Array> {
  // A party's account on an RPC network: checked first, and never opened by the build (a close landing between
  // the two makes the payout fail on chain, nothing moved, rather than reopen it at the escrow's cost).
  const partyOnChain = payout.party !== null && deps.config.network !== "localnet";
  if (partyOnChain) await requireRecipientAccount(deps, payout.party!, payout.to, payout.token);
  const escrow = await escrowWallet(deps);
  await fuelEscrow(deps, escrow);
  const signer = await signerFor(deps, escrow);
  if (signer.kind !== "custodial") throw new Error("the escrow wallet must be custodial");
  const openRecipientAccount = partyOnChain ? false : undefined;
  return signer.sign(
    await deps.ledger.buildTransfer({ from: escrow, to: payout.to, token: payout.token, amount: payout.amount, split: payout.split, memo: payout.memo, openRecipientAccount }),
  );
}
