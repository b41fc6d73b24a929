// Who signs a wallet's transactions (ledger.md): this service for custodial wallets, the user for connected ones.
import { VersionedTransaction } from "@solana/web3.js";
import type { Deps } from "../deps.ts";
import { AppError, fieldError } from "../errors.ts";
import { isAddress } from "../lib/encoding.ts";
import { isCustodial, signMessageAsCustodian } from "./custody.ts";

/**
 * A custodial signer puts the wallet's signature into a serialized transaction (legacy or v0) and
 * returns the serialized result; a connected wallet signs on the user's side, so its caller returns
 * the unsigned transaction instead.
 */
export type Signer =
  | { kind: "custodial"; address: string; sign(wire: Uint8Array): Promise<Uint8Array> }
  | { kind: "connected"; address: string };

export async function signerFor(deps: Deps, address: string): Promise<Signer> {
  if (!isAddress(address)) throw new AppError("INVALID_ADDRESS", "the wallet is not a Solana address"); // not repeated: it may be a secret key
  if (!(await isCustodial(deps, address))) return { kind: "connected", address };
  return { kind: "custodial", address, sign: (wire) => signTransaction(deps, address, wire) };
}

async function signTransaction(deps: Deps, address: string, wire: Uint8Array): Promise<Uint8Array> {
  let tx: VersionedTransaction;
  try {
    tx = VersionedTransaction.deserialize(wire);
  } catch {
    throw fieldError("transaction", "not a serialized Solana transaction");
  }
  const { header, staticAccountKeys } = tx.message;
  if (tx.signatures.length !== header.numRequiredSignatures || header.numRequiredSignatures > staticAccountKeys.length) {
    throw fieldError("transaction", "the transaction's signatures and its message header disagree");
  }
  // The first numRequiredSignatures static keys are the signers, in signature-slot order.
  const slot = staticAccountKeys.slice(0, header.numRequiredSignatures).findIndex((key) => key.toBase58() === address);
  // Checked before decrypting anything: a key is opened only for a transaction it can sign.
  if (slot === -1) throw fieldError("transaction", `the transaction does not name ${address} as a signer`);
  const message = tx.message.serialize();
  const signature = await signMessageAsCustodian(deps, address, message);
  tx.signatures[slot] = signature;
  return tx.serialize();
}
