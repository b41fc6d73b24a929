// The Deps object handed explicitly to every domain function: config, database, clock, randomness, log.
import type { Config, Secrets } from "./config.ts";
import type { Db } from "./db/open.ts";
import type { Clock } from "./lib/clock.ts";
import type { Random } from "./lib/ids.ts";
import type { Logger } from "./log.ts";
import { createJwtKeys, type JwtKeys } from "./auth/tokens.ts";
import { createRateLimiter, type RateLimiter } from "./auth/rate-limit.ts";
import { hmacSha256 } from "./lib/hash.ts";
import { inlineVerifier, type SignatureVerifier } from "./lib/verifier.ts";
import { createLedger } from "./ledger/create.ts";
import { createServiceMetrics, type ServiceMetrics } from "./metrics/metrics.ts";
import { createOwnerRateLimiter, type OwnerRateLimiter } from "./paygate/rate-limit.ts";
import { createReferenceReads, type ReferenceReads } from "./paygate/reference-reads.ts";
import { createKeyedLock, type KeyedLock } from "./lib/keyed-lock.ts";
import type { Ledger } from "./ledger/ledger.ts";

export type Deps = Readonly<{
  config: Config;
  /** BASE_URL, or the address actually bound when PORT=0. */
  baseUrl: string;
  /** BASE_URL's host (and port, if not the default): the domain a challenge names. */
  baseHost: string;
  db: Db;
  clock: Clock;
  random: Random;
  log: Logger;
  /** What GET /metrics reports. */
  metrics: ServiceMetrics;
  /** Strict Ed25519 verification (on a worker thread in the server). */
  verifier: SignatureVerifier;
  auth: Readonly<{
    jwtKeys: JwtKeys;
    rateLimiter: RateLimiter;
    /** Key under which client fingerprints are stored (HMAC), never in clear. */
    fingerprintKey: Uint8Array;
    /** Key from which a refreshed token's id is derived from its parent's (sessions.ts). */
    refreshKey: Uint8Array;
  }>;
  /** The ledger of NETWORK: embedded on localnet, Solana RPC on devnet and mainnet (ledger.md). */
  ledger: Ledger;
  paygate: Readonly<{
    /** Per-owner limits of /public/* (in memory on one instance). */
    rateLimiter: OwnerRateLimiter;
    /** Transactions already read for open checkouts, and why each was refused (in memory). */
    referenceReads: ReferenceReads;
    /** /submit's look for an earlier payment and its record of the new one, one at a time per wallet and product. */
    submitLock: KeyedLock;
  }>;
  wallets: Readonly<{
    /** WALLET_ENCRYPTION_KEY: AES-256-GCM key of custodial wallets' secret keys. */
    encryptionKey: Uint8Array;
  }>;
}>;

export type DepsInput = {
  config: Config;
  secrets: Secrets;
  baseUrl: string;
  db: Db;
  clock: Clock;
  random: Random;
  log: Logger;
  verifier?: SignatureVerifier;
  /** The server makes them before it listens (its first requests are counted); else made here. */
  metrics?: ServiceMetrics;
  /** Tests may hand in a ledger; otherwise the one of NETWORK, loaded on first use. */
  ledger?: Ledger;
};

export async function createDeps(input: DepsInput): Promise<Deps> {
  const { secrets } = input;
  const verifier = input.verifier ?? inlineVerifier;
  const jwtKeys = await createJwtKeys(input.baseUrl, secrets.jwtSecret, secrets.jwtSecretPrevious);
  return Object.freeze({
    config: input.config,
    baseUrl: input.baseUrl,
    baseHost: new URL(input.baseUrl).host,
    db: input.db,
    clock: input.clock,
    random: input.random,
    log: input.log,
    metrics: input.metrics ?? createServiceMetrics(),
    verifier,
    auth: Object.freeze({
      jwtKeys,
      rateLimiter: createRateLimiter({ enabled: input.config.authRateLimit }),
      // Derived, so no further secret has to be kept; rotating JWT_SECRET only forgets the links.
      fingerprintKey: hmacSha256(secrets.jwtSecret, "walletgate fingerprint link v1"),
      refreshKey: hmacSha256(secrets.jwtSecret, "walletgate refreshed token id v1"),
    }),
    ledger: input.ledger ?? createLedger({ config: input.config, db: input.db, clock: input.clock, random: input.random, verifier, log: input.log }),
    paygate: Object.freeze({ rateLimiter: createOwnerRateLimiter(), referenceReads: createReferenceReads(), submitLock: createKeyedLock() }),
    wallets: Object.freeze({ encryptionKey: secrets.walletEncryptionKey }),
  });
}
