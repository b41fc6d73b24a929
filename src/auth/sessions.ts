// Session tokens as plain functions: issue, authenticate against the token store, restore, revoke.
import type { Deps } from "../deps.ts";
import type { Db } from "../db/open.ts";
import { AppError } from "../errors.ts";
import { toIso } from "../lib/clock.ts";
import { hmacSha256 } from "../lib/hash.ts";
import { newUuid, uuidV4Of } from "../lib/ids.ts";
import { fingerprintUsable, storedFingerprint, type ClientInfo } from "./fingerprint.ts";
import { keyIdOf, signSessionJwt, verifySessionJwt } from "./tokens.ts";
import * as store from "./store.ts";

/** One session token: whose, which session, and its lifetime in JWT seconds. */
type SessionToken = {
  walletAddress: string;
  sessionId: string;
  jti: string;
  token: string;
  issuedAtS: number;
  expiresAtS: number;
};

export type IssuedSession = SessionToken & { expiresAt: string };

export type AuthenticatedSession = SessionToken & { sessionStartedAtMs: number };

const revoked = () => new AppError("TOKEN_REVOKED", "session token has been revoked; sign in again");

/**
 * A session token decided but not yet recorded or signed. Its times are those of `record.row`, which the
 * write recording it may move forward (store.ts insertTokenRows: past a revoke-all's cutoff).
 */
export type PreparedSession = {
  walletAddress: string;
  sessionId: string;
  jti: string;
  record: store.NewToken;
};

/** A token's `exp` (Unix s) when issued at `iatS` in a session begun at `sessionStartedAtMs`: TTL, capped by SESSION_MAX_AGE_S. */
function expiryOf(deps: Deps, iatS: number, sessionStartedAtMs: number): number {
  return Math.min(iatS + deps.config.sessionTtlS, Math.floor(sessionStartedAtMs / 1000) + deps.config.sessionMaxAgeS);
}

/**
 * The id of the token that refreshes the token `parentJti`: a keyed hash of the parent's id, so each token
 * is refreshed at most once (a second refresh finds the first one's row) and the id is as unguessable as a
 * random one to anyone without the server's key.
 */
function refreshedJti(deps: Deps, parentJti: string): string {
  return uuidV4Of(hmacSha256(deps.auth.refreshKey, parentJti));
}

/**
 * Decides a new token: a new session, unless `continues` names one (refresh from the token
 * `parentJti`, with the id refreshedJti gives it), whose absolute age is then capped by SESSION_MAX_AGE_S.
 * With a client, and fingerprint restore on, the client's fingerprint will be linked to it. Pure: nothing is
 * written.
 */
export function prepareSession(
  deps: Deps,
  walletAddress: string,
  client: ClientInfo | null,
  continues?: { sessionId: string; sessionStartedAtMs: number; parentJti: string },
): PreparedSession {
  const now = deps.clock.now();
  const iat = Math.floor(now / 1000);
  const sessionStartedAtMs = continues?.sessionStartedAtMs ?? now;
  const exp = expiryOf(deps, iat, sessionStartedAtMs);
  if (exp <= iat) throw new AppError("TOKEN_EXPIRED", "the session has reached its maximum age; sign in again");
  const sessionId = continues?.sessionId ?? newUuid(deps.random);
  const jti = continues === undefined ? newUuid(deps.random) : refreshedJti(deps, continues.parentJti);
  const fingerprint = client === null || !fingerprintUsable(deps, client) ? null : storedFingerprint(deps, client);
  const { kid } = deps.auth.jwtKeys.current;
  const row = { jti, sessionId, wallet: walletAddress, issuedAt: iat * 1000, expiresAt: exp * 1000, sessionStartedAt: sessionStartedAtMs, fingerprint, kid, issuer: deps.auth.jwtKeys.issuer };
  return { walletAddress, sessionId, jti, record: { row, now, parentJti: continues?.parentJti ?? null } };
}

