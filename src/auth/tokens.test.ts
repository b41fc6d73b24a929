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

  test("other algorithms and over-long tokens are refused", async () => {
    expect(await codeOf(verifySessionJwt(keys, await raw(full, CURRENT, keyIdOf(CURRENT), "HS384"), NOW_S * 1000))).toBe("TOKEN_INVALID");
    expect(await codeOf(verifySessionJwt(keys, "a".repeat(5000), NOW_S * 1000))).toBe("TOKEN_INVALID");
  });
});
