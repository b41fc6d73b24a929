// The marketplace's escrow: one custodial service wallet per network, and the transfers in and out of it.
// Each transfer commits in the same database write as the order change it belongs to (embedded ledger).
import type { Deps } from "../../deps.ts";
import { AppError } from "../../errors.ts";
import { decodeBase64Strict, encodeBase64 } from "../../lib/encoding.ts";
import type { ParsedTransfer, SubmitResult } from "../../ledger/ledger.ts";
import { createCustodialWallet } from "../../wallets/custody.ts";
import { signerFor } from "../../wallets/signer.ts";
import * as store from "./store.ts";

/** SOL the escrow keeps for fees and recipients' token accounts; on localnet it is topped up from the faucet. */
const ESCROW_SOL_FLOOR = 50_000_000n; // 0.05 SOL
const ESCROW_SOL_TOP_UP = 1_000_000_000n; // 1 SOL

/** Creations in flight, per database, so that concurrent first uses create one wallet. */
const creating = new WeakMap<object, Promise<string>>();

/** The network's escrow wallet, created (custodial) on first use. */
export async function escrowWallet(deps: Deps): Promise<string> {
  const network = deps.config.network;
  const known = await store.findEscrow(deps.db, network);
  if (known !== null) return known;
  let pending = creating.get(deps.db);
  if (pending === undefined) {
    pending = (async () => {
      const { address } = await createCustodialWallet(deps, `marketplace escrow (${network})`);
      return store.saveEscrow(deps.db, network, address, deps.clock.now());
    })().finally(() => creating.delete(deps.db));
    creating.set(deps.db, pending);
  }
  return pending;
}

function requireEmbedded(deps: Deps): void {
  if (deps.config.network !== "localnet") {
    throw new AppError("NOT_SUPPORTED", "marketplace escrow needs the embedded ledger (NETWORK=localnet) in this release");
  }
}

/** Keeps enough SOL in the escrow for the fees of its transfers (localnet faucet). */
async function fuelEscrow(deps: Deps, escrow: string): Promise<void> {
  if ((await deps.ledger.getBalances(escrow)).sol! < ESCROW_SOL_FLOOR) await deps.ledger.airdrop(escrow, { sol: ESCROW_SOL_TOP_UP });
}

/**
 * Consumer → escrow, signed by the consumer's custodial key; `alongside` is the order change, in the same
 * write. A connected consumer gets `unsigned` back (nothing moves) unless it passes `signed`: its own
 * signature over exactly that transfer.
 */
export async function payIntoEscrow(
  deps: Deps,
  payment: { from: string; token: string; amount: bigint; signed?: string | undefined },
  alongside: (result: { signature: string }) => void,
): Promise<{ kind: "paid"; result: SubmitResult } | { kind: "unsigned"; transaction: string }> {
  requireEmbedded(deps);
  const escrow = await escrowWallet(deps);
  const intent = { from: payment.from, to: escrow, token: payment.token, amount: payment.amount };
  const signer = await signerFor(deps, payment.from);
  let wire: Uint8Array;
  if (signer.kind === "custodial") {
    wire = await signer.sign(await deps.ledger.buildTransfer(intent));
  } else if (payment.signed === undefined) {
    return { kind: "unsigned", transaction: encodeBase64(await deps.ledger.buildTransfer(intent)) };
  } else {
    const bytes = decodeBase64Strict(payment.signed);
    if (bytes === null) throw new AppError("VALIDATION_ERROR", "signedTransaction must be standard base64");
    wire = bytes;
  }
  // Checked inside the write that applies it: a transaction that moves anything else is rolled back whole.
  const result = await deps.ledger.submit(wire, {
    ownTransfer: true,
    alongside: (applied) => {
      requireExactTransfer(applied.transfers, intent);
      alongside({ signature: applied.signature });
    },
  });
  return { kind: "paid", result };
}

/** A consumer-signed escrow payment must be exactly the transfer asked for: no more, no less, no other. */
function requireExactTransfer(transfers: readonly ParsedTransfer[], intent: { from: string; to: string; token: string; amount: bigint }): void {
  const mismatch = (reason: string, message: string) => new AppError("PAYMENT_MISMATCH", message, { details: { reason } });
  if (transfers.length !== 1) throw mismatch("transfers", "the escrow payment must be one transfer");
  const [t] = transfers;
  if (t!.from !== intent.from) throw mismatch("payer", "the escrow payment must come from the consumer's wallet");
  if (t!.to !== intent.to) throw mismatch("recipient", "the escrow payment must go to the escrow wallet");
  if (t!.token !== intent.token) throw mismatch("mint", `the escrow payment must be in ${intent.token}`);
  if (t!.amount !== intent.amount) throw mismatch("amount", "the escrow payment must be exactly the order's price");
}

/**
 * Escrow → `to` (and `split` to the fee wallet, same transaction), signed by the escrow's key;
 * `alongside` is the order change, in the same write.
 */
export async function payOutOfEscrow(
  deps: Deps,
  payout: { to: string; token: string; amount: bigint; split?: { to: string; amount: bigint } | undefined },
  alongside: (result: { signature: string }) => void,
): Promise<SubmitResult> {
  requireEmbedded(deps);
  const escrow = await escrowWallet(deps);
  await fuelEscrow(deps, escrow);
  const signer = await signerFor(deps, escrow);
  if (signer.kind !== "custodial") throw new Error("the escrow wallet must be custodial");
  const wire = await signer.sign(await deps.ledger.buildTransfer({ from: escrow, to: payout.to, token: payout.token, amount: payout.amount, split: payout.split }));
  return deps.ledger.submit(wire, { ownTransfer: true, alongside: (applied) => alongside({ signature: applied.signature }) });
}
