// A wallet's transfer: a custodial wallet's is signed here and submitted as the service's own transfer
// (a shortfall is INSUFFICIENT_FUNDS and costs nothing); a connected wallet gets it back unsigned, once its
// balances cover it. SOL too little for a new recipient account is VALIDATION_ERROR on amount for both.
import type { Deps } from "../deps.ts";
import { AppError, fieldError } from "../errors.ts";
import { formatAmount } from "../lib/amounts.ts";
import { encodeBase64 } from "../lib/encoding.ts";
import {
  RENT_EXEMPT_TOKEN_ACCOUNT_LAMPORTS,
  RENT_EXEMPT_WALLET_LAMPORTS,
  recipientBelowRent,
  type SubmitResult,
  type TransferIntent,
} from "../ledger/ledger.ts";
import { requireWalletRecipient } from "../ledger/recipients.ts";
import { parseTransaction, transactionFee } from "../ledger/transactions.ts";
import { signerFor } from "./signer.ts";

export type TransferOutcome =
  | { kind: "submitted"; intent: TransferIntent; result: SubmitResult }
  /** Base64 wire bytes for the wallet to sign and submit itself. */
  | { kind: "unsigned"; intent: TransferIntent; transaction: string };

export async function transferFromWallet(deps: Deps, intent: TransferIntent): Promise<TransferOutcome> {
  const signer = await signerFor(deps, intent.from);
  await requireWalletRecipient(deps, intent.to, "to");
  const wire = await deps.ledger.buildTransfer(intent);
  await requireRentForNewAccount(deps, intent);
  if (signer.kind === "connected") {
    await requireFundsToSign(deps, intent, wire);
    return { kind: "unsigned", intent, transaction: encodeBase64(wire) };
  }
  try {
    return { kind: "submitted", intent, result: await deps.ledger.submit(await signer.sign(wire), { ownTransfer: true }) };
  } catch (err) {
    // The ledger's words name token accounts and fee payers; the balances' say what is missing, in tokens.
    if (err instanceof AppError && err.code === "INSUFFICIENT_FUNDS") {
      // Only its own refusal replaces the ledger's: a balance read that fails leaves the refusal as it was.
      await requireFundsToSign(deps, intent, wire).catch((reworded: unknown) => {
        if (reworded instanceof AppError && reworded.code === "INSUFFICIENT_FUNDS") throw reworded;
      });
      throw err;
    }
    // A transaction built just now can only be a "duplicate" of another identical request that drew the
    // same compute-unit limit (about one pair in a million): it is a different transfer, so build again.
    if (!(err instanceof AppError) || err.code !== "CONFLICT") throw err;
    const again = await signer.sign(await deps.ledger.buildTransfer(intent));
    return { kind: "submitted", intent, result: await deps.ledger.submit(again, { ownTransfer: true }) };
  }
}

/**
 * SOL sent to an address without an account must make it rent exempt (0.00089088 SOL), else the
 * transaction fails: VALIDATION_ERROR on amount before anything is signed or handed out, as for an
 * airdrop below the rent. Asked of the ledger only for amounts below that minimum.
 */
async function requireRentForNewAccount(deps: Deps, intent: TransferIntent): Promise<void> {
  if (intent.amount >= RENT_EXEMPT_WALLET_LAMPORTS) return;
  const token = (await deps.ledger.tokens()).find((t) => t.key === intent.token);
  if (token?.kind === "native" && !(await deps.ledger.accountExists(intent.to))) throw recipientBelowRent(intent.to);
}

/**
 * A connected wallet signs and sends its transfer itself, and one it cannot pay for would fail on chain and
 * still cost its fee. So before it is handed out, as the service's own transfers are tried before they run:
 * the sender must hold the amount, and the fee payer the fee and the rent of any token account the
 * transaction creates, leaving SOL at 0 or at least the rent-exempt minimum; else INSUFFICIENT_FUNDS.
 * A custodial transfer the ledger refused for funds is worded by it too.
 */
async function requireFundsToSign(deps: Deps, intent: TransferIntent, wire: Uint8Array): Promise<void> {
  const tokens = await deps.ledger.tokens();
  const token = tokens.find((t) => t.key === intent.token)!;
  const sol = tokens.find((t) => t.kind === "native")!;
  const tx = parseTransaction(wire);
  const payer = intent.feePayer ?? intent.from;
  const newAccounts = BigInt(tx.instructions.filter((ix) => ix.program === "ata").length);
  const amount = intent.amount + (intent.split?.amount ?? 0n);
  const needs = new Map<string, Map<string, bigint>>();
  const need = (owner: string, key: string, value: bigint) => {
    const of = needs.get(owner) ?? new Map<string, bigint>();
    of.set(key, (of.get(key) ?? 0n) + value);
    needs.set(owner, of);
  };
  need(intent.from, token.key, amount);
  need(payer, sol.key, transactionFee(tx) + newAccounts * RENT_EXEMPT_TOKEN_ACCOUNT_LAMPORTS);
  for (const [owner, of] of needs) {
    const balances = await deps.ledger.getBalances(owner);
    for (const [key, needed] of of) {
      const held = balances[key] ?? 0n;
      const decimals = key === token.key ? token.decimals : sol.decimals;
      const say = (v: bigint) => `${formatAmount(v, decimals)} ${key.toUpperCase()}`;
      if (held < needed) {
        throw new AppError("INSUFFICIENT_FUNDS", `${owner} holds ${say(held)}; this transfer needs ${say(needed)}${key === sol.key ? " with its fee" : ""}`);
      }
      const left = held - needed;
      if (key === sol.key && left > 0n && left < RENT_EXEMPT_WALLET_LAMPORTS) {
        throw new AppError("INSUFFICIENT_FUNDS", `${owner} would keep ${say(left)}, less than the rent-exempt minimum of 0.00089088 SOL; send all of it or less`);
      }
    }
  }
}