/** Signs the JWT of a prepared session as recorded (`times`: its row, or the row found recorded already). */
export function signPreparedSession(deps: Deps, p: PreparedSession, times: { issuedAt: number; expiresAt: number } = p.record.row): IssuedSession {
  const { walletAddress, sessionId, jti } = p;
  const iat = Math.floor(times.issuedAt / 1000);
  const exp = Math.floor(times.expiresAt / 1000);
  const token = signSessionJwt(deps.auth.jwtKeys, { walletAddress, sessionId, jti, iat, exp });
  return { walletAddress, sessionId, jti, token, issuedAtS: iat, expiresAtS: exp, expiresAt: toIso(exp * 1000) };
}

/**
 * Prepares, records and signs a token (see prepareSession). A refresh already made of the same parent is
 * answered again, signed anew from its row (the same claims: the same token while the key is the same),
 * unless it was revoked since: then the session was signed out, and its parent starts no new token.
 */
export async function issueSession(
  deps: Deps,
  walletAddress: string,
  client: ClientInfo | null,
  continues?: { sessionId: string; sessionStartedAtMs: number; parentJti: string },
): Promise<IssuedSession> {
  const prepared = prepareSession(deps, walletAddress, client, continues);
  const recorded = await store.insertToken(deps.db, prepared.record);
  if (recorded === "parent revoked") throw revoked(); // the token being refreshed was revoked meanwhile
  if (recorded === "not spent") throw new Error("no proof was given to spend"); // never: insertToken got no `spend`
  if (recorded === "recorded") return signPreparedSession(deps, prepared);
  const { existing: row } = recorded;
  // The token sent is not revoked, but the session it would continue was signed out (its refresh revoked).
  if (row.revokedAt !== null) throw new AppError("TOKEN_REVOKED", "this session was signed out (the token that refreshed this one was revoked); sign in again");
  return signPreparedSession(deps, prepared, row);
}

/**
 * A new session for a wallet proven by another feature's single-use proof (a dashboard sign-in link), spent
 * in the same write as the token is recorded, as sign-in spends its nonce: `spend` (that store's synchronous
 * …InWrite) false records nothing and answers null. So no proof is spent without its session, or the reverse.
 */
export async function issueSessionSpending(deps: Deps, walletAddress: string, client: ClientInfo | null, spend: () => boolean): Promise<IssuedSession | null> {
  const prepared = prepareSession(deps, walletAddress, client);
  const recorded = await store.insertToken(deps.db, prepared.record, spend);
  if (recorded === "not spent") return null;
  if (recorded !== "recorded") throw new Error("a new session's token has no parent and a fresh id"); // never: no parent, fresh jti
  return signPreparedSession(deps, prepared);
}

/** Verifies a token and then the token store: row present, not revoked, not before the wallet's cutoff. */
export async function authenticateToken(deps: Deps, token: string): Promise<AuthenticatedSession> {
  const claims = await verifySessionJwt(deps.auth.jwtKeys, token, deps.clock.now());
  // The cutoff comes first: after revoke-all, every earlier token is revoked, listed or not.
  if (claims.iat * 1000 < (await store.findWalletCutoff(deps.db, claims.walletAddress))) throw revoked();
  const row = await store.findToken(deps.db, claims.walletAddress, claims.jti);
  if (row === null || row.wallet !== claims.walletAddress || row.sessionId !== claims.sessionId) {
    throw new AppError("TOKEN_INVALID", "session token is invalid: not issued by this server");
  }
  if (row.revokedAt !== null) throw revoked();
  return {
    walletAddress: claims.walletAddress,
    sessionId: claims.sessionId,
    jti: claims.jti,
    token,
    issuedAtS: claims.iat,
    expiresAtS: claims.exp,
    sessionStartedAtMs: row.sessionStartedAt,
  };
}

/**
 * What the JWT's own check would say of a token known only by its row: signed with a key this server no
 * longer has, or issued for another address (BASE_URL); null when neither (or the row predates both).
 */
function signerProblem(deps: Deps, row: store.TokenRow): string | null {
  const keys = deps.auth.jwtKeys;
  if (row.kid !== null && row.kid !== keys.current.kid && row.kid !== keys.previous?.kid) return "was signed with a key this server no longer has";
  if (row.issuer !== null && row.issuer !== keys.issuer) return "was issued for another address (BASE_URL)";
  return null;
}

