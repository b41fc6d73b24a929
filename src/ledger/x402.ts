// payment_create (ledger.md): x402 `exact`-scheme payments on Solana — a v0 TransferChecked transaction signed
// by the paying wallet only, wrapped in the X-PAYMENT (v1) or PAYMENT-SIGNATURE (v2) header payload. Never submitted.
import { ComputeBudgetProgram, PublicKey, type TransactionInstruction } from "@solana/web3.js";
import { createTransferCheckedInstruction } from "@solana/spl-token";
import type { Network } from "../config.ts";
import type { Deps } from "../deps.ts";
import { amountField, AppError, fieldError } from "../errors.ts";
import { firstCharacters } from "../lib/text.ts";
import { formatAmount } from "../lib/amounts.ts";
import { bytesToHex, decodeAddress, decodeBase64Strict, encodeBase64, isAddress } from "../lib/encoding.ts";
import { signerFor } from "../wallets/signer.ts";
import { auditHandedOut } from "./create.ts";
import { MAX_AMOUNT_BASE_UNITS, blockhashExpiresAt, requireTransferAmount, type TokenInfo } from "./ledger.ts";
import { requireWalletRecipient } from "./recipients.ts";
import { associatedTokenAddress, compileTransaction, isEmptySignature, memoInstruction, memoOf, parseTransaction, type ParsedTransaction, type TokenAccountInfo } from "./transactions.ts";

export type X402Version = 1 | 2;
export type X402Header = "X-PAYMENT" | "PAYMENT-SIGNATURE";

/** What payment_create is asked; `amount` is in base units of `token` (the tool edge parsed it). */
export type PaymentParams = {
  to?: string;
  /** Base units (bigint), or whole tokens as the tool's caller gives them (read with the token's decimals). */
  amount?: bigint | number | string;
  token?: string;
  feePayer?: string;
  memo?: string;
  x402Version?: X402Version;
  /** One entry of a 402 answer's `accepts` (v1 or v2 shape), as the paid resource sent it. */
  requirements?: unknown;
  /** Base64 wire bytes: the connected wallet's signature over the transaction this tool handed out. */
  signedTransaction?: string;
};

/** x402 v2 PaymentRequirements (`accepts[i]`); other fields a resource sends are kept as they are. */
export type X402RequirementsV2 = {
  scheme: string;
  network: string;
  amount: string;
  asset: string;
  payTo: string;
  maxTimeoutSeconds: number;
  extra?: Record<string, unknown> | null;
  [field: string]: unknown;
};

export type X402PayloadV1 = { x402Version: 1; scheme: "exact"; network: string; payload: { transaction: string } };
export type X402PayloadV2 = { x402Version: 2; accepted: X402RequirementsV2; payload: { transaction: string } };
export type X402Payload = X402PayloadV1 | X402PayloadV2;

/** What both answers say about the payment; `amount` is a decimal string in whole-token units. */
export type PaymentSummary = {
  x402Version: X402Version;
  network: string;
  /** ISO time the transaction's blockhash stops being accepted. */
  expiresAt: string;
  from: string;
  to: string;
  token: string;
  amount: string;
  feePayer: string;
  memo: string;
};

export type PaymentHeaderResult = PaymentSummary & {
  header: X402Header;
  /** The header's value: base64 of the JSON payload. */
  value: string;
  payload: X402Payload;
};

/** A connected wallet signs `unsignedTransaction` and calls again with the same params plus `signedTransaction`. */
export type UnsignedPaymentResult = PaymentSummary & { unsignedTransaction: string };

export type PaymentResult = PaymentHeaderResult | UnsignedPaymentResult;

/** The x402 `exact` scheme's fixed compute budget (what @x402/svm's client sends and its facilitator expects). */
export const X402_COMPUTE_UNIT_LIMIT = 20_000;
export const X402_COMPUTE_UNIT_PRICE_MICRO_LAMPORTS = 1n;
/** x402's limit on a seller's memo. */
export const X402_MAX_MEMO_BYTES = 256;
/** v2 `maxTimeoutSeconds` of requirements this service writes itself: about a blockhash's life. */
const DEFAULT_MAX_TIMEOUT_SECONDS = 60;
const RANDOM_MEMO_BYTES = 16;

