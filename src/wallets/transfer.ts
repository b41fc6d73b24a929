// A wallet's transfer: a custodial wallet's is signed here and submitted as the service's own transfer
// (a shortfall is INSUFFICIENT_FUNDS and costs nothing); a connected wallet gets it back unsigned.
import type { Deps } from "../deps.ts";
import { encodeBase64 } from "../lib/encoding.ts";
import type { SubmitResult, TransferIntent } from "../ledger/ledger.ts";
import { signerFor } from "./signer.ts";

export type TransferOutcome =
  | { kind: "submitted"; intent: TransferIntent; result: SubmitResult }
  /** Base64 wire bytes for the wallet to sign and submit itself. */
  | { kind: "unsigned"; intent: TransferIntent; transaction: string };

export async function transferFromWallet(deps: Deps, intent: TransferIntent): Promise<TransferOutcome> {
  const signer = await signerFor(deps, intent.from);
  const wire = await deps.ledger.buildTransfer(intent);
  if (signer.kind === "connected") return { kind: "unsigned", intent, transaction: encodeBase64(wire) };
  const result = await deps.ledger.submit(await signer.sign(wire), { ownTransfer: true });
  return { kind: "submitted", intent, result };
}
