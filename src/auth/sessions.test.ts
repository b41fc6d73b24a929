// Session functions in-process with a movable clock: restore and refresh, maximum age, revocation, purge.
import { describe, expect, test } from "bun:test";
import { Database } from "bun:sqlite";
import { rmSync } from "node:fs";
import { join } from "node:path";
import { migrate } from "../db/migrate.ts";
import { MIGRATIONS } from "../db/migrations.ts";
import { tempDir } from "../../test/helpers/server.ts";
import { codeOf } from "../../test/helpers/errors.ts";
import { testDeps } from "../../test/helpers/deps.ts";
import { newWallet } from "../../test/helpers/wallet.ts";
import { issueChallenge } from "./challenge.ts";
import { authenticateToken, authenticateTokenId, disconnectWallet, findLinkedSession, restoreSession, revokeSessionToken } from "./sessions.ts";
import { revokeAllSessions, signIn } from "./sign-in.ts";
import { CHALLENGE_PURGE_MARGIN_MS, purgeAuth } from "./purge.ts";
import * as store from "./store.ts";
import { STEP_ROWS } from "../db/steps.ts";
import { plansOf } from "../../test/helpers/plans.ts";

const client = { ip: "192.0.2.10", userAgent: "test-agent/1" };
type Deps = Awaited<ReturnType<typeof testDeps>>["deps"];

/** How many token rows the store holds. */
const tokenRows = (deps: Deps) => (deps.db.sqlite.query("SELECT count(*) AS n FROM auth_tokens").get() as { n: number }).n;

/** A fresh challenge for `wallet`, signed: the body of a sign-in or a revoke-all. */
async function signedChallenge(deps: Deps, wallet = newWallet(), from = client) {
  const ch = await issueChallenge(deps, wallet.address, from);
  return { walletAddress: wallet.address, nonce: ch.nonce, signature: wallet.sign(ch.message) };
}

async function login(deps: Deps, wallet = newWallet(), from = client) {
  return signIn(deps, await signedChallenge(deps, wallet, from), from);
}

/** The message a call failed with ("token" when it did not). */
const failureOf = (call: Promise<unknown>) => call.then(() => "token", (e: Error) => e.message);