const V1_NETWORKS: Record<Network, string> = { localnet: "solana-localnet", devnet: "solana-devnet", mainnet: "solana" };
const V2_NETWORKS: Record<Network, string> = {
  localnet: "solana:localnet",
  devnet: "solana:EtWTRABZaYq6iMfeYKouRu166VU2xqa1",
  mainnet: "solana:5eykt4UsFv8P8NJdTREpY1vzqKqZKvdp",
};

/** The x402 name of a NETWORK: v1 names (`solana-devnet`) or v2 CAIP-2 ids (`solana:EtWT…`). */
export function x402Network(network: Network, version: X402Version): string {
  return (version === 1 ? V1_NETWORKS : V2_NETWORKS)[network];
}


type SplToken = TokenInfo & { mint: string };

/** Everything the transaction and its header depend on, resolved from params and requirements. */
type Payment = Readonly<{
  version: X402Version;
  network: string;
  payer: string;
  to: string;
  feePayer: string;
  token: SplToken;
  amount: bigint;
  /** Asked for (params or requirements); null means a random one is drawn for each transaction. */
  memo: string | null;
  /** v2 only: the `accepted` requirements echoed in the payload. */
  accepted: X402RequirementsV2 | null;
}>;

type Requirements = Readonly<{
  version: X402Version;
  network: string;
  amount: bigint;
  payTo: string;
  asset: string;
  feePayer: string | null;
  memo: string | null;
  /** The entry as given, JSON-clean, for v2's `accepted`. */
  raw: Record<string, unknown>;
}>;

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function requiredString(entry: Record<string, unknown>, field: string): string {
  const value = entry[field];
  if (typeof value !== "string" || value === "") throw fieldError(`requirements.${field}`, `requirements.${field} must be a non-empty string`);
  return value;
}

/** x402 amounts are base-unit integer strings (`"10000"` is 0.01 USDC). */
function baseUnitAmount(text: string, field: string): bigint {
  if (!/^\d{1,19}$/.test(text)) throw fieldError(field, `${field} must be an integer amount in base units, got "${firstCharacters(text, 40)}"`);
  const amount = BigInt(text);
  if (amount <= 0n || amount > MAX_AMOUNT_BASE_UNITS) throw fieldError(field, `${field} must be greater than zero and at most 2^63-1 base units`);
  return amount;
}

/** Reads one `accepts[i]` entry; v1 has `maxAmountRequired`, v2 has `amount`. */
function readRequirements(value: unknown): Requirements {
  if (!isRecord(value)) throw fieldError("requirements", "requirements must be one entry of the 402 answer's accepts list");
  if (Array.isArray(value.accepts)) throw fieldError("requirements", "requirements must be one entry of accepts, not the whole 402 answer");
  let raw: Record<string, unknown>;
  try {
    raw = JSON.parse(JSON.stringify(value)) as Record<string, unknown>;
  } catch {
    throw fieldError("requirements", "requirements must be plain JSON");
  }
  const version: X402Version | null = "maxAmountRequired" in raw ? 1 : "amount" in raw ? 2 : null;
  if (version === null) throw fieldError("requirements", "requirements carry neither maxAmountRequired (x402 v1) nor amount (x402 v2)");
  const scheme = requiredString(raw, "scheme");
  if (scheme !== "exact") throw new AppError("NOT_SUPPORTED", `x402 scheme "${firstCharacters(scheme, 40)}" is not supported; only "exact" is`);
  const amountField = version === 1 ? "maxAmountRequired" : "amount";
  const amount = baseUnitAmount(requiredString(raw, amountField), `requirements.${amountField}`);
  if (version === 2 && !(typeof raw.maxTimeoutSeconds === "number" && raw.maxTimeoutSeconds > 0)) {
    throw fieldError("requirements.maxTimeoutSeconds", "requirements.maxTimeoutSeconds must be a positive number");
  }
  const extra = raw.extra ?? null;
  if (extra !== null && !isRecord(extra)) throw fieldError("requirements.extra", "requirements.extra must be an object");
  const feePayer = extra?.feePayer ?? null;
  if (feePayer !== null && typeof feePayer !== "string") throw fieldError("requirements.extra.feePayer", "requirements.extra.feePayer must be an address");
  // x402 treats an empty memo as no memo.
  const memo = extra?.memo === undefined || extra.memo === null || extra.memo === "" ? null : extra.memo;
  if (memo !== null && typeof memo !== "string") throw fieldError("requirements.extra.memo", "requirements.extra.memo must be a string");
  return {
    version,
    network: requiredString(raw, "network"),
    amount,
    payTo: requiredString(raw, "payTo"),
    asset: requiredString(raw, "asset"),
    feePayer,
    memo,
    raw,
  };
}

