// Session JWT verification in isolation: claims, times at their edges, algorithm and key-id rules.
import { describe, expect, test } from "bun:test";
import { SignJWT } from "jose";
import { codeOf } from "../../test/helpers/errors.ts";
import { createJwtKeys, keyIdOf, signSessionJwt, verifySessionJwt } from "./tokens.ts";

const enc = (s: string) => new TextEncoder().encode(s);
const CURRENT = enc("current-secret-current-secret-0001");
const PREVIOUS = enc("previous-secret-previous-secret-01");
const ISS = "http://walletgate.test";
const NOW_S = 1_800_000_000;
const base = { walletAddress: "W", sessionId: "11111111-1111-4111-8111-111111111111", jti: "22222222-2222-4222-8222-222222222222" };


const keys = await createJwtKeys(ISS, CURRENT, PREVIOUS);
const raw = (claims: Record<string, unknown>, secret = CURRENT, kid: string | null = keyIdOf(CURRENT), alg = "HS256") =>
  new SignJWT(claims).setProtectedHeader(kid === null ? { alg, typ: "JWT" } : { alg, typ: "JWT", kid }).sign(secret);
const full = { ...base, iat: NOW_S, exp: NOW_S + 600, iss: ISS };

describe("signSessionJwt", () => {
  /** What jose itself makes of the same claims: the reference the synchronous signer must equal. */
  const byJose = (k: typeof keys, c: { walletAddress: string; sessionId: string; jti: string; iat: number; exp: number }, secret: Uint8Array) =>
    new SignJWT({ walletAddress: c.walletAddress, sessionId: c.sessionId })
      .setProtectedHeader({ alg: "HS256", typ: "JWT", kid: k.current.kid })
      .setJti(c.jti)
      .setIssuedAt(c.iat)
      .setExpirationTime(c.exp)
      .setIssuer(k.issuer)
      .sign(secret);

  test("byte for byte the token jose's SignJWT makes, for many claims and issuers", async () => {
    const odd = await createJwtKeys('https://wallet"gate.example:8443/é?x=1&y=\\', enc("another-secret-another-secret-0002"), null);
    const cases = [
      { ...base, iat: NOW_S, exp: NOW_S + 600 },
      { walletAddress: "7nRqz4bYQ3kPp1X3E2B8hd9s3qvuAhsYd2u8tX1xvAeM", sessionId: crypto.randomUUID(), jti: crypto.randomUUID(), iat: 0, exp: 1 },
      { walletAddress: 'quote" back\\ slash', sessionId: "ü € 😀 \u2028", jti: "\u0000\n", iat: 2 ** 31, exp: 2 ** 40 },
    ];
    for (const [k, secret] of [[keys, CURRENT], [odd, enc("another-secret-another-secret-0002")]] as const) {
      for (const c of cases) expect(signSessionJwt(k, c)).toBe(await byJose(k, c, secret));
    }
  });

  test("jose verifies what it signs, under the current kid", async () => {
    const token = signSessionJwt(keys, { ...base, iat: NOW_S, exp: NOW_S + 600 });
    const { jwtVerify, decodeProtectedHeader } = await import("jose");
    expect(decodeProtectedHeader(token)).toEqual({ alg: "HS256", typ: "JWT", kid: keyIdOf(CURRENT) });
    const { payload } = await jwtVerify(token, CURRENT, { algorithms: ["HS256"], issuer: ISS, currentDate: new Date(NOW_S * 1000) });
    expect(payload).toEqual(full);
    await expect(jwtVerify(token, PREVIOUS, { algorithms: ["HS256"] })).rejects.toThrow();
  });
});