const expired = () => new AppError("TOKEN_EXPIRED", "the session's token has expired; call session_restore or sign in again");

/**
 * A session known by its token's id (what an MCP session's binding keeps): the token store's checks —
 * row present, not revoked, not expired, not before the wallet's cutoff — without the JWT itself. A row the
 * purge took (a day past its `exp`) is TOKEN_EXPIRED when the binding kept that `exp` (`knownExpiresAtS`).
 */
export async function authenticateTokenId(deps: Deps, walletAddress: string, jti: string, knownExpiresAtS: number | null = null): Promise<Omit<AuthenticatedSession, "token">> {
  const row = await store.findToken(deps.db, walletAddress, jti);
  if (row === null && knownExpiresAtS !== null && knownExpiresAtS * 1000 <= deps.clock.now()) throw expired();
  if (row === null) throw new AppError("TOKEN_INVALID", "the session's token is unknown; sign in again");
  const signer = signerProblem(deps, row);
  if (signer !== null) throw new AppError("TOKEN_INVALID", `the session's token ${signer}; sign in again`);
  if (row.revokedAt !== null || row.issuedAt < (await store.findWalletCutoff(deps.db, row.wallet))) throw revoked();
  if (row.expiresAt <= deps.clock.now()) throw expired();
  return {
    walletAddress: row.wallet,
    sessionId: row.sessionId,
    jti: row.jti,
    issuedAtS: Math.floor(row.issuedAt / 1000),
    expiresAtS: Math.floor(row.expiresAt / 1000),
    sessionStartedAtMs: row.sessionStartedAt,
  };
}

export type SessionStatus = {
  authenticated: true;
  walletAddress: string;
  sessionId: string;
  network: string;
  issuedAt: string;
  expiresAt: string;
  expiresInSeconds: number;
  refreshRecommended: boolean;
};

export function sessionStatus(
  deps: Deps,
  session: Pick<AuthenticatedSession, "walletAddress" | "sessionId" | "issuedAtS" | "expiresAtS">,
): SessionStatus {
  const expiresInSeconds = Math.max(0, session.expiresAtS - Math.floor(deps.clock.now() / 1000));
  return {
    authenticated: true,
    walletAddress: session.walletAddress,
    sessionId: session.sessionId,
    network: deps.config.network,
    issuedAt: toIso(session.issuedAtS * 1000),
    expiresAt: toIso(session.expiresAtS * 1000),
    expiresInSeconds,
    refreshRecommended: expiresInSeconds < deps.config.refreshThresholdS,
  };
}

export type RestoredSession = {
  walletAddress: string;
  sessionId: string;
  sessionToken: string;
  expiresAt: string;
  refreshed: boolean;
  isNewSession: false;
};

/**
 * session_restore: a valid token comes back as it is, or — with under REFRESH_THRESHOLD_S left — as a
 * new token of the same session. The old one keeps working until its own expiry. A session older
 * than SESSION_MAX_AGE_S is over: TOKEN_EXPIRED.
 */
export async function restoreSession(deps: Deps, token: string): Promise<RestoredSession & { session: AuthenticatedSession }> {
  const session = await authenticateToken(deps, token);
  const now = deps.clock.now();
  if (now - session.sessionStartedAtMs >= deps.config.sessionMaxAgeS * 1000) {
    throw new AppError("TOKEN_EXPIRED", "the session has reached its maximum age; sign in again");
  }
  const remainingS = session.expiresAtS - Math.floor(now / 1000);
  // No refresh that would not outlast the token itself (near the session's maximum age): each refresh is a
  // row, and the token's holder could otherwise mint one per call until the session ends.
  if (remainingS >= deps.config.refreshThresholdS || expiryOf(deps, Math.floor(now / 1000), session.sessionStartedAtMs) <= session.expiresAtS) {
    return {
      walletAddress: session.walletAddress,
      sessionId: session.sessionId,
      sessionToken: token,
      expiresAt: toIso(session.expiresAtS * 1000),
      refreshed: false,
      isNewSession: false,
      session,
    };
  }
  const fresh = await issueSession(deps, session.walletAddress, null, {
    sessionId: session.sessionId,
    sessionStartedAtMs: session.sessionStartedAtMs,
    parentJti: session.jti,
  });
  return {
    walletAddress: fresh.walletAddress,
    sessionId: fresh.sessionId,
    sessionToken: fresh.token,
    expiresAt: fresh.expiresAt,
    refreshed: true,
    isNewSession: false,
    session: { ...session, jti: fresh.jti, token: fresh.token, issuedAtS: fresh.issuedAtS, expiresAtS: fresh.expiresAtS },
  };
}