function requireAddress(address: string, field: string): void {
  if (!isAddress(address)) throw fieldError(field, `${field} is not a Solana address`, {}, "INVALID_ADDRESS"); // not repeated: it may be a secret key
}

function splToken(tokens: readonly TokenInfo[], key: string): SplToken {
  const token = tokens.find((t) => t.key === key.toLowerCase()); // in any case, as wallet_transfer's
  if (token === undefined) throw fieldError("token", `unknown token "${firstCharacters(key, 40)}"; one of ${tokens.map((t) => t.key).join(", ")}`);
  // The exact scheme moves SPL tokens with TransferChecked; it has no native SOL transfer.
  if (token.kind === "native") throw new AppError("NOT_SUPPORTED", "x402 exact payments move SPL tokens; sol cannot be paid this way");
  if (token.mint === null) throw new AppError("NOT_SUPPORTED", `${token.key} has no mint on this network`);
  return { ...token, mint: token.mint };
}

/** An amount param in base units: as given when a bigint, else whole tokens read with the token's decimals. */
function baseUnits(amount: PaymentParams["amount"], token: SplToken): bigint | undefined {
  return amount === undefined || typeof amount === "bigint" ? amount : amountField(amount, token.decimals, "amount");
}

/** A param that is also in the requirements must say the same. */
function agree<T>(field: string, given: T | undefined, required: T, shown: (value: T) => string = String): void {
  if (given !== undefined && given !== required) {
    throw fieldError(field, `${field} ${shown(given)} disagrees with the payment requirements (${shown(required)})`);
  }
}

