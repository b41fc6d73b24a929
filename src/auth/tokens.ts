// Session JWTs: HS256 with a key id, the algorithm pinned, issuer and expiry checked, rotation by kid.
// jose verifies every token. Signing is a synchronous HMAC whose output is byte for byte what jose's
// SignJWT makes of the same claims (tokens.test.ts holds the two together): jose signs through async
// WebCrypto, ~15 µs of CPU on two threads per token against ~2 µs here (docs/decisions.md).
import { createHmac, createSecretKey, type KeyObject } from "node:crypto";
import { decodeJwt, errors as joseErrors, jwtVerify, type JWTHeaderParameters } from "jose";
import { AppError } from "../errors.ts";
import { sha256Hex } from "../lib/hash.ts";

export type SessionClaims = {
  walletAddress: string;
  sessionId: string;
  jti: string;
  iat: number;
  exp: number;
  iss: string;
};

export type JwtKeys = {
  issuer: string;
  /** `key` verifies (jose); `signingKey` signs. */
  current: { kid: string; key: CryptoKey; signingKey: KeyObject; header: string };
  previous: { kid: string; key: CryptoKey } | null;
};

const MAX_IAT_SKEW_S = 30;
const MAX_TOKEN_CHARS = 4096;
/**
 * A compact JWS in the one spelling RFC 7515 allows: three segments of unpadded base64url, the last one
 * the 43 characters of an HS256 signature with its 2 spare bits zero. jose also decodes a padded or
 * non-canonical signature to the same bytes, so one token would have many spellings.
 */
const CANONICAL_HS256_JWS = /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]{42}[AEIMQUYcgkosw048]$/;

/**
 * The wallet a token's claims name, without verifying it: for wording an error only, and only once the
 * token was found expired or revoked (its signature was verified before either is said). Null if unreadable.
 */
export function walletNamedBy(token: string): string | null {
  try {
    const claim = decodeJwt(token).walletAddress;
    return typeof claim === "string" ? claim : null;
  } catch {
    return null;
  }
}

/** A key id that names a secret without revealing anything usable about it. */
export function keyIdOf(secret: Uint8Array): string {
  return sha256Hex(secret).slice(0, 16);
}

async function importHmacKey(secret: Uint8Array): Promise<CryptoKey> {
  return crypto.subtle.importKey("raw", new Uint8Array(secret), { name: "HMAC", hash: "SHA-256" }, false, ["sign", "verify"]);
}

const base64url = (json: string) => Buffer.from(json, "utf8").toString("base64url");

export async function createJwtKeys(issuer: string, secret: Uint8Array, previous: Uint8Array | null): Promise<JwtKeys> {
  const kid = keyIdOf(secret);
  return {
    issuer,
    current: {
      kid,
      key: await importHmacKey(secret),
      signingKey: createSecretKey(Buffer.from(secret)),
      // The protected header as jose's setProtectedHeader({ alg, typ, kid }) serializes it.
      header: base64url(JSON.stringify({ alg: "HS256", typ: "JWT", kid })),
    },
    previous: previous === null ? null : { kid: keyIdOf(previous), key: await importHmacKey(previous) },
  };
}

/** A session's claims before signing (the issuer comes from the keys). */
export type UnsignedClaims = Omit<SessionClaims, "iss">;

/**
 * A compact HS256 JWS signed with the current key: the claims in the order jose's SignJWT writes them
 * (`new SignJWT({ walletAddress, sessionId }).setJti().setIssuedAt().setExpirationTime().setIssuer()`).
 */
export function signSessionJwt(keys: JwtKeys, claims: UnsignedClaims): string {
  const { walletAddress, sessionId, jti, iat, exp } = claims;
  const payload = base64url(JSON.stringify({ walletAddress, sessionId, jti, iat, exp, iss: keys.issuer }));
  const input = `${keys.current.header}.${payload}`;
  return `${input}.${createHmac("sha256", keys.current.signingKey).update(input).digest("base64url")}`;
}

const invalid = (why: string) => new AppError("TOKEN_INVALID", `session token is invalid: ${why}`);

/**
 * Checks the token's form, signature, algorithm, issuer and times (not the token store).
 * Throws TOKEN_INVALID or TOKEN_EXPIRED.
 */
export async function verifySessionJwt(keys: JwtKeys, token: string, nowMs: number): Promise<SessionClaims> {
  if (token.length > MAX_TOKEN_CHARS) throw invalid("too long");
  if (!CANONICAL_HS256_JWS.test(token)) throw invalid("not a compact HS256 JWS in canonical base64url");
  let payload: Record<string, unknown>;
  try {
    const result = await jwtVerify(
      token,
      (header: JWTHeaderParameters) => {
        if (header.kid === keys.current.kid) return keys.current.key;
        if (keys.previous !== null && header.kid === keys.previous.kid) return keys.previous.key;
        throw invalid(header.kid === undefined ? "no key id" : "unknown key id");
      },
      {
        algorithms: ["HS256"],
        issuer: keys.issuer,
        currentDate: new Date(nowMs),
        clockTolerance: 0,
        requiredClaims: ["jti", "iat", "exp"],
      },
    );
    payload = result.payload as Record<string, unknown>;
  } catch (err) {
    if (err instanceof AppError) throw err;
    if (err instanceof joseErrors.JWTExpired) throw new AppError("TOKEN_EXPIRED", "session token has expired; sign in again");
    // Tokens name the BASE_URL they were issued for: after a BASE_URL (or, without one, HOST or PORT) change,
    // every earlier token reads so, rather than as jose's code.
    if (err instanceof joseErrors.JWTClaimValidationFailed && err.claim === "iss") {
      throw invalid(typeof err.payload.iss === "string" ? "it was issued for another BASE_URL than this server's" : "it names no issuer");
    }
    throw invalid(err instanceof joseErrors.JOSEError ? err.code.replace(/^ERR_/, "").toLowerCase() : "malformed");
  }
  const { walletAddress, sessionId, jti, iat, exp, iss } = payload;
  if (typeof walletAddress !== "string" || typeof sessionId !== "string" || typeof jti !== "string") {
    throw invalid("missing claims");
  }
  if (typeof iat !== "number" || typeof exp !== "number" || typeof iss !== "string") throw invalid("missing claims");
  if (iat > Math.floor(nowMs / 1000) + MAX_IAT_SKEW_S) throw invalid("issued in the future");
  return { walletAddress, sessionId, jti, iat, exp, iss };
}
