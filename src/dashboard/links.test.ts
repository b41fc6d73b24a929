// One-time dashboard sign-in links in-process with a movable clock: create, redeem once, expiry, races,
// malformed codes, keypairs that do not hold together, nothing secret at rest, purge.
import { describe, expect, test } from "bun:test";
import { Keypair } from "@solana/web3.js";
import { codeOf } from "../../test/helpers/errors.ts";
import { testDeps } from "../../test/helpers/deps.ts";
import { authenticateToken } from "../auth/sessions.ts";
import { purgeAuth } from "../auth/purge.ts";
import { encodeBase58 } from "../lib/encoding.ts";
import { sha256Hex } from "../lib/hash.ts";
import { LINK_TTL_MS, createDashboardLink, redeemDashboardLink } from "./links.ts";

const browser = { ip: "198.51.100.7", userAgent: "Mozilla/5.0 test" };

/** The code a link carries in its fragment. */
function codeOfLink(url: string): string {
  const match = /^http:\/\/walletgate\.test\/dashboard#link=([1-9A-HJ-NP-Za-km-z]+)$/.exec(url);
  if (match === null) throw new Error(`unexpected link ${url}`);
  return match[1]!;
}

describe("createDashboardLink", () => {
  test("proves the keypair's wallet and returns a fragment link that lives LINK_TTL_MS", async () => {
    const { deps, clock, db } = await testDeps();
    const keypair = Keypair.generate();
    const link = await createDashboardLink(deps, keypair.secretKey);
    expect(link.walletAddress).toBe(keypair.publicKey.toBase58());
    expect(link.expiresAt).toBe(clock.now() + LINK_TTL_MS);
    expect(LINK_TTL_MS).toBe(600_000);
    codeOfLink(link.url);
    // The proof went through a real challenge, now spent.
    const challenges = db.sqlite.query("SELECT wallet, consumed_at AS consumedAt FROM auth_challenges").all();
    expect(challenges).toEqual([{ wallet: link.walletAddress, consumedAt: clock.now() }]);
  });

  test("two links for one wallet are distinct and each works", async () => {
    const { deps } = await testDeps();
    const keypair = Keypair.generate();
    const a = await createDashboardLink(deps, keypair.secretKey);
    const b = await createDashboardLink(deps, keypair.secretKey);
    expect(a.url).not.toBe(b.url);
    expect((await redeemDashboardLink(deps, codeOfLink(a.url), browser)).walletAddress).toBe(keypair.publicKey.toBase58());
    expect((await redeemDashboardLink(deps, codeOfLink(b.url), browser)).walletAddress).toBe(keypair.publicKey.toBase58());
  });

  test("a keypair whose public half is another wallet's is refused, and no link is made", async () => {
    const { deps, db } = await testDeps();
    const mine = Keypair.generate().secretKey;
    const theirs = Keypair.generate().publicKey.toBytes();
    const forged = new Uint8Array(64);
    forged.set(mine.subarray(0, 32));
    forged.set(theirs, 32);
    expect(await codeOf(createDashboardLink(deps, forged))).toBe("INVALID_SIGNATURE");
    expect(db.sqlite.query("SELECT COUNT(*) AS n FROM dashboard_links").get()).toEqual({ n: 0 });
  });

  test("a key that is not 64 bytes is refused", async () => {
    const { deps } = await testDeps();
    const seedOnly = Keypair.generate().secretKey.slice(0, 32);
    expect(await codeOf(createDashboardLink(deps, seedOnly))).toBe("VALIDATION_ERROR");
    expect(await codeOf(createDashboardLink(deps, new Uint8Array(65)))).toBe("VALIDATION_ERROR");
  });

  test("only the code's SHA-256 is stored, never the code", async () => {
    const { deps, db } = await testDeps();
    const link = await createDashboardLink(deps, Keypair.generate().secretKey);
    const code = codeOfLink(link.url);
    const rows = db.sqlite.query("SELECT * FROM dashboard_links").all() as Record<string, unknown>[];
    expect(rows).toEqual([
      { code_hash: sha256Hex(code), wallet: link.walletAddress, created_at: deps.clock.now(), expires_at: link.expiresAt, used_at: null },
    ]);
    for (const table of ["dashboard_links", "auth_challenges", "auth_tokens"]) {
      const dump = JSON.stringify(db.sqlite.query(`SELECT * FROM ${table}`).all());
      expect({ table, holdsCode: dump.includes(code) }).toEqual({ table, holdsCode: false });
    }
    await redeemDashboardLink(deps, code, browser);
    expect(JSON.stringify(db.sqlite.query("SELECT * FROM dashboard_links").all()).includes(code)).toBe(false);
  });
});