async function resolvePayment(deps: Deps, payer: string, params: PaymentParams): Promise<Payment> {
  const tokens = await deps.ledger.tokens();
  const configuredFeePayer = deps.config.x402FeePayer;
  let payment: Payment;
  // A value the requirements gave is named by its place in them (params that give it too must agree).
  let feePayerField = "feePayer";
  let memoField = "memo";
  if (params.requirements !== undefined) {
    const req = readRequirements(params.requirements);
    if (req.feePayer !== null) feePayerField = "requirements.extra.feePayer";
    if (req.memo !== null) memoField = "requirements.extra.memo";
    agree("x402Version", params.x402Version, req.version);
    const network = x402Network(deps.config.network, req.version);
    if (req.network !== network) {
      throw fieldError("requirements.network", `the requirements are for network "${firstCharacters(req.network, 60)}"; this service pays on "${network}"`);
    }
    requireAddress(req.payTo, "requirements.payTo");
    requireAddress(req.asset, "requirements.asset");
    agree("to", params.to, req.payTo);
    let token: SplToken;
    if (params.token !== undefined) {
      token = splToken(tokens, params.token);
      if (token.mint !== req.asset) throw fieldError("token", `token ${token.key} (mint ${token.mint}) disagrees with the payment requirements' asset ${req.asset}`);
    } else {
      const known = tokens.find((t) => t.mint === req.asset);
      if (known === undefined) {
        throw new AppError("NOT_SUPPORTED", `asset ${req.asset} is not a token this service pays with (${tokens.filter((t) => t.mint !== null).map((t) => t.key).join(", ")})`);
      }
      token = splToken(tokens, known.key);
    }
    agree("amount", baseUnits(params.amount, token), req.amount, (units) => formatAmount(units, token.decimals));
    if (req.feePayer !== null) agree("feePayer", params.feePayer, req.feePayer);
    if (req.memo !== null) agree("memo", params.memo, req.memo);
    const feePayer = req.feePayer ?? params.feePayer ?? configuredFeePayer;
    if (feePayer === null) throw fieldError("feePayer", "the requirements name no extra.feePayer; give feePayer (or configure X402_FEE_PAYER)");
    payment = {
      version: req.version,
      network,
      payer,
      to: req.payTo,
      feePayer,
      token,
      amount: req.amount,
      memo: req.memo ?? params.memo ?? null,
      // The resource matches `accepted` against what it asked for: echo its entry unchanged.
      accepted: req.version === 2 ? (req.raw as X402RequirementsV2) : null,
    };
  } else {
    const version = params.x402Version ?? 1; // the source document names the X-Payment header: v1
    if (params.to === undefined) throw fieldError("to", "to is required");
    if (params.amount === undefined) throw fieldError("amount", "amount is required");
    if (params.token === undefined) throw fieldError("token", "token is required");
    const token = splToken(tokens, params.token);
    const amount = baseUnits(params.amount, token)!;
    const feePayer = params.feePayer ?? configuredFeePayer;
    if (feePayer === null) throw fieldError("feePayer", "feePayer is required (the facilitator's fee payer) unless X402_FEE_PAYER is configured");
    const network = x402Network(deps.config.network, version);
    const memo = params.memo ?? null;
    payment = {
      version,
      network,
      payer,
      to: params.to,
      feePayer,
      token,
      amount,
      memo,
      accepted:
        version === 2
          ? {
              scheme: "exact",
              network,
              amount: amount.toString(),
              asset: token.mint,
              payTo: params.to,
              maxTimeoutSeconds: DEFAULT_MAX_TIMEOUT_SECONDS,
              extra: memo === null ? { feePayer } : { feePayer, memo },
            }
          : null,
    };
  }
  requireAddress(payment.to, "to");
  requireAddress(payment.feePayer, feePayerField);
  await requireWalletRecipient(deps, payment.to, params.requirements !== undefined ? "requirements.payTo" : "to");
  requireTransferAmount(payment.amount);
  // The facilitator refuses a transfer signed by its own fee payer, and the fee payer's slot stays empty here.
  if (payment.feePayer === payer) throw fieldError(feePayerField, "feePayer must be the facilitator's address, not the paying wallet");
  if (payment.memo !== null && new TextEncoder().encode(payment.memo).length > X402_MAX_MEMO_BYTES) {
    throw fieldError(memoField, `memo is at most ${X402_MAX_MEMO_BYTES} bytes`);
  }
  // Checked now rather than left to the facilitator's simulation, whose failure says far less.
  if (!(await deps.ledger.tokenAccountExists(associatedTokenAddress(payment.to, payment.token.mint)))) {
    throw fieldError("to", `${payment.to} has no ${payment.token.key} token account, and an x402 payment does not create one`);
  }
  const balance = (await deps.ledger.getBalances(payer))[payment.token.key] ?? 0n;
  if (balance < payment.amount) {
    throw new AppError("INSUFFICIENT_FUNDS", `${payer} holds ${formatAmount(balance, payment.token.decimals)} ${payment.token.key}, less than the ${formatAmount(payment.amount, payment.token.decimals)} asked`);
  }
  return payment;
}

/** The payment's two token accounts (the payer's and the recipient's), by address: their owners and mint. */
function paymentAccounts(payment: Payment): (address: string) => TokenAccountInfo | null {
  const { mint, decimals } = payment.token;
  const accounts = new Map([payment.payer, payment.to].map((owner) => [associatedTokenAddress(owner, mint), { mint, owner, decimals }]));
  return (address) => accounts.get(address) ?? null;
}

