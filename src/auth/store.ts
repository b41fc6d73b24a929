// SQL for wallet sign-in: challenges, token rows, per-wallet cutoffs, fingerprint links.
import type { Db } from "../db/open.ts";
import { deleteFirst, deleteInWindow, inSteps } from "../db/steps.ts";

export type ChallengeRow = {
  nonce: string;
  wallet: string;
  message: string;
  issuedAt: number;
  expiresAt: number;
  consumedAt: number | null;
};

export type TokenRow = {
  jti: string;
  sessionId: string;
  wallet: string;
  issuedAt: number;
  expiresAt: number;
  sessionStartedAt: number;
  fingerprint: string | null;
  revokedAt: number | null;
  /** The key id and issuer it was signed with; null for rows recorded before they were kept (migration 19). */
  kid: string | null;
  issuer: string | null;
};

/**
 * Token rows and fingerprint links are indexed by the first 8 characters of their wallet and jti (migration
 * 32: a smaller index, so cheaper inserts). A statement finds them by those prefixes, then by the whole values:
 * `${BY_WALLET_JTI}` takes walletJti(wallet, jti) as its parameters, `${BY_WALLET}` byWallet(wallet).
 */
const BY_WALLET_JTI = "substr(wallet, 1, 8) = substr(?, 1, 8) AND substr(jti, 1, 8) = substr(?, 1, 8) AND wallet = ? AND jti = ?";
const walletJti = (wallet: string, jti: string) => [wallet, jti, wallet, jti] as const;
const BY_WALLET = "substr(wallet, 1, 8) = substr(?, 1, 8) AND wallet = ?";
const byWallet = (wallet: string) => [wallet, wallet] as const;

export function insertChallenge(db: Db, row: Omit<ChallengeRow, "consumedAt">): Promise<void> {
  return db.write(() => {
    db.sqlite
      .query("INSERT INTO auth_challenges (nonce, wallet, message, issued_at, expires_at) VALUES (?, ?, ?, ?, ?)")
      .run(row.nonce, row.wallet, row.message, row.issuedAt, row.expiresAt);
  });
}

export async function findChallenge(db: Db, nonce: string): Promise<ChallengeRow | null> {
  return db.read(() => {
    return (
      (db.sqlite
        .query(
          `SELECT nonce, wallet, message, issued_at AS issuedAt, expires_at AS expiresAt, consumed_at AS consumedAt
           FROM auth_challenges WHERE nonce = ?`,
        )
        .get(nonce) as ChallengeRow | null) ?? null
    );
  });
}

/** A token row to record, with the time its fingerprint link is stamped and the token it refreshes. */
export type NewToken = { row: Omit<TokenRow, "revokedAt">; now: number; parentJti: string | null };

/**
 * What a proof of wallet control buys, recorded in the write that spends its nonce; `alsoInWrite`: another
 * feature's synchronous …InWrite that goes with it (wallet_create's new key).
 */
export type ProofPurchase = { token?: NewToken | undefined; revokeAllBefore?: number | undefined; alsoInWrite?: (() => void) | undefined };

/**
 * The single conditional UPDATE that makes a nonce single-use: `won` for exactly one caller. When the
 * caller wins, what it `buys` is recorded in the same atomic write: a new session's token, or the
 * revocation of every token of the wallet issued before a cutoff (`revoked`: how many were live).
 */
export function consumeChallenge(db: Db, nonce: string, wallet: string, now: number, buys: ProofPurchase = {}): Promise<{ won: boolean; revoked: number }> {
  return db.write(() => {
    const won = db.sqlite
      .query(
        `UPDATE auth_challenges SET consumed_at = ?
         WHERE nonce = ? AND wallet = ? AND consumed_at IS NULL AND expires_at > ?
         RETURNING nonce`,
      )
      .get(now, nonce, wallet, now);
    if (won === null) return { won: false, revoked: 0 };
    buys.alsoInWrite?.();
    if (buys.token !== undefined) insertTokenRows(db, buys.token);
    const revoked = buys.revokeAllBefore === undefined ? 0 : revokeWalletRows(db, wallet, buys.revokeAllBefore, now);
    return { won: true, revoked };
  });
}

/**
 * What recording a token did: recorded; refused (the token it refreshes is revoked, or the proof it was to
 * spend was spent already); or found recorded already.
 */
export type TokenInsert = "recorded" | "parent revoked" | "not spent" | { existing: TokenRow };

/**
 * Records an issued token and, when given, links the client's fingerprint to it. One atomic write.
 * A refresh names its `parentJti`: it is recorded only while the parent is unrevoked (so a refresh
 * racing a revoke-all cannot outlive it), and fingerprint links follow it to the new token. A refresh's
 * `jti` is derived from its parent's (sessions.ts), so a row already there under it is the parent's
 * earlier refresh: it is returned, and nothing is written.
 */
export function insertToken(
  db: Db,
  token: NewToken,
  /** Another feature's single-use proof (its store's synchronous …InWrite), spent in the same write; false records nothing. */
  spend?: () => boolean,
): Promise<TokenInsert> {
  return db.write(() => (spend !== undefined && !spend() ? "not spent" : insertTokenRows(db, token)));
}