describe("session_restore", () => {
  test("with more than REFRESH_THRESHOLD_S left, the same token comes back", async () => {
    const { deps } = await testDeps();
    const s = await login(deps);
    const r = await restoreSession(deps, s.token);
    expect(r).toMatchObject({ walletAddress: s.walletAddress, sessionId: s.sessionId, sessionToken: s.token, refreshed: false, isNewSession: false });
    expect(r.expiresAt).toBe(s.expiresAt);
  });

  test("with under an hour left: a new token of the same session; the old one works until its exp", async () => {
    const { deps, clock } = await testDeps();
    const s = await login(deps);
    clock.advance((604800 - 1800) * 1000);
    const r = await restoreSession(deps, s.token);
    expect(r.refreshed).toBe(true);
    expect(r.sessionId).toBe(s.sessionId);
    expect(r.sessionToken).not.toBe(s.token);
    expect(Date.parse(r.expiresAt)).toBe(clock.now() - (clock.now() % 1000) + 604800 * 1000);
    expect(await codeOf(authenticateToken(deps, s.token))).toBe("OK");
    clock.advance(1800 * 1000);
    expect(await codeOf(authenticateToken(deps, s.token))).toBe("TOKEN_EXPIRED");
    expect(await codeOf(authenticateToken(deps, r.sessionToken))).toBe("OK");
  });

  test("a session is refreshed for at most SESSION_MAX_AGE_S, then TOKEN_EXPIRED", async () => {
    const { deps, clock } = await testDeps({ SESSION_TTL_S: "3600", REFRESH_THRESHOLD_S: "1800", SESSION_MAX_AGE_S: "7200" });
    const s = await login(deps);
    const start = clock.now();
    clock.advance(3000 * 1000);
    const r1 = await restoreSession(deps, s.token);
    expect(r1.refreshed).toBe(true);
    expect(Date.parse(r1.expiresAt)).toBe(start + 6600 * 1000); // now + TTL, still inside the maximum age
    clock.advance(3000 * 1000);
    const r2 = await restoreSession(deps, r1.sessionToken);
    expect(r2.refreshed).toBe(true);
    expect(Date.parse(r2.expiresAt)).toBe(start + 7200 * 1000); // capped at the session's absolute end
    clock.advance(1200 * 1000);
    expect(await codeOf(restoreSession(deps, r2.sessionToken))).toBe("TOKEN_EXPIRED");
  });

  test("SESSION_MAX_AGE_S lowered at a restart: a live token of a session older than the new maximum is not restored", async () => {
    const dir = tempDir();
    try {
      const dbPath = join(dir, "walletgate.db");
      const before = await testDeps({}, { dbPath }); // 30 days
      const s = await login(before.deps);
      before.db.close();
      const after = await testDeps({ SESSION_MAX_AGE_S: "3600" }, { dbPath });
      try {
        after.clock.advance(3599 * 1000);
        expect(await restoreSession(after.deps, s.token)).toMatchObject({ sessionToken: s.token, refreshed: false });
        after.clock.advance(1000); // the session is an hour old; its token has a week to go
        expect(await codeOf(authenticateToken(after.deps, s.token))).toBe("OK");
        expect(await failureOf(restoreSession(after.deps, s.token))).toContain("maximum age");
        expect(await codeOf(restoreSession(after.deps, s.token))).toBe("TOKEN_EXPIRED");
      } finally {
        after.db.close();
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test("a token is refreshed once: restoring it again answers the same new token and writes no row", async () => {
    const { deps, clock } = await testDeps();
    const s = await login(deps);
    clock.advance((604800 - 1800) * 1000);
    const first = await restoreSession(deps, s.token);
    expect(first.refreshed).toBe(true);
    expect(first.session.jti).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    expect(first.session.jti).not.toBe(s.jti);
    expect(tokenRows(deps)).toBe(2);
    // Later calls (one at a time, and twenty at once) answer the first refresh, not a new token each.
    clock.advance(60_000);
    const again = [await restoreSession(deps, s.token), ...(await Promise.all(Array.from({ length: 20 }, () => restoreSession(deps, s.token))))];
    for (const r of again) {
      expect(r).toMatchObject({ refreshed: true, sessionToken: first.sessionToken, expiresAt: first.expiresAt, sessionId: s.sessionId });
    }
    expect(tokenRows(deps)).toBe(2);
    expect(await codeOf(authenticateToken(deps, first.sessionToken))).toBe("OK");
    // Once that refresh is revoked (signed out), its parent starts no other one.
    await revokeSessionToken(deps, first.sessionToken);
    expect(await codeOf(restoreSession(deps, s.token))).toBe("TOKEN_REVOKED");
    // Said as what happened: the token sent was not revoked itself (it still authenticates until its exp).
    expect(await restoreSession(deps, s.token).catch((err: Error) => err.message)).toBe(
      "this session was signed out (the token that refreshed this one was revoked); sign in again",
    );
    expect(await codeOf(authenticateToken(deps, s.token))).toBe("OK");
    expect(tokenRows(deps)).toBe(2);
  });

  test("near the maximum age, a refresh that would not outlast the token is not made", async () => {
    const { deps, clock } = await testDeps({ SESSION_TTL_S: "3600", REFRESH_THRESHOLD_S: "1800", SESSION_MAX_AGE_S: "5400" });
    const s = await login(deps);
    const start = clock.now();
    clock.advance(2000 * 1000);
    const r1 = await restoreSession(deps, s.token);
    expect(r1.refreshed).toBe(true);
    expect(Date.parse(r1.expiresAt)).toBe(start + 5400 * 1000); // capped at the session's end
    // The new token has under REFRESH_THRESHOLD_S left, but no refresh could end later: it comes back as it is.
    clock.advance(2000 * 1000);
    for (let i = 0; i < 5; i++) {
      expect(await restoreSession(deps, r1.sessionToken)).toMatchObject({ refreshed: false, sessionToken: r1.sessionToken, expiresAt: r1.expiresAt });
    }
    expect(tokenRows(deps)).toBe(2);
    clock.advance(1400 * 1000);
    expect(await codeOf(restoreSession(deps, r1.sessionToken))).toBe("TOKEN_EXPIRED");
  });

  test("revoked and foreign tokens are refused", async () => {
    const { deps } = await testDeps();
    const s = await login(deps);
    await revokeSessionToken(deps, s.token);
    expect(await codeOf(restoreSession(deps, s.token))).toBe("TOKEN_REVOKED");
    expect(await codeOf(restoreSession(deps, "abc"))).toBe("TOKEN_INVALID");
  });
});

describe("fingerprint links", () => {
  test("stored as an HMAC, never in clear; found only while the token is good", async () => {
    const { deps, db } = await testDeps();
    const wallet = newWallet();
    const s = await login(deps, wallet);
    const rows = db.sqlite.query("SELECT fingerprint FROM fingerprint_wallet_links").all() as { fingerprint: string }[];
    expect(rows.length).toBe(1);
    const clear = new Bun.CryptoHasher("sha256").update(client.ip + client.userAgent).digest("hex");
    expect(rows[0]!.fingerprint).not.toBe(clear);
    expect(await findLinkedSession(deps, client)).toEqual({ walletAddress: wallet.address, sessionId: s.sessionId, jti: s.jti, tokenExpiresAtS: s.expiresAtS });
    expect(await findLinkedSession(deps, { ...client, userAgent: "other/2" })).toBeNull();
    await revokeSessionToken(deps, s.token);
    expect(await findLinkedSession(deps, client)).toBeNull();
  });

  test("a fingerprint links to the last wallet authenticated from it; revoke-all removes the link", async () => {
    const { deps } = await testDeps();
    const first = newWallet();
    const second = newWallet();
    await login(deps, first);
    await login(deps, second);
    expect((await findLinkedSession(deps, client))?.walletAddress).toBe(second.address);
    const ch = await issueChallenge(deps, second.address, client);
    await revokeAllSessions(deps, { walletAddress: second.address, nonce: ch.nonce, signature: second.sign(ch.message) }, client);
    expect(await findLinkedSession(deps, client)).toBeNull();
  });
});

describe("the token store's second look", () => {
  // Each check below stands behind another (a revocation also deletes the token's links; revoke-all also
  // marks each row revoked): a row the first did not reach (written by another process meanwhile, or a
  // change that drops the first) is still refused.
  test("a row revoked but still linked is not restored; a row older than the wallet's cutoff but unmarked is revoked", async () => {
    const { deps, db, clock } = await testDeps();
    const wallet = newWallet();
    const s = await login(deps, wallet);
    db.sqlite.query("UPDATE auth_tokens SET revoked_at = ? WHERE jti = ?").run(clock.now(), s.jti);
    expect(await findLinkedSession(deps, client)).toBeNull();
    expect(await codeOf(authenticateTokenId(deps, wallet.address, s.jti))).toBe("TOKEN_REVOKED");
    // A second token, then revoke-all; the row left unmarked is refused by the cutoff alone.
    clock.advance(1_000);
    const t = await login(deps, wallet);
    clock.advance(1_000);
    await revokeAllSessions(deps, await signedChallenge(deps, wallet), { ip: "192.0.2.99", userAgent: "elsewhere/1" });
    db.sqlite.query("UPDATE auth_tokens SET revoked_at = NULL WHERE jti = ?").run(t.jti);
    expect(await codeOf(authenticateTokenId(deps, wallet.address, t.jti))).toBe("TOKEN_REVOKED");
    expect(await codeOf(authenticateToken(deps, t.token))).toBe("TOKEN_REVOKED");
  });
});

describe("sign-in writes", () => {
  test("if recording the token fails, the client gets an error, no token, and the nonce is not spent", async () => {
    const { deps, db } = await testDeps();
    const body = await signedChallenge(deps);
    db.sqlite.run("CREATE TRIGGER refuse BEFORE INSERT ON auth_tokens BEGIN SELECT RAISE(ABORT, 'disk trouble'); END");
    expect(await failureOf(signIn(deps, body, client))).toContain("disk trouble");
    expect(tokenRows(deps)).toBe(0);
    expect((await store.findChallenge(deps.db, body.nonce))?.consumedAt).toBeNull(); // the consume and the token: one write
    db.sqlite.run("DROP TRIGGER refuse");
    expect((await signIn(deps, body, client)).walletAddress).toBe(body.walletAddress); // the same challenge still works
  });

  test("a sign-in whose batch fails to commit (a full disk): that error is the answer, nothing is written, the challenge still works", async () => {
    const { deps, db } = await testDeps();
    const body = await signedChallenge(deps);
    // The verdict comes in a later turn, as from the server's worker.
    const later = { ...deps, verifier: { ...deps.verifier, verify: async (...args: Parameters<typeof deps.verifier.verify>) => (await Bun.sleep(5), deps.verifier.verify(...args)) } };
    const run = db.sqlite.run.bind(db.sqlite);
    let commits = 0;
    // That COMMIT fails as on a full disk (SQLite then rolls the batch back).
    db.sqlite.run = ((sql: string, ...rest: unknown[]) => {
      if (sql === "COMMIT" && commits++ === 0) throw Object.assign(new Error("database or disk is full"), { code: "SQLITE_FULL" });
      return (run as (sql: string, ...rest: unknown[]) => unknown)(sql, ...rest);
    }) as typeof db.sqlite.run;
    // An unhandled rejection would end a server's process (Bun exits on one): none may happen here.
    const unhandled: unknown[] = [];
    const onUnhandled = (reason: unknown) => unhandled.push(reason);
    process.on("unhandledRejection", onUnhandled);
    try {
      expect(await failureOf(signIn(later, body, client))).toBe("database or disk is full");
      await Bun.sleep(20); // anything written after the failed batch would have committed by now
    } finally {
      db.sqlite.run = run;
      process.off("unhandledRejection", onUnhandled);
    }
    expect(unhandled).toEqual([]);
    expect(tokenRows(deps)).toBe(0);
    expect((await store.findChallenge(deps.db, body.nonce))?.consumedAt).toBeNull(); // rolled back with the token
    expect((await signIn(later, body, client)).walletAddress).toBe(body.walletAddress);
  });

  test("a consume that fails is said as it is, and spends nothing", async () => {
    const { deps, db } = await testDeps();
    const body = await signedChallenge(deps);
    db.sqlite.run("CREATE TRIGGER refuse BEFORE UPDATE ON auth_challenges BEGIN SELECT RAISE(ABORT, 'disk trouble'); END");
    expect(await failureOf(signIn(deps, body, client))).toContain("disk trouble");
    expect((await store.findChallenge(deps.db, body.nonce))?.consumedAt).toBeNull();
    db.sqlite.run("DROP TRIGGER refuse");
    expect((await signIn(deps, body, client)).walletAddress).toBe(body.walletAddress);
  });
});

describe("refresh and revocation", () => {
  test("a refresh is recorded only while the token it refreshes is unrevoked", async () => {
    const { deps, clock } = await testDeps();
    const s = await login(deps);
    const row = { jti: crypto.randomUUID(), sessionId: s.sessionId, wallet: s.walletAddress, issuedAt: clock.now(), expiresAt: clock.now() + 1000, sessionStartedAt: clock.now(), fingerprint: null, kid: null, issuer: null };
    await store.revokeToken(deps.db, s.walletAddress, s.jti, clock.now());
    expect(await store.insertToken(deps.db, { row, now: clock.now(), parentJti: s.jti })).toBe("parent revoked");
    expect(await store.findToken(deps.db, row.wallet, row.jti)).toBeNull();
  });

  test("the fingerprint link follows a refresh to the new token", async () => {
    const { deps, clock } = await testDeps();
    const s = await login(deps);
    clock.advance((604800 - 60) * 1000);
    const r = await restoreSession(deps, s.token);
    expect((await findLinkedSession(deps, client))?.jti).toBe(r.session.jti);
  });

  test("revoke-all counts only live tokens", async () => {
    const { deps, clock } = await testDeps({ SESSION_TTL_S: "60" });
    const wallet = newWallet();
    await login(deps, wallet);
    clock.advance(61_000);
    await login(deps, wallet);
    const ch = await issueChallenge(deps, wallet.address, client);
    const res = await revokeAllSessions(deps, { walletAddress: wallet.address, nonce: ch.nonce, signature: wallet.sign(ch.message) }, client);
    expect(res.revoked).toBe(1);
  });

  test("a sign-in whose signature is checked while a revoke-all of its wallet lands in the next second gets a live token", async () => {
    const { deps, clock } = await testDeps();
    clock.set(Date.UTC(2026, 10, 22, 0, 0, 0, 900));
    const wallet = newWallet();
    const first = await issueChallenge(deps, wallet.address, client);
    const second = await issueChallenge(deps, wallet.address, client);
    // The sign-in's times are read before its signature is checked; the revoke-all runs during the check.
    const verifier = deps.verifier;
    let revokeAll: unknown = null;
    const racing: Deps = {
      ...deps,
      verifier: {
        ...verifier,
        verify: async (...args: Parameters<typeof verifier.verify>) => {
          if (revokeAll === null) {
            clock.advance(200); // 00:00:01.100: the cutoff is 00:00:01
            revokeAll = await revokeAllSessions(deps, { walletAddress: wallet.address, nonce: second.nonce, signature: wallet.sign(second.message) }, client);
          }
          return verifier.verify(...args);
        },
      },
    };
    const session = await signIn(racing, { walletAddress: wallet.address, nonce: first.nonce, signature: wallet.sign(first.message) }, client);
    expect(revokeAll).toEqual({ revoked: 0, walletAddress: wallet.address });
    expect(session.issuedAtS).toBe(Date.UTC(2026, 10, 22, 0, 0, 1) / 1000); // moved to the cutoff, and signed so
    expect(session.expiresAtS - session.issuedAtS).toBe(deps.config.sessionTtlS);
    expect((await authenticateToken(deps, session.token)).jti).toBe(session.jti);
  });

  test("a sign-in that arrived just before its challenge expired is judged the same whether the purge runs during its check", async () => {
    for (const purgeDuring of [false, true]) {
      const { deps, clock } = await testDeps();
      const wallet = newWallet();
      const challenge = await issueChallenge(deps, wallet.address, client);
      clock.set(Date.parse(challenge.expiresAt) - 1); // it arrives 1 ms before the expiry
      const verifier = deps.verifier;
      const racing: Deps = {
        ...deps,
        verifier: {
          ...verifier,
          verify: async (...args: Parameters<typeof verifier.verify>) => {
            clock.advance(2); // the check ends just after it
            if (purgeDuring) await purgeAuth(deps);
            return verifier.verify(...args);
          },
        },
      };
      const body = { walletAddress: wallet.address, nonce: challenge.nonce, signature: wallet.sign(challenge.message) };
      expect([purgeDuring, await codeOf(signIn(racing, body, client))]).toEqual([purgeDuring, "OK"]);
    }
  });

  test("revoke-all spends its nonce and revokes in one write: when the revocation fails, the nonce is not spent", async () => {
    const { deps, db } = await testDeps();
    const wallet = newWallet();
    const session = await login(deps, wallet);
    const body = await signedChallenge(deps, wallet);
    db.sqlite.run("ALTER TABLE auth_wallet_cutoffs RENAME TO cutoffs_away"); // the cutoff's INSERT fails inside SQLite
    await expect(revokeAllSessions(deps, body, client)).rejects.toThrow();
    expect((await store.findChallenge(db, body.nonce))!.consumedAt).toBeNull();
    db.sqlite.run("ALTER TABLE cutoffs_away RENAME TO auth_wallet_cutoffs");
    expect((await authenticateToken(deps, session.token)).walletAddress).toBe(wallet.address); // nothing revoked
    expect(await revokeAllSessions(deps, body, client)).toEqual({ revoked: 1, walletAddress: wallet.address }); // the same challenge works
    expect(await codeOf(authenticateToken(deps, session.token))).toBe("TOKEN_REVOKED");
  });

  test("with FINGERPRINT_RESTORE=off no fingerprint is stored at all", async () => {
    const { deps, db } = await testDeps({ FINGERPRINT_RESTORE: "off" });
    await login(deps);
    expect(db.sqlite.query("SELECT COUNT(*) AS n FROM fingerprint_wallet_links").get()).toEqual({ n: 0 });
    expect(db.sqlite.query("SELECT COUNT(*) AS n FROM auth_tokens WHERE fingerprint IS NOT NULL").get()).toEqual({ n: 0 });
  });
});

describe("purge", () => {
  test("deletes expired challenges and tokens a day past exp, keeps the rest", async () => {
    const { deps, clock, db } = await testDeps({ SESSION_TTL_S: "60" });
    const s = await login(deps);
    await issueChallenge(deps, newWallet().address, client);
    clock.advance(300_001);
    expect((await purgeAuth(deps)).challenges).toBe(0); // expired, but kept a minute: a sign-in that arrived in time is still judged
    clock.advance(CHALLENGE_PURGE_MARGIN_MS);
    let counts = await purgeAuth(deps);
    expect(counts.challenges).toBe(2); // the spent one and the unused one
    expect(counts.tokens).toBe(0);
    clock.advance(86_400_000);
    counts = await purgeAuth(deps);
    expect(counts.tokens).toBe(1);
    expect(counts.links).toBe(0); // already gone with the token's expiry below
    expect(db.sqlite.query("SELECT COUNT(*) AS n FROM auth_tokens").get()).toEqual({ n: 0 });
    expect(await codeOf(authenticateToken(deps, s.token))).toBe("TOKEN_EXPIRED");
  });
});

describe("purge of revoke-all cutoffs", () => {
  test("a wallet's cutoff is kept while any token issued before it could still live (the longest lifetime and a day), then purged", async () => {
    const { deps, clock, db } = await testDeps({ SESSION_TTL_S: "3600", SESSION_MAX_AGE_S: "864000" }); // tokens may live 10 days
    const wallet = newWallet();
    await login(deps, wallet);
    clock.advance(1_000);
    await revokeAllSessions(deps, await signedChallenge(deps, wallet), client);
    const cutoffs = () => (db.sqlite.query("SELECT COUNT(*) AS n FROM auth_wallet_cutoffs").get() as { n: number }).n;
    expect(cutoffs()).toBe(1);
    clock.advance(2 * 86_400_000); // past a day, but a token issued before the cutoff could still be refreshed within its 10 days
    expect((await purgeAuth(deps)).cutoffs).toBe(0);
    expect(cutoffs()).toBe(1);
    clock.advance(9 * 86_400_000 + 1_000); // past ten days and a day since the cutoff
    expect((await purgeAuth(deps)).cutoffs).toBe(1);
    expect(cutoffs()).toBe(0);
  });
});

describe("purge in steps", () => {
  const DAY = 86_400_000;
  /** Expired and live rows of every purged kind, more of each than one step takes, interleaved. */
  function seed(db: Deps["db"], now: number) {
    db.sqlite.run("BEGIN");
    const challenge = db.sqlite.query("INSERT INTO auth_challenges (nonce, wallet, message, issued_at, expires_at) VALUES (?, 'w', 'm', ?, ?)");
    for (let i = 0; i < 2_500; i++) challenge.run(`old-${i}`, now - DAY, now - CHALLENGE_PURGE_MARGIN_MS - 1); // past the purge's margin
    challenge.run("live", now, now + 60_000);
    const token = db.sqlite.query(
      "INSERT INTO auth_tokens (jti, session_id, wallet, issued_at, expires_at, session_started_at) VALUES (?, 's', ?, ?, ?, ?)",
    );
    const link = db.sqlite.query("INSERT INTO fingerprint_wallet_links (fingerprint, wallet, session_id, jti, updated_at) VALUES (?, ?, 's', ?, ?)");
    for (let i = 0; i < 3_000; i++) {
      const expired = i % 3 !== 0; // 2,000 long expired, 1,000 live, mixed through the table
      token.run(`jti-${i}`, `wallet-${i}`, now - 3 * DAY, expired ? now - 2 * DAY : now + DAY, now - 3 * DAY);
      if (i % 2 === 0) link.run(`fp-${i}`, `wallet-${i}`, `jti-${i}`, now);
    }
    const cutoff = db.sqlite.query("INSERT INTO auth_wallet_cutoffs (wallet, tokens_valid_after) VALUES (?, ?)");
    for (let i = 0; i < 1_200; i++) cutoff.run(`cut-${i}`, now - 400 * DAY); // older than any token could live
    cutoff.run("cut-recent", now);
    db.sqlite.run("COMMIT");
  }
  const count = (db: Deps["db"], table: string) => (db.sqlite.query(`SELECT COUNT(*) AS n FROM ${table}`).get() as { n: number }).n;

  test("tables larger than a step are purged whole, and only what is due", async () => {
    const { deps, db, clock } = await testDeps();
    seed(db, clock.now());
    const counts = await purgeAuth(deps);
    expect(counts).toMatchObject({ challenges: 2_500, tokens: 2_000, links: 1_000, cutoffs: 1_200 });
    expect([count(db, "auth_challenges"), count(db, "auth_tokens"), count(db, "fingerprint_wallet_links"), count(db, "auth_wallet_cutoffs")]).toEqual([
      1, 1_000, 500, 1,
    ]);
    expect(db.sqlite.query("SELECT COUNT(*) AS n FROM auth_tokens WHERE expires_at < ?").get(clock.now())).toEqual({ n: 0 });
  });

  test("other writes are answered between its steps, not after the whole purge", async () => {
    const { deps, db, clock } = await testDeps();
    seed(db, clock.now());
    const purge = purgeAuth(deps);
    await store.insertChallenge(db, { nonce: "meanwhile", wallet: "w", message: "m", issuedAt: clock.now(), expiresAt: clock.now() + 60_000 });
    // Answered after the first step's commit: the expired token rows are still there, a few steps later.
    expect(db.sqlite.query("SELECT COUNT(*) AS n FROM auth_tokens WHERE expires_at < ?").get(clock.now())).toEqual({ n: 2_000 });
    await purge;
    expect(await store.findChallenge(db, "meanwhile")).not.toBeNull();
  });

  test("a stop between steps leaves the rest to the next run", async () => {
    const { deps, db, clock } = await testDeps();
    seed(db, clock.now());
    const stopping = new AbortController();
    const first = purgeAuth(deps, stopping.signal);
    stopping.abort(); // after the first step began: it finishes, no other starts
    expect(await first).toMatchObject({ challenges: STEP_ROWS, tokens: 0, links: 0, cutoffs: 0 });
    expect(await purgeAuth(deps)).toMatchObject({ challenges: 2_500 - STEP_ROWS, tokens: 2_000, links: 1_000, cutoffs: 1_200 });
  });
});

describe("token rows by (wallet, jti)", () => {
  test("tokens and links recorded before migration 14 keep working after it: live ones authenticate, revoked ones stay revoked", async () => {
    const dir = tempDir();
    try {
      // Two tokens and a fingerprint link made by the current code, copied into a database still at version 13.
      const { deps: issuer, db: issued } = await testDeps();
      const otherClient = { ip: "192.0.2.77", userAgent: "other-agent/2" };
      const [live, revokedOne] = [await login(issuer, newWallet(), otherClient), await login(issuer)];
      await revokeSessionToken(issuer, revokedOne.token);
      const tokenColumns = "jti, session_id, wallet, issued_at, expires_at, session_started_at, fingerprint, revoked_at";
      const linkColumns = "fingerprint, wallet, session_id, jti, updated_at";
      const rows = issued.sqlite.query(`SELECT ${tokenColumns} FROM auth_tokens ORDER BY rowid`).values();
      const links = issued.sqlite.query(`SELECT ${linkColumns} FROM fingerprint_wallet_links`).values();
      expect(links).toHaveLength(1);
      const path = join(dir, "v13.db");
      const old = new Database(path, { create: true, strict: true });
      migrate(old, 0, MIGRATIONS.filter((m) => m.version <= 13));
      expect(old.query("SELECT sql FROM sqlite_master WHERE name = 'auth_tokens'").get()).toEqual({ sql: expect.stringContaining("jti TEXT PRIMARY KEY") });
      for (const r of rows) old.query(`INSERT INTO auth_tokens (${tokenColumns}) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`).run(...r);
      for (const l of links) old.query(`INSERT INTO fingerprint_wallet_links (${linkColumns}) VALUES (?, ?, ?, ?, ?)`).run(...l);
      old.close();

      const { deps, db } = await testDeps({}, { dbPath: path }); // migrates to the newest version
      expect(db.sqlite.query(`SELECT ${tokenColumns} FROM auth_tokens ORDER BY rowid`).values()).toEqual(rows);
      expect(db.sqlite.query(`SELECT ${linkColumns} FROM fingerprint_wallet_links`).values()).toEqual(links);
      expect((await authenticateToken(deps, live.token)).jti).toBe(live.jti);
      expect(await codeOf(authenticateToken(deps, revokedOne.token))).toBe("TOKEN_REVOKED");
      expect(db.sqlite.query("PRAGMA index_list(auth_tokens)").all()).toEqual([expect.objectContaining({ name: "auth_tokens_by_prefixes", unique: 0 })]);
      expect(await findLinkedSession(deps, otherClient)).toEqual({ walletAddress: live.walletAddress, sessionId: live.sessionId, jti: live.jti, tokenExpiresAtS: live.expiresAtS });
      await revokeSessionToken(deps, live.token); // drops the link to it, found by (wallet, jti)
      expect(await findLinkedSession(deps, otherClient)).toBeNull();
      expect(db.sqlite.query("SELECT COUNT(*) AS n FROM fingerprint_wallet_links").get()).toEqual({ n: 0 });
      db.close();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test("a token is found only under its own wallet, and every statement by wallet goes through the prefix indexes, never a scan", async () => {
    const { deps, db, clock } = await testDeps();
    const wallet = newWallet();
    const a = await login(deps, wallet);
    const b = await login(deps);
    expect(await store.findToken(deps.db, b.walletAddress, a.jti)).toBeNull();
    expect((await store.findToken(deps.db, a.walletAddress, a.jti))?.sessionId).toBe(a.sessionId);
    expect(await store.revokeToken(deps.db, b.walletAddress, a.jti, deps.clock.now())).toBe(false); // not b's token
    expect(await codeOf(authenticateToken(deps, a.token))).toBe("OK");

    // The statements themselves, as each operation prepares them: lookup, refresh (its parent, its links),
    // revoke, revoke-all, the purge's links-without-a-live-token check, and sign-out.
    const plans = [
      ...(await plansOf(db.sqlite, () => store.findToken(deps.db, b.walletAddress, b.jti))),
      ...(await plansOf(db.sqlite, async () => {
        clock.advance((604800 - 60) * 1000);
        expect((await restoreSession(deps, a.token)).refreshed).toBe(true);
      })),
      ...(await plansOf(db.sqlite, () => revokeSessionToken(deps, b.token))),
      ...(await plansOf(db.sqlite, async () => {
        const ch = await issueChallenge(deps, wallet.address, client);
        expect((await revokeAllSessions(deps, { walletAddress: wallet.address, nonce: ch.nonce, signature: wallet.sign(ch.message) }, client)).revoked).toBe(2);
      })),
      ...(await plansOf(db.sqlite, () => purgeAuth(deps))),
      ...(await plansOf(db.sqlite, async () => {
        const c = await login(deps); // sign-out: its token and this client's link to the wallet
        await disconnectWallet(deps, { token: c.token, walletAddress: c.walletAddress, jti: c.jti }, client);
      })),
    ].filter((p) => /\b(auth_tokens|fingerprint_wallet_links)\b/.test(p.sql) && /\bWHERE\b[\s\S]*\b(wallet|jti) = /.test(p.sql));
    expect(plans.length).toBeGreaterThanOrEqual(14);
    for (const { sql, plan } of plans) {
      expect({ sql, scans: /\bSCAN\b/.test(plan) }).toEqual({ sql, scans: false });
      // By the prefix index, or (sign-out's own link) by the link's fingerprint, its primary key.
      const indexed = /USING INDEX (auth_tokens|fingerprint_wallet_links)_by_prefixes \(<expr>=\?( AND <expr>=\?)?\)/.test(plan) || /\(fingerprint=\?\)/.test(plan);
      expect({ sql, indexed }).toEqual({ sql, indexed: true });
    }
  });
});
