// Signing with an injected provider (Phantom, Solflare, Backpack), which takes @solana/web3.js transaction
// objects: only the checkout page imports this, so only its bundle carries web3.js (browser build).
import { VersionedTransaction } from "@solana/web3.js/lib/index.browser.esm.js";
import type { InjectedProvider } from "./wallet.ts";

export async function signWithProvider(provider: InjectedProvider, transaction: Uint8Array): Promise<Uint8Array> {
  const signed = await provider.signTransaction(VersionedTransaction.deserialize(transaction));
  return signed.serialize();
}