describe("verifySessionJwt", () => {
  test("round trip with the current key", async () => {
    const token = await signSessionJwt(keys, { ...base, iat: NOW_S, exp: NOW_S + 600 });
    expect(await verifySessionJwt(keys, token, NOW_S * 1000)).toEqual(full);
  });

  test("the previous secret verifies only under its own kid", async () => {
    expect(await codeOf(verifySessionJwt(keys, await raw(full, PREVIOUS, keyIdOf(PREVIOUS)), NOW_S * 1000))).toBe("OK");
    expect(await codeOf(verifySessionJwt(keys, await raw(full, PREVIOUS, keyIdOf(CURRENT)), NOW_S * 1000))).toBe("TOKEN_INVALID");
    expect(await codeOf(verifySessionJwt(keys, await raw(full, CURRENT, keyIdOf(PREVIOUS)), NOW_S * 1000))).toBe("TOKEN_INVALID");
    expect(await codeOf(verifySessionJwt(keys, await raw(full, CURRENT, null), NOW_S * 1000))).toBe("TOKEN_INVALID");
  });

  test("exp: valid one second before, expired at and after (no leeway)", async () => {
    const token = await raw(full);
    expect(await codeOf(verifySessionJwt(keys, token, (NOW_S + 599) * 1000))).toBe("OK");
    expect(await codeOf(verifySessionJwt(keys, token, (NOW_S + 600) * 1000))).toBe("TOKEN_EXPIRED");
    expect(await codeOf(verifySessionJwt(keys, token, (NOW_S + 9999) * 1000))).toBe("TOKEN_EXPIRED");
  });

  test("iat may be at most 30 s in the future", async () => {
    expect(await codeOf(verifySessionJwt(keys, await raw({ ...full, iat: NOW_S + 30 }), NOW_S * 1000))).toBe("OK");
    expect(await codeOf(verifySessionJwt(keys, await raw({ ...full, iat: NOW_S + 31 }), NOW_S * 1000))).toBe("TOKEN_INVALID");
  });

  test.each([
    ["no exp", { ...full, exp: undefined }],
    ["no jti", { ...full, jti: undefined }],
    ["no iat", { ...full, iat: undefined }],
    ["no walletAddress", { ...full, walletAddress: undefined }],
    ["numeric walletAddress", { ...full, walletAddress: 5 }],
    ["object sessionId", { ...full, sessionId: { a: 1 } }],
    ["string exp", { ...full, exp: String(NOW_S + 600) }],
    ["wrong issuer", { ...full, iss: "http://elsewhere" }],
    ["no issuer", { ...full, iss: undefined }],
  ])("%s: TOKEN_INVALID", async (_name, claims) => {
    const clean = Object.fromEntries(Object.entries(claims).filter(([, v]) => v !== undefined));
    expect(await codeOf(verifySessionJwt(keys, await raw(clean), NOW_S * 1000))).toBe("TOKEN_INVALID");
  });

  test("a token of another issuer says so (a BASE_URL, HOST or PORT changed), not in jose's words", async () => {
    const messageOf = (p: Promise<unknown>) => p.then(() => null, (err: Error) => err.message);
    expect(await messageOf(verifySessionJwt(keys, await raw({ ...full, iss: "http://elsewhere" }), NOW_S * 1000))).toBe(
      "session token is invalid: it was issued for another BASE_URL than this server's",
    );
    const { iss: _, ...noIssuer } = full;
    expect(await messageOf(verifySessionJwt(keys, await raw(noIssuer), NOW_S * 1000))).toBe("session token is invalid: it names no issuer");
  });

  test("other algorithms and over-long tokens are refused", async () => {
    expect(await codeOf(verifySessionJwt(keys, await raw(full, CURRENT, keyIdOf(CURRENT), "HS384"), NOW_S * 1000))).toBe("TOKEN_INVALID");
    expect(await codeOf(verifySessionJwt(keys, "a".repeat(5000), NOW_S * 1000))).toBe("TOKEN_INVALID");
  });

  test("one token has one spelling: a padded or non-canonical signature, or a space, is refused", async () => {
    const token = signSessionJwt(keys, { ...base, iat: NOW_S, exp: NOW_S + 600 });
    const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    const last = alphabet.indexOf(token.at(-1)!);
    // The same 32 bytes: the last character's 2 low bits are not part of them.
    const otherLast = token.slice(0, -1) + alphabet[last ^ 1];
    for (const spelling of [`${token}=`, otherLast, ` ${token}`, `${token}\n`]) {
      expect([spelling, await codeOf(verifySessionJwt(keys, spelling, NOW_S * 1000))]).toEqual([spelling, "TOKEN_INVALID"]);
    }
    expect((await verifySessionJwt(keys, token, NOW_S * 1000)).jti).toBe(base.jti);
  });
});
