// Worker thread entry: signs session JWTs with jose (HS256, the current key), off the main thread.
// The key material comes once, in the init message; nothing is logged here.
import { serveBatches } from "../lib/worker-batch.ts";
import { createJwtKeys, signSessionJwt, type JwtKeys, type UnsignedClaims } from "./tokens.ts";

/** What the worker needs to sign: the issuer and the current secret (verification stays with the server). */
export type JwtWorkerInit = { issuer: string; secret: Uint8Array };

let keys: JwtKeys | null = null;

serveBatches<UnsignedClaims, string>(
  (claims) => {
    if (keys === null) throw new Error("jwt worker has no key");
    return signSessionJwt(keys, claims);
  },
  async (init) => {
    const { issuer, secret } = init as JwtWorkerInit;
    keys = await createJwtKeys(issuer, secret, null);
  },
);
