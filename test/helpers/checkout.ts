// Buyer-side helpers for checkout tests: sign the service's checkout transaction, or build a variant of it
// (another payer, amount, references or blockhash) the way a careless or hostile client might.
import { Keypair, PublicKey, TransactionInstruction, TransactionMessage, VersionedTransaction } from "@solana/web3.js";
import { TOKEN_PROGRAM_ID, createTransferCheckedInstruction, getAssociatedTokenAddressSync } from "@solana/spl-token";
import { base58 } from "@scure/base";
import type { TestWallet } from "./wallet.ts";
import { newWallet } from "./wallet.ts";

/** Signs the unsigned checkout transaction (base64) as a wallet would. */
export function signCheckout(transaction: string, signer: Keypair): string {
  const tx = VersionedTransaction.deserialize(Buffer.from(transaction, "base64"));
  tx.sign([signer]);
  return Buffer.from(tx.serialize()).toString("base64");
}

/** A wallet that can both sign in (TestWallet) and sign Solana transactions (Keypair), with one key. */
export function newBuyer(): { wallet: TestWallet; keypair: Keypair } {
  const wallet = newWallet();
  const seed = Buffer.from(wallet.privateKey.export({ format: "jwk" }).d!, "base64url");
  const keypair = Keypair.fromSeed(new Uint8Array(seed));
  if (keypair.publicKey.toBase58() !== wallet.address) throw new Error("seed and address disagree");
  return { wallet, keypair };
}

export type Variant = {
  payer: Keypair;
  /** Base units; default the checkout's amount. */
  amount?: bigint;
  /** More reference keys appended to the transfer. */
  extraReferences?: string[];
  /** Another recent blockhash (the checkout's may have expired). */
  blockhash?: string;
  /** Instructions put before the checkout's (as a wallet adding its own settings or guards does). */
  prepend?: TransactionInstruction[];
};

/** Rebuilds the checkout transaction paid and signed by `payer`, with the changes asked for. */
export function paymentVariant(transaction: string, variant: Variant): string {
  const tx = VersionedTransaction.deserialize(Buffer.from(transaction, "base64"));
  const message = TransactionMessage.decompile(tx.message);
  const payer = variant.payer.publicKey;
  const instructions = message.instructions.map((ix): TransactionInstruction => {
    if (ix.programId.equals(TOKEN_PROGRAM_ID) && ix.data[0] === 12) {
      const [, mint, destination] = ix.keys.map((k) => k.pubkey) as [PublicKey, PublicKey, PublicKey];
      const amount = variant.amount ?? Buffer.from(ix.data).readBigUInt64LE(1);
      const transfer = createTransferCheckedInstruction(getAssociatedTokenAddressSync(mint, payer, true), mint, destination, payer, amount, ix.data[9]!);
      const references = [...ix.keys.slice(4).map((k) => k.pubkey), ...(variant.extraReferences ?? []).map((r) => new PublicKey(r))];
      for (const pubkey of references) transfer.keys.push({ pubkey, isSigner: false, isWritable: false });
      return transfer;
    }
    // The recipient's token account creation: the new payer pays for it.
    return new TransactionInstruction({ programId: ix.programId, data: Buffer.from(ix.data), keys: ix.keys.map((k, i) => (i === 0 ? { ...k, pubkey: payer } : k)) });
  });
  const rebuilt = new VersionedTransaction(
    new TransactionMessage({ payerKey: payer, recentBlockhash: variant.blockhash ?? message.recentBlockhash, instructions: [...(variant.prepend ?? []), ...instructions] }).compileToLegacyMessage(),
  );
  rebuilt.sign([variant.payer]);
  return Buffer.from(rebuilt.serialize()).toString("base64");
}

/** The base58 signature (txHash) of a signed base64 transaction. */
export function signatureOf(signed: string): string {
  return base58.encode(VersionedTransaction.deserialize(Buffer.from(signed, "base64")).signatures[0]!);
}
