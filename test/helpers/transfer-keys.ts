// A wallet_transfer idempotency key whose transaction was recorded but never sent, as a crash between the two
// leaves it: signed by the custodial wallet, with the key's own reference and the landing limit transferOnce
// records (src/wallets/transfer.ts).
import { Keypair } from "@solana/web3.js";
import type { Deps } from "../../src/deps.ts";
import { landingHeightLimit } from "../../src/ledger/landing.ts";
import { parseTransaction } from "../../src/ledger/transactions.ts";
import { signerFor } from "../../src/wallets/signer.ts";
import { insertTransferKey } from "../../src/wallets/store.ts";

/** Records `key` of wallet `from` for 0.1 SOL to `to`; the intent to ask it with, and its signature. */
export async function recordUnsentTransfer(deps: Deps, from: string, to: string, key: string) {
  const intent = { from, to, token: "sol", amount: 100_000_000n };
  const request = JSON.stringify({ to, token: "sol", amount: intent.amount.toString(), memo: null });
  const signer = await signerFor(deps, from);
  if (signer.kind !== "custodial") throw new Error("a custodial wallet's key");
  const reference = Keypair.generate().publicKey.toBase58();
  const wire = await signer.sign(await deps.ledger.buildTransfer({ ...intent, reference }));
  const tx = parseTransaction(wire);
  const validHeight = await landingHeightLimit(deps);
  const row = { wallet: from, key, request, reference, signature: tx.signature, blockhash: tx.recentBlockhash, wire, validHeight, createdAt: deps.clock.now() };
  if (!(await insertTransferKey(deps.db, row))) throw new Error(`the key ${key} was already recorded`);
  return { intent, signature: tx.signature, wire };
}
