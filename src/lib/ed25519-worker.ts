// Worker thread entry: verifies batches of Ed25519 signatures with verifyStrict, off the main thread.
import { verifyStrict } from "./ed25519.ts";

export type VerifyBatch = { id: number; items: [publicKey: Uint8Array, message: Uint8Array, signature: Uint8Array][] };
export type VerifyResults = { id: number; results: boolean[] };

declare const self: Worker;
self.onmessage = (event: MessageEvent<VerifyBatch>) => {
  const { id, items } = event.data;
  const reply: VerifyResults = { id, results: items.map(([publicKey, message, signature]) => verifyStrict(publicKey, message, signature)) };
  self.postMessage(reply);
};
