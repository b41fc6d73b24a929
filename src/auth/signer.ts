// Who signs session JWTs: jose on the calling thread, or jose on a worker thread. Signing (async
// WebCrypto HMAC, base64url, JSON) was a quarter of the main thread's work per sign-in; on a worker the
// sign-ins of one turn go in messages of up to 8 (worker-batch.ts), and a broken worker falls back to
// signing here.
import { workerCalls } from "../lib/worker-batch.ts";
import type { JwtWorkerInit } from "./jwt-worker.ts";
import { signSessionJwt, type JwtKeys, type UnsignedClaims } from "./tokens.ts";

export type SessionSigner = {
  sign(claims: UnsignedClaims): Promise<string>;
  stop(): Promise<void>;
};

/** Signs on the calling thread (tests, CLI commands). */
export function inlineSessionSigner(keys: JwtKeys): SessionSigner {
  return { sign: (claims) => signSessionJwt(keys, claims), stop: async () => undefined };
}

/**
 * Signs on one worker thread (`workerUrl`: jwt-worker.ts), started on first use, with the same key as
 * `keys` (the worker gets `init`'s secret). Tokens are byte-for-byte what `inlineSessionSigner(keys)` makes.
 */
export function workerSessionSigner(workerUrl: string, init: JwtWorkerInit, keys: JwtKeys, onWorkerError: (err: unknown) => void): SessionSigner {
  const calls = workerCalls<UnsignedClaims, string>(workerUrl, { inline: (claims) => signSessionJwt(keys, claims), onWorkerError, init });
  return { sign: (claims) => calls.call(claims), stop: calls.stop };
}
