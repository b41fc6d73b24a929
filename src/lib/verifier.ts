// Signature verification as a service: inline, or on a worker thread so the server's one JS thread
// is free for HTTP and the database while another core verifies.
import { verifyStrict } from "./ed25519.ts";
import type { VerifyItem } from "./ed25519-worker.ts";
import { workerCalls } from "./worker-batch.ts";

export type SignatureVerifier = {
  verify(publicKey: Uint8Array, message: Uint8Array, signature: Uint8Array): Promise<boolean>;
  stop(): Promise<void>;
};

/** Verifies on the calling thread (tests, CLI commands). */
export const inlineVerifier: SignatureVerifier = {
  verify: async (publicKey, message, signature) => verifyStrict(publicKey, message, signature),
  stop: async () => undefined,
};

/**
 * Verifies on one worker thread (`workerUrl`: ed25519-worker.ts), started on first use. Requests of one
 * event-loop turn go in messages of up to 8 (worker-batch.ts). Should the worker fail, its pending
 * requests and all later ones are verified inline, so a broken worker costs speed, never a wrong answer.
 */
export function workerVerifier(workerUrl: string, onWorkerError: (err: unknown) => void, replyTimeoutMs = 10_000): SignatureVerifier {
  const calls = workerCalls<VerifyItem, boolean>(workerUrl, {
    inline: ([publicKey, message, signature]) => verifyStrict(publicKey, message, signature),
    onWorkerError,
    replyTimeoutMs,
  });
  // Only a literal `true` from the worker is a valid signature.
  return { verify: async (publicKey, message, signature) => (await calls.call([publicKey, message, signature])) === true, stop: calls.stop };
}