/**
 * Whether the database holds live sessions (signed with some JWT secret): a command about to make a JWT
 * secret of its own beside them would sign tokens the server refuses, and refuse the server's.
 */
export function holdsLiveSessions(db: Db, now: number): boolean {
  return store.holdsLiveToken(db, now);
}

/**
 * serve, at each start: the key id it signs sessions with and the issuer its tokens name (its BASE_URL), for
 * `walletgate mcp` to compare its own with; written only when either changed (a start writes nothing otherwise).
 */
export async function recordSigner(db: Db, jwtSecret: Uint8Array, issuer: string): Promise<void> {
  const kid = keyIdOf(jwtSecret);
  const recorded = store.findServersSigner(db);
  if (recorded?.kid !== kid || recorded.issuer !== issuer) await store.recordServersSigner(db, { kid, issuer });
}

/** What a server of this version recorded it signs with; null when none has (issuer null: recorded before version 33). */
export function serversSigner(db: Db): store.ServersSigner | null {
  return store.findServersSigner(db);
}

/** POST /auth/revoke and wallet_disconnect: the token dies now, with any fingerprint link to it. */
export async function revokeSessionToken(deps: Deps, token: string): Promise<AuthenticatedSession> {
  const session = await authenticateToken(deps, token);
  await store.revokeToken(deps.db, session.walletAddress, session.jti, deps.clock.now());
  return session;
}

/**
 * wallet_disconnect: the session's token (the header's, checked first, or the one an MCP binding names)
 * dies now, and in the same write this client's fingerprint forgets the wallet, even when its link names
 * a newer token of it (a later sign-in from the same client), so no new session from here is restored to it.
 */
export async function disconnectWallet(
  deps: Deps,
  wallet: { token: string | null; walletAddress: string; jti: string },
  client: ClientInfo,
  /** The wallet the MCP session was bound to, when another: this client's fingerprint forgets it too. */
  alsoForget?: string,
): Promise<void> {
  const { walletAddress, jti } = wallet.token === null ? wallet : await authenticateToken(deps, wallet.token);
  const forget = alsoForget === undefined || alsoForget === walletAddress ? [walletAddress] : [walletAddress, alsoForget];
  await store.revokeToken(deps.db, walletAddress, jti, deps.clock.now(), { fingerprint: storedFingerprint(deps, client), wallets: forget });
}

export type LinkedSession = { walletAddress: string; sessionId: string; jti: string; tokenExpiresAtS: number };

/**
 * The wallet last authenticated from this client, while the linked token is still good: present,
 * unexpired, unrevoked, under a key and issuer this server still has (used by MCP fingerprint restore).
 */
export async function findLinkedSession(deps: Deps, client: ClientInfo): Promise<LinkedSession | null> {
  const link = await store.findFingerprintLink(deps.db, storedFingerprint(deps, client));
  if (link === null) return null;
  const row = await store.findToken(deps.db, link.wallet, link.jti);
  if (row === null || row.revokedAt !== null || row.expiresAt <= deps.clock.now() || signerProblem(deps, row) !== null) return null;
  if (row.issuedAt < (await store.findWalletCutoff(deps.db, row.wallet))) return null;
  return { walletAddress: row.wallet, sessionId: row.sessionId, jti: row.jti, tokenExpiresAtS: Math.floor(row.expiresAt / 1000) };
}
