// Worker thread entry: verifies batches of Ed25519 signatures with verifyStrict, off the main thread.
import { verifyStrict } from "./ed25519.ts";
import { serveBatches } from "./worker-batch.ts";

export type VerifyItem = [publicKey: Uint8Array, message: Uint8Array, signature: Uint8Array];

serveBatches<VerifyItem, boolean>(([publicKey, message, signature]) => verifyStrict(publicKey, message, signature));