/** Exactly the x402 exact-scheme layout: compute limit, compute price, TransferChecked, Memo. */
function paymentInstructions(payment: Payment, memo: string): TransactionInstruction[] {
  const mint = new PublicKey(payment.token.mint);
  return [
    ComputeBudgetProgram.setComputeUnitLimit({ units: X402_COMPUTE_UNIT_LIMIT }),
    ComputeBudgetProgram.setComputeUnitPrice({ microLamports: X402_COMPUTE_UNIT_PRICE_MICRO_LAMPORTS }),
    createTransferCheckedInstruction(
      new PublicKey(associatedTokenAddress(payment.payer, payment.token.mint)),
      mint,
      new PublicKey(associatedTokenAddress(payment.to, payment.token.mint)),
      new PublicKey(payment.payer),
      payment.amount,
      payment.token.decimals,
    ),
    memoInstruction(memo),
  ];
}

function summary(deps: Deps, payment: Payment, memo: string): PaymentSummary {
  return {
    x402Version: payment.version,
    network: payment.network,
    expiresAt: blockhashExpiresAt(deps.clock.now()),
    from: payment.payer,
    to: payment.to,
    token: payment.token.key,
    amount: formatAmount(payment.amount, payment.token.decimals),
    feePayer: payment.feePayer,
    memo,
  };
}

function headerResult(deps: Deps, payment: Payment, signedWire: Uint8Array, memo: string): PaymentHeaderResult {
  const transaction = encodeBase64(signedWire);
  const payload: X402Payload =
    payment.version === 1
      ? { x402Version: 1, scheme: "exact", network: payment.network, payload: { transaction } }
      : { x402Version: 2, accepted: payment.accepted!, payload: { transaction } };
  return {
    header: payment.version === 1 ? "X-PAYMENT" : "PAYMENT-SIGNATURE",
    value: encodeBase64(new TextEncoder().encode(JSON.stringify(payload))),
    payload,
    ...summary(deps, payment, memo),
  };
}

/** Which part of a parsed transaction differs from the payment, or null when its instructions match. */
function paymentMismatch(tx: ParsedTransaction, payment: Payment): string | null {
  const key = (index: number) => tx.accountKeys[index];
  if (tx.version !== 0) return "version";
  if (key(0) !== payment.feePayer) return "feePayer";
  if (tx.numRequiredSignatures !== 2) return "signers";
  const [limit, price, transfer, memo, ...rest] = tx.instructions;
  if (limit === undefined || price === undefined || transfer === undefined || memo === undefined || rest.length > 0) return "instructions";
  if (limit.program !== "computeBudget" || limit.type !== "setComputeUnitLimit" || limit.units !== X402_COMPUTE_UNIT_LIMIT) return "computeUnitLimit";
  if (price.program !== "computeBudget" || price.type !== "setComputeUnitPrice" || price.microLamports !== X402_COMPUTE_UNIT_PRICE_MICRO_LAMPORTS) {
    return "computeUnitPrice";
  }
  if (transfer.program !== "token" || transfer.type !== "transferChecked") return "instructions";
  const mint = payment.token.mint;
  if (key(transfer.mint) !== mint) return "mint";
  if (key(transfer.destination) !== associatedTokenAddress(payment.to, mint)) return "to";
  if (key(transfer.owner) !== payment.payer || key(transfer.source) !== associatedTokenAddress(payment.payer, mint)) return "from";
  if (transfer.amount !== payment.amount) return "amount";
  if (transfer.decimals !== payment.token.decimals) return "decimals";
  if (memo.program !== "memo" || memo.text === null || memo.accounts.length > 0) return "memo";
  if (payment.memo !== null && memo.text !== payment.memo) return "memo";
  return null;
}

function sameBytes(a: Uint8Array, b: Uint8Array): boolean {
  return a.length === b.length && a.every((byte, i) => byte === b[i]);
}

/**
 * The connected wallet's signed transaction must be this very payment: the same message this tool builds
 * (only the blockhash and, when none was asked for, the memo may differ), signed by the payer.
 * A different payment is PAYMENT_MISMATCH (the catalogue's code for exactly this) with `details.reason`
 * naming what differs; a missing or non-verifying signature is INVALID_SIGNATURE.
 */