describe("redeemDashboardLink", () => {
  test("gives a session token of the wallet that the token checks accept", async () => {
    const { deps } = await testDeps();
    const keypair = Keypair.generate();
    const link = await createDashboardLink(deps, keypair.secretKey);
    const session = await redeemDashboardLink(deps, codeOfLink(link.url), browser);
    expect(session.walletAddress).toBe(keypair.publicKey.toBase58());
    const verified = await authenticateToken(deps, session.token);
    expect(verified).toMatchObject({ walletAddress: link.walletAddress, sessionId: session.sessionId, jti: session.jti });
    expect(session.expiresAtS - session.issuedAtS).toBe(deps.config.sessionTtlS);
  });

  test("a second redeem of the same link is refused (NONCE_USED) and issues nothing", async () => {
    const { deps, db } = await testDeps();
    const link = await createDashboardLink(deps, Keypair.generate().secretKey);
    const code = codeOfLink(link.url);
    await redeemDashboardLink(deps, code, browser);
    expect(await codeOf(redeemDashboardLink(deps, code, browser))).toBe("NONCE_USED");
    expect(db.sqlite.query("SELECT COUNT(*) AS n FROM auth_tokens").get()).toEqual({ n: 1 });
  });

  test("a session that cannot be recorded leaves the link unspent: the link and its token are one write", async () => {
    const { deps, db } = await testDeps();
    const link = await createDashboardLink(deps, Keypair.generate().secretKey);
    const code = codeOfLink(link.url);
    db.sqlite.run("CREATE TEMP TRIGGER refuse_tokens BEFORE INSERT ON auth_tokens BEGIN SELECT RAISE(ABORT, 'disk full'); END");
    expect(await redeemDashboardLink(deps, code, browser).catch((err: Error) => err.message)).toContain("disk full");
    expect(db.sqlite.query("SELECT used_at AS usedAt FROM dashboard_links").get()).toEqual({ usedAt: null });
    db.sqlite.run("DROP TRIGGER refuse_tokens");
    expect(await codeOf(redeemDashboardLink(deps, code, browser))).toBe("OK");
    expect(db.sqlite.query("SELECT COUNT(*) AS n FROM auth_tokens").get()).toEqual({ n: 1 });
  });

  test("works until its expiry and is refused from then on (CHALLENGE_EXPIRED)", async () => {
    const { deps, clock } = await testDeps();
    const early = await createDashboardLink(deps, Keypair.generate().secretKey);
    const late = await createDashboardLink(deps, Keypair.generate().secretKey);
    clock.advance(LINK_TTL_MS - 1);
    expect(await codeOf(redeemDashboardLink(deps, codeOfLink(early.url), browser))).toBe("OK");
    clock.advance(1);
    expect(await codeOf(redeemDashboardLink(deps, codeOfLink(late.url), browser))).toBe("CHALLENGE_EXPIRED");
    clock.advance(3_600_000);
    expect(await codeOf(redeemDashboardLink(deps, codeOfLink(late.url), browser))).toBe("CHALLENGE_EXPIRED");
  });

  test("of concurrent redeems exactly one wins; the others hear NONCE_USED", async () => {
    const { deps, db } = await testDeps();
    const link = await createDashboardLink(deps, Keypair.generate().secretKey);
    const code = codeOfLink(link.url);
    const outcomes = await Promise.all([
      codeOf(redeemDashboardLink(deps, code, browser)),
      codeOf(redeemDashboardLink(deps, code, { ip: "203.0.113.9", userAgent: "curl/8" })),
      ...Array.from({ length: 6 }, () => codeOf(redeemDashboardLink(deps, code, browser))),
    ]);
    expect(outcomes.filter((o) => o === "OK").length).toBe(1);
    expect(outcomes.filter((o) => o === "NONCE_USED").length).toBe(7);
    expect(db.sqlite.query("SELECT COUNT(*) AS n FROM auth_tokens").get()).toEqual({ n: 1 });
  });

  test("a malformed code is VALIDATION_ERROR; a well-formed unknown one NONCE_NOT_FOUND", async () => {
    const { deps } = await testDeps();
    const link = await createDashboardLink(deps, Keypair.generate().secretKey);
    const code = codeOfLink(link.url);
    const malformed = [
      "",
      "abc",
      code.slice(0, 20), // too short to be 32 bytes
      `${code}0`, // "0" is not a base58 digit
      code.replace(/.$/, "l"), // nor is "l"
      code + code, // too long
      "x".repeat(10_000),
      encodeBase58(new Uint8Array(33).fill(7)),
      link.url,
    ];
    for (const bad of malformed) {
      expect({ bad, code: await codeOf(redeemDashboardLink(deps, bad, browser)) }).toEqual({ bad, code: "VALIDATION_ERROR" });
    }
    const unknown = encodeBase58(crypto.getRandomValues(new Uint8Array(32)));
    expect(await codeOf(redeemDashboardLink(deps, unknown, browser))).toBe("NONCE_NOT_FOUND");
    // None of that spent the real link.
    expect(await codeOf(redeemDashboardLink(deps, code, browser))).toBe("OK");
  });
});

describe("purge", () => {
  test("keeps expired and used links a day (to say why they fail), then deletes them", async () => {
    const { deps, clock, db } = await testDeps();
    const used = await createDashboardLink(deps, Keypair.generate().secretKey);
    await redeemDashboardLink(deps, codeOfLink(used.url), browser);
    await createDashboardLink(deps, Keypair.generate().secretKey); // never used
    clock.advance(LINK_TTL_MS + 3_600_000);
    expect((await purgeAuth(deps)).dashboardLinks).toBe(0);
    expect(await codeOf(redeemDashboardLink(deps, codeOfLink(used.url), browser))).toBe("NONCE_USED");
    clock.advance(86_400_000);
    expect((await purgeAuth(deps)).dashboardLinks).toBe(2);
    expect(db.sqlite.query("SELECT COUNT(*) AS n FROM dashboard_links").get()).toEqual({ n: 0 });
    expect(await codeOf(redeemDashboardLink(deps, codeOfLink(used.url), browser))).toBe("NONCE_NOT_FOUND");
  });
});