/**
 * The SQL of insertToken, run inside a caller's write. A new session's times were read before its proof was
 * checked; a revoke-all of the wallet written meanwhile may have set a cutoff after them, which would make
 * the token dead on arrival (auth.md: a sign-in after the revoke-all works at once). Its times then move to
 * the cutoff, no later than now. (A refresh racing a revoke-all is refused instead: its parent is revoked.)
 */
function insertTokenRows(db: Db, { row, now, parentJti }: NewToken): TokenInsert {
  if (parentJti === null) {
    const cutoff = db.sqlite.query("SELECT tokens_valid_after AS at FROM auth_wallet_cutoffs WHERE wallet = ?").get(row.wallet) as { at: number } | null;
    if (cutoff !== null && row.issuedAt < cutoff.at) {
      const late = cutoff.at - row.issuedAt;
      row.issuedAt += late;
      row.expiresAt += late;
      row.sessionStartedAt += late;
    }
  } else {
    // A refresh continues the parent's session, so the parent is a token of the same wallet.
    const parent = db.sqlite.query(`SELECT revoked_at AS revokedAt FROM auth_tokens WHERE ${BY_WALLET_JTI}`).get(...walletJti(row.wallet, parentJti)) as {
      revokedAt: number | null;
    } | null;
    if (parent === null || parent.revokedAt !== null) return "parent revoked";
    const existing = selectToken(db, row.wallet, row.jti);
    if (existing !== null) return { existing };
  }
  db.sqlite
    .query(
      `INSERT INTO auth_tokens (jti, session_id, wallet, issued_at, expires_at, session_started_at, fingerprint, kid, issuer)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    )
    .run(row.jti, row.sessionId, row.wallet, row.issuedAt, row.expiresAt, row.sessionStartedAt, row.fingerprint, row.kid, row.issuer);
  if (row.fingerprint !== null) {
    db.sqlite
      .query(
        `INSERT INTO fingerprint_wallet_links (fingerprint, wallet, session_id, jti, updated_at) VALUES (?, ?, ?, ?, ?)
         ON CONFLICT (fingerprint) DO UPDATE SET
           wallet = excluded.wallet, session_id = excluded.session_id, jti = excluded.jti, updated_at = excluded.updated_at`,
      )
      .run(row.fingerprint, row.wallet, row.sessionId, row.jti, now);
  }
  if (parentJti !== null) {
    db.sqlite
      .query(`UPDATE fingerprint_wallet_links SET jti = ?, updated_at = ? WHERE ${BY_WALLET_JTI}`)
      .run(row.jti, now, ...walletJti(row.wallet, parentJti));
  }
  return "recorded";
}

/** Tokens and cutoffs are read on every authenticated call: kept until the database next changes (Db.cache). */
const TOKENS_KEPT = 10_000;

/** The token row of `wallet` with id `jti` (every caller knows both: see migration 14). */
export async function findToken(db: Db, wallet: string, jti: string): Promise<TokenRow | null> {
  return db.cache<TokenRow | null>("auth_tokens.wallet_jti", TOKENS_KEPT).get(`${wallet} ${jti}`, () => db.read(() => selectToken(db, wallet, jti)));
}

function selectToken(db: Db, wallet: string, jti: string): TokenRow | null {
  return (
    (db.sqlite
      .query(
        `SELECT jti, session_id AS sessionId, wallet, issued_at AS issuedAt, expires_at AS expiresAt,
                session_started_at AS sessionStartedAt, fingerprint, revoked_at AS revokedAt, kid, issuer
         FROM auth_tokens WHERE ${BY_WALLET_JTI}`,
      )
      .get(...walletJti(wallet, jti)) as TokenRow | null) ?? null
  );
}

/** What the server signs sessions with: its key id, and the issuer (BASE_URL) its tokens name. */
export type ServersSigner = { kid: string; issuer: string | null };

/** Records the key id and issuer the server signs sessions with (written with the first batch of writes). */
export function recordServersSigner(db: Db, signer: { kid: string; issuer: string }): Promise<void> {
  return db.write(() => {
    db.sqlite
      .query("INSERT INTO jwt_key_in_use (id, kid, issuer) VALUES (1, ?, ?) ON CONFLICT (id) DO UPDATE SET kid = excluded.kid, issuer = excluded.issuer")
      .run(signer.kid, signer.issuer);
  });
}

/** What the server last started signing sessions with; null before any server of this version started (issuer: of version 33). */
export function findServersSigner(db: Db): ServersSigner | null {
  return db.read(() => (db.sqlite.query("SELECT kid, issuer FROM jwt_key_in_use WHERE id = 1").get() as ServersSigner | null) ?? null);
}

/** Whether any token recorded is still unrevoked and unexpired at `now` (stops at the first). */
export function holdsLiveToken(db: Db, now: number): boolean {
  return db.read(() => db.sqlite.query("SELECT 1 FROM auth_tokens WHERE expires_at > ? AND revoked_at IS NULL LIMIT 1").get(now) !== null);
}

/** The wallet's revoke-all cutoff in Unix ms: tokens issued before it are dead. 0 when none. */
export async function findWalletCutoff(db: Db, wallet: string): Promise<number> {
  return db.cache<number>("auth_wallet_cutoffs.wallet", TOKENS_KEPT).get(wallet, () =>
    db.read(() => {
      const row = db.sqlite.query("SELECT tokens_valid_after AS cutoff FROM auth_wallet_cutoffs WHERE wallet = ?").get(wallet) as {
        cutoff: number;
      } | null;
      return row?.cutoff ?? 0;
    }),
  );
}

/**
 * Revokes one token of `wallet` and drops fingerprint links that point at it, and, given a client's
 * fingerprint, that client's links to the `wallets` named whatever token they name (sign-out). One write.
 * True when the token was live.
 */
export function revokeToken(db: Db, wallet: string, jti: string, now: number, client?: { fingerprint: string; wallets: readonly string[] }): Promise<boolean> {
  return db.write(() => {
    const changed = db.sqlite
      .query(`UPDATE auth_tokens SET revoked_at = ? WHERE ${BY_WALLET_JTI} AND revoked_at IS NULL`)
      .run(now, ...walletJti(wallet, jti));
    db.sqlite.query(`DELETE FROM fingerprint_wallet_links WHERE ${BY_WALLET_JTI}`).run(...walletJti(wallet, jti));
    for (const linked of client?.wallets ?? []) {
      db.sqlite.query("DELETE FROM fingerprint_wallet_links WHERE fingerprint = ? AND wallet = ?").run(client!.fingerprint, linked);
    }
    return changed.changes > 0;
  });
}

/**
 * Revoke-all, inside consumeChallenge's write: revokes every token of a wallet, sets its cutoff and
 * drops its fingerprint links. Returns how many live (unexpired, unrevoked) tokens it revoked.
 */
function revokeWalletRows(db: Db, wallet: string, cutoff: number, now: number): number {
  const changed = db.sqlite
    .query(`UPDATE auth_tokens SET revoked_at = ? WHERE ${BY_WALLET} AND revoked_at IS NULL AND expires_at > ?`)
    .run(now, ...byWallet(wallet), now);
  db.sqlite
    .query(
      `INSERT INTO auth_wallet_cutoffs (wallet, tokens_valid_after) VALUES (?, ?)
       ON CONFLICT (wallet) DO UPDATE SET tokens_valid_after = MAX(tokens_valid_after, excluded.tokens_valid_after)`,
    )
    .run(wallet, cutoff);
  db.sqlite.query(`DELETE FROM fingerprint_wallet_links WHERE ${BY_WALLET}`).run(...byWallet(wallet));
  return changed.changes;
}

export type FingerprintLink = { fingerprint: string; wallet: string; sessionId: string; jti: string; updatedAt: number };

export async function findFingerprintLink(db: Db, fingerprint: string): Promise<FingerprintLink | null> {
  return db.read(() => {
    return (
      (db.sqlite
        .query(
          `SELECT fingerprint, wallet, session_id AS sessionId, jti, updated_at AS updatedAt
           FROM fingerprint_wallet_links WHERE fingerprint = ?`,
        )
        .get(fingerprint) as FingerprintLink | null) ?? null
    );
  });
}

export type PurgeCounts = { challenges: number; tokens: number; links: number; cutoffs: number };

/**
 * Deletes expired challenges, token rows expired before `tokenHorizon`, links to tokens that are gone
 * or expired, and cutoffs older than any token that could still be alive; in steps of STEP_ROWS rows,
 * each its own write (db/steps.ts), until done or `stopping` aborts.
 */
export async function purgeExpired(db: Db, now: number, tokenHorizon: number, cutoffHorizon: number, stopping?: AbortSignal): Promise<PurgeCounts> {
  // Challenges have an expires_at index: each step takes the oldest expired ones.
  const challenges = await inSteps(db, 0, () => deleteFirst(db, "auth_challenges", "expires_at <= ?", "expires_at", now), stopping);
  // The others are walked in rowid order (token rows have no expires_at index: it cost every sign-in).
  const tokens = await inSteps(db, 0, (after) => deleteInWindow(db, "auth_tokens", after, "expires_at < ?", tokenHorizon), stopping);
  const links = await inSteps(
    db,
    0,
    (after) =>
      deleteInWindow(
        db,
        "fingerprint_wallet_links",
        after,
        `NOT EXISTS (SELECT 1 FROM auth_tokens t
           WHERE substr(t.wallet, 1, 8) = substr(fingerprint_wallet_links.wallet, 1, 8)
             AND substr(t.jti, 1, 8) = substr(fingerprint_wallet_links.jti, 1, 8)
             AND t.wallet = fingerprint_wallet_links.wallet AND t.jti = fingerprint_wallet_links.jti AND t.expires_at > ?)`,
        now,
      ),
    stopping,
  );
  const cutoffs = await inSteps(db, 0, (after) => deleteInWindow(db, "auth_wallet_cutoffs", after, "tokens_valid_after < ?", cutoffHorizon), stopping);
  return { challenges, tokens, links, cutoffs };
}