async function checkSignedPayment(deps: Deps, payment: Payment, signedTransaction: string): Promise<{ wire: Uint8Array; memo: string }> {
  const field = "signedTransaction";
  const wire = decodeBase64Strict(signedTransaction);
  if (wire === null) throw fieldError(field, "signedTransaction must be standard base64");
  let tx: ParsedTransaction;
  try {
    tx = parseTransaction(wire);
  } catch (err) {
    if (!(err instanceof AppError)) throw err;
    throw fieldError(field, `signedTransaction is not a transaction this tool builds: ${err.message}`, { reason: "malformed" });
  }
  const mismatch = (reason: string) =>
    fieldError(field, `signedTransaction is not the payment asked for: its ${reason} differs`, { reason }, "PAYMENT_MISMATCH");
  const reason = paymentMismatch(tx, payment);
  if (reason !== null) throw mismatch(reason);
  const memo = memoOf(tx)!;
  // Byte-for-byte: account order, writability and programs too, not just the decoded fields above.
  const expected = parseTransaction(compileTransaction(paymentInstructions(payment, memo), payment.feePayer, tx.recentBlockhash, 0));
  if (!sameBytes(expected.messageBytes, tx.messageBytes)) throw mismatch("message");
  const slot = tx.accountKeys.indexOf(payment.payer);
  const signature = tx.signatures[slot]!;
  if (isEmptySignature(signature)) throw new AppError("INVALID_SIGNATURE", `signedTransaction is not signed by ${payment.payer}`);
  if (!(await deps.verifier.verify(decodeAddress(payment.payer)!, tx.messageBytes, signature))) {
    throw new AppError("INVALID_SIGNATURE", `the signature of ${payment.payer} on signedTransaction does not verify`);
  }
  // ledger.md: signed by the session wallet only. The fee payer's slot is the facilitator's to fill; anything
  // in it now could only be wrong, and would be taken for the payment's id (the audit row names the first).
  if (!isEmptySignature(tx.signatures[0]!)) {
    throw fieldError(field, "signedTransaction's first signature slot (the fee payer's) must be empty: the facilitator signs it", { reason: "fee_payer_signature" });
  }
  // A header on a blockhash the ledger no longer knows could never settle: refused rather than handed out
  // with an expiresAt it cannot meet (a wallet that took longer than the blockhash lives to sign).
  if (!(await deps.ledger.blockhashValid(tx.recentBlockhash))) {
    throw new AppError(
      "TRANSACTION_REJECTED",
      "signedTransaction's blockhash is unknown or expired, so the payment could never settle: call payment_create again without it and sign the new transaction",
      { details: { reason: "blockhash_expired" } },
    );
  }
  return { wire, memo };
}

/**
 * payment_create: builds the x402 payment of `payer` (the session wallet). A custodial wallet's is signed
 * here and returned as its header; a connected wallet gets the unsigned transaction, then — called again
 * with `signedTransaction` — the header. The transaction is never submitted: the paid resource's
 * facilitator adds the fee payer's signature and settles it.
 */
export async function createPayment(deps: Deps, payer: string, params: PaymentParams): Promise<PaymentResult> {
  const signer = await signerFor(deps, payer);
  const payment = await resolvePayment(deps, payer, params);
  if (params.signedTransaction !== undefined) {
    const { wire, memo } = await checkSignedPayment(deps, payment, params.signedTransaction);
    await auditHandedOut(deps, wire, paymentAccounts(payment));
    return headerResult(deps, payment, wire, memo);
  }
  const memo = payment.memo ?? bytesToHex(deps.random(RANDOM_MEMO_BYTES));
  const { blockhash } = await deps.ledger.latestBlockhash();
  const unsigned = compileTransaction(paymentInstructions(payment, memo), payment.feePayer, blockhash, 0);
  if (signer.kind === "connected") return { unsignedTransaction: encodeBase64(unsigned), ...summary(deps, payment, memo) };
  const signed = await signer.sign(unsigned);
  await auditHandedOut(deps, signed, paymentAccounts(payment));
  return headerResult(deps, payment, signed, memo);
}
