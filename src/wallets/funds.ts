// Whether a wallet's balances cover a transfer, said in tokens: before a connected wallet is handed a
// transaction to sign (wallet_transfer, an order's escrow offer), and to word the ledger's INSUFFICIENT_FUNDS
// for a custodial one.
import type { Deps } from "../deps.ts";
import { AppError } from "../errors.ts";
import { formatAmount } from "../lib/amounts.ts";
import { RENT_EXEMPT_TOKEN_ACCOUNT_LAMPORTS, RENT_EXEMPT_WALLET_LAMPORTS, type TransferIntent } from "../ledger/ledger.ts";
import { parseTransaction, transactionFee } from "../ledger/transactions.ts";

/**
 * A connected wallet signs and sends its transfer itself, and one it cannot pay for would fail on chain and
 * still cost its fee. So before it is handed out, as the service's own transfers are tried before they run:
 * the sender must hold the amount, and the fee payer the fee and the rent of any token account the
 * transaction creates, leaving SOL at 0 or at least the rent-exempt minimum; else INSUFFICIENT_FUNDS.
 * A transfer the ledger refused for funds is worded by it too (fundsShortfall).
 */
export async function requireFundsToSign(deps: Deps, intent: TransferIntent, wire: Uint8Array): Promise<void> {
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

/** The ledger's INSUFFICIENT_FUNDS worded from the balances; only its own refusal replaces the ledger's (a balance read that fails leaves it as it was). */
export async function fundsShortfall(deps: Deps, intent: TransferIntent, wire: Uint8Array, err: AppError): Promise<AppError> {
  try {
    await requireFundsToSign(deps, intent, wire);
  } catch (reworded) {
    if (reworded instanceof AppError && reworded.code === "INSUFFICIENT_FUNDS") return reworded;
  }
  return err;
}
