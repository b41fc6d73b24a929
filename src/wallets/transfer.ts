// A wallet's transfer: a custodial wallet's is signed here and submitted as the service's own transfer
// (a shortfall is INSUFFICIENT_FUNDS and costs nothing); a connected wallet gets it back unsigned. SOL too
// little for a new recipient account is VALIDATION_ERROR on amount for both.
import type { Deps } from "../deps.ts";
import { AppError, fieldError } from "../errors.ts";
import { encodeBase64 } from "../lib/encoding.ts";
import { RENT_EXEMPT_WALLET_LAMPORTS, recipientBelowRent, type SubmitResult, type TransferIntent } from "../ledger/ledger.ts";
import { requireWalletRecipient } from "../ledger/recipients.ts";
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
  if (signer.kind === "connected") return { kind: "unsigned", intent, transaction: encodeBase64(wire) };
  try {
    return { kind: "submitted", intent, result: await deps.ledger.submit(await signer.sign(wire), { ownTransfer: true }) };
  } catch (err) {
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
