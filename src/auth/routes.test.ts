// /auth/* against the real server over HTTP: happy paths, every error code, replay, races, forged tokens.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { createHash } from "node:crypto";
import { connect } from "node:net";
import { SignJWT } from "jose";
import { base58 } from "@scure/base";
import { columnsHolding } from "../../test/helpers/db-scan.ts";
import { logged, startTestServer, type TestServer } from "../../test/helpers/server.ts";
import { ISO_MS } from "../../test/helpers/time.ts";
import { call, decodeJwt, getChallenge, newWallet, signIn } from "../../test/helpers/wallet.ts";

const SECRET = "test-secret-0123456789-0123456789-abcdef";
const UUID_V4 = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

let server: TestServer;
let url: string;

let kid = "";
beforeAll(async () => {
  server = await startTestServer({ AUTH_RATE_LIMIT: "off", JWT_SECRET: SECRET });
  url = server.url;
  kid = decodeJwt((await signIn(url, newWallet())).sessionToken).header.kid;
});
afterAll(async () => {
  await server.dispose();
});

function forge(claims: Record<string, unknown>, header: Record<string, unknown> = {}, secret = SECRET) {
  return new SignJWT(claims).setProtectedHeader({ alg: "HS256", typ: "JWT", kid, ...header } as any).sign(new TextEncoder().encode(secret));
}

describe("GET /auth/challenge", () => {
  test("issues a nonce and the exact SIWS-shaped message", async () => {
    const wallet = newWallet();
    const before = Date.now();
    const res = await call(url, `/auth/challenge?wallet=${wallet.address}`);
    expect(res.status).toBe(200);
    const { nonce, message, expiresAt } = res.body;
    expect(base58.decode(nonce).length).toBe(32);
    expect(expiresAt).toMatch(ISO_MS);
    const issuedAt = message.match(/Issued At: (.*)$/m)[1];
    expect(Date.parse(expiresAt) - Date.parse(issuedAt)).toBe(300_000);
    expect(Date.parse(issuedAt)).toBeGreaterThanOrEqual(before - 5);
    const host = new URL(url).host;
    expect(message).toBe(
      [
        `${host} wants you to sign in with your Solana account:`,
        wallet.address,
        "",
        "Sign this message to authenticate with walletgate. It does not send a transaction or cost a fee.",
        "",
        `URI: ${url}`,
        "Version: 1",
        "Chain ID: solana:localnet",
        `Nonce: ${nonce}`,
        `Issued At: ${issuedAt}`,
        `Expiration Time: ${expiresAt}`,
      ].join("\n"),
    );
    expect(message.endsWith("\n")).toBe(false);
  });

  test("each challenge has its own nonce", async () => {
    const wallet = newWallet();
    const a = await getChallenge(url, wallet);
    const b = await getChallenge(url, wallet);
    expect(a.nonce).not.toBe(b.nonce);
  });

  test("INVALID_ADDRESS for anything that is not base58 of 32 bytes", async () => {
    const thirtyOne = base58.encode(new Uint8Array(31).fill(7));
    const thirtyThree = base58.encode(new Uint8Array(33).fill(7));
    for (const bad of ["abc", "0OIl0OIl0OIl0OIl0OIl0OIl0OIl0OIl", thirtyOne, thirtyThree, " " + newWallet().address, ""]) {
      const res = await call(url, `/auth/challenge?wallet=${encodeURIComponent(bad)}`);
      expect({ bad, status: res.status, code: res.body.code }).toEqual({ bad, status: 400, code: "INVALID_ADDRESS" });
    }
  });

  test("VALIDATION_ERROR without the wallet parameter, listing the field", async () => {
    const res = await call(url, "/auth/challenge");
    expect(res.status).toBe(400);
    expect(res.body.code).toBe("VALIDATION_ERROR");
    expect(res.body.details).toEqual({ fields: [{ field: "wallet", message: expect.any(String) }] });
  });
});

describe("POST /auth/verify", () => {
  test("signs in: token with pinned header and the claims of auth.md", async () => {
    const wallet = newWallet();
    const body = await signIn(url, wallet);
    expect(body.walletAddress).toBe(wallet.address);
    expect(body.isNewSession).toBe(true);
    expect(body.expiresAt).toMatch(ISO_MS);
    const { header, payload } = decodeJwt(body.sessionToken);
    expect(header.alg).toBe("HS256");
    expect(header.typ).toBe("JWT");
    expect(typeof header.kid).toBe("string");
    expect(payload.walletAddress).toBe(wallet.address);
    expect(payload.sessionId).toMatch(UUID_V4);
    expect(payload.jti).toMatch(UUID_V4);
    expect(payload.exp - payload.iat).toBe(604800);
    expect(payload.iss).toBe(url);
    expect(Date.parse(body.expiresAt)).toBe(payload.exp * 1000);
  });

  test("accepts the message when sent and equal", async () => {
    const wallet = newWallet();
    const ch = await getChallenge(url, wallet);
    const res = await call(url, "/auth/verify", {
      body: { walletAddress: wallet.address, nonce: ch.nonce, signature: wallet.sign(ch.message), message: ch.message },
    });
    expect(res.status).toBe(200);
  });

  test("altered message: INVALID_SIGNATURE, and the nonce is spent", async () => {
    const wallet = newWallet();
    const ch = await getChallenge(url, wallet);
    const altered = ch.message.replace("Version: 1", "Version: 2");
    const res = await call(url, "/auth/verify", {
      body: { walletAddress: wallet.address, nonce: ch.nonce, signature: wallet.sign(altered), message: altered },
    });
    expect(res.status).toBe(401);
    expect(res.body).toEqual({ error: "message does not match the challenge", code: "INVALID_SIGNATURE" });
    const retry = await call(url, "/auth/verify", {
      body: { walletAddress: wallet.address, nonce: ch.nonce, signature: wallet.sign(ch.message) },
    });
    expect(retry.body.code).toBe("NONCE_USED");
  });

  test("a signature over an altered message (not sent) does not verify", async () => {
    const wallet = newWallet();
    const ch = await getChallenge(url, wallet);
    const res = await call(url, "/auth/verify", {
      body: { walletAddress: wallet.address, nonce: ch.nonce, signature: wallet.sign(ch.message + " ") },
    });
    expect(res.status).toBe(401);
    expect(res.body.code).toBe("INVALID_SIGNATURE");
    const retry = await call(url, "/auth/verify", { body: { walletAddress: wallet.address, nonce: ch.nonce, signature: wallet.sign(ch.message) } });
    expect(retry.body.code).toBe("NONCE_USED");
  });

  test("over-long fields get their own codes, not a schema error", async () => {
    const wallet = newWallet();
    const longAddress = await call(url, "/auth/verify", { body: { walletAddress: "1".repeat(300), nonce: "n", signature: "s" } });
    expect([longAddress.status, longAddress.body.code]).toEqual([400, "INVALID_ADDRESS"]);
    const longSignature = await call(url, "/auth/verify", { body: { walletAddress: wallet.address, nonce: "n", signature: "A".repeat(4000) } });
    expect([longSignature.status, longSignature.body.code]).toEqual([401, "INVALID_SIGNATURE"]);
    const ch = await getChallenge(url, wallet);
    const longMessage = await call(url, "/auth/verify", {
      body: { walletAddress: wallet.address, nonce: ch.nonce, signature: wallet.sign(ch.message), message: ch.message + "x".repeat(10_000) },
    });
    expect([longMessage.status, longMessage.body.code]).toEqual([401, "INVALID_SIGNATURE"]);
    const longNonce = await call(url, "/auth/verify", { body: { walletAddress: wallet.address, nonce: "n".repeat(2000), signature: wallet.sign("x") } });
    expect([longNonce.status, longNonce.body.code]).toEqual([401, "NONCE_NOT_FOUND"]);
  });

  test("hex signature: INVALID_SIGNATURE saying signatures are base64", async () => {
    const wallet = newWallet();
    const ch = await getChallenge(url, wallet);
    const hex = Buffer.from(wallet.sign(ch.message), "base64").toString("hex");
    const res = await call(url, "/auth/verify", { body: { walletAddress: wallet.address, nonce: ch.nonce, signature: hex } });
    expect(res.status).toBe(401);
    expect(res.body).toEqual({ error: "signatures are base64, not hex", code: "INVALID_SIGNATURE" });
    for (const other of [hex.slice(0, 64), "0x" + hex, hex.toUpperCase()]) {
      const r = await call(url, "/auth/verify", { body: { walletAddress: wallet.address, nonce: ch.nonce, signature: other } });
      expect(r.body).toEqual({ error: "signatures are base64, not hex", code: "INVALID_SIGNATURE" });
    }
    // refused at step 2: the nonce is still good
    const ok = await call(url, "/auth/verify", { body: { walletAddress: wallet.address, nonce: ch.nonce, signature: wallet.sign(ch.message) } });
    expect(ok.status).toBe(200);
  });

  test("base64 that is url-safe, unpadded, of the wrong length or not base64: INVALID_SIGNATURE", async () => {
    const wallet = newWallet();
    const ch = await getChallenge(url, wallet);
    const good = wallet.sign(ch.message);
    const variants = [
      Buffer.from(good, "base64").toString("base64url"),
      good.replace(/=+$/, ""),
      Buffer.alloc(63).toString("base64"),
      Buffer.alloc(65).toString("base64"),
      "!!!!",
      "",
    ];
    for (const signature of variants) {
      const res = await call(url, "/auth/verify", { body: { walletAddress: wallet.address, nonce: ch.nonce, signature } });
      expect({ signature, status: res.status, code: res.body.code }).toEqual({ signature, status: 401, code: "INVALID_SIGNATURE" });
    }
  });

  test("signed by another wallet: INVALID_SIGNATURE, then the nonce is spent", async () => {
    const wallet = newWallet();
    const other = newWallet();
    const ch = await getChallenge(url, wallet);
    const res = await call(url, "/auth/verify", { body: { walletAddress: wallet.address, nonce: ch.nonce, signature: other.sign(ch.message) } });
    expect(res.status).toBe(401);
    expect(res.body.code).toBe("INVALID_SIGNATURE");
    const again = await call(url, "/auth/verify", { body: { walletAddress: wallet.address, nonce: ch.nonce, signature: wallet.sign(ch.message) } });
    expect(again.body.code).toBe("NONCE_USED");
  });

  test("the other wallet cannot use this wallet's nonce: NONCE_NOT_FOUND", async () => {
    const wallet = newWallet();
    const other = newWallet();
    const ch = await getChallenge(url, wallet);
    const res = await call(url, "/auth/verify", { body: { walletAddress: other.address, nonce: ch.nonce, signature: other.sign(ch.message) } });
    expect(res.status).toBe(401);
    expect(res.body.code).toBe("NONCE_NOT_FOUND");
    const unknown = await call(url, "/auth/verify", {
      body: { walletAddress: wallet.address, nonce: base58.encode(crypto.getRandomValues(new Uint8Array(32))), signature: wallet.sign(ch.message) },
    });
    expect(unknown.body.code).toBe("NONCE_NOT_FOUND");
  });

  test("replay: NONCE_USED", async () => {
    const wallet = newWallet();
    const ch = await getChallenge(url, wallet);
    const body = { walletAddress: wallet.address, nonce: ch.nonce, signature: wallet.sign(ch.message) };
    expect((await call(url, "/auth/verify", { body })).status).toBe(200);
    const replay = await call(url, "/auth/verify", { body });
    expect(replay.status).toBe(401);
    expect(replay.body.code).toBe("NONCE_USED");
  });

  test("20 concurrent verifications of one nonce: exactly one succeeds", async () => {
    const wallet = newWallet();
    const ch = await getChallenge(url, wallet);
    const body = { walletAddress: wallet.address, nonce: ch.nonce, signature: wallet.sign(ch.message) };
    const results = await Promise.all(Array.from({ length: 20 }, () => call(url, "/auth/verify", { body })));
    expect(results.filter((r) => r.status === 200).length).toBe(1);
    const losers = results.filter((r) => r.status !== 200);
    expect(losers.length).toBe(19);
    for (const r of losers) expect([r.status, r.body.code]).toEqual([401, "NONCE_USED"]);
  });

  test("verifications and revoke-alls racing for one nonce: exactly one wins, and only a winning revoke-all revokes", async () => {
    for (let round = 0; round < 4; round++) {
      const wallet = newWallet();
      const earlier = await signIn(url, wallet);
      const ch = await getChallenge(url, wallet);
      const body = { walletAddress: wallet.address, nonce: ch.nonce, signature: wallet.sign(ch.message) };
      // Interleaved, and which kind goes first alternates by round.
      const paths = Array.from({ length: 20 }, (_, i) => ((i + round) % 2 === 0 ? "/auth/verify" : "/auth/revoke-all"));
      const results = await Promise.all(paths.map((path) => call(url, path, { body })));
      const winners = results.flatMap((r, i) => (r.status === 200 ? [{ path: paths[i], body: r.body }] : []));
      expect(winners.length).toBe(1);
      for (const r of results.filter((r) => r.status !== 200)) expect([r.status, r.body.code]).toEqual([401, "NONCE_USED"]);
      const earlierNow = await call(url, "/auth/session", { token: earlier.sessionToken });
      if (winners[0]!.path === "/auth/revoke-all") {
        expect(winners[0]!.body).toEqual({ revoked: 1, walletAddress: wallet.address });
        expect([earlierNow.status, earlierNow.body.code]).toEqual([401, "TOKEN_REVOKED"]);
      } else {
        expect(earlierNow.status).toBe(200);
        expect((await call(url, "/auth/session", { token: winners[0]!.body.sessionToken })).status).toBe(200);
      }
    }
  });

  test("invalid address is refused first (step 1), before the signature form (step 2)", async () => {
    const res = await call(url, "/auth/verify", { body: { walletAddress: "nope", nonce: "x", signature: "zz" } });
    expect(res.status).toBe(400);
    expect(res.body.code).toBe("INVALID_ADDRESS");
  });

  test("small-order public key with a trivial signature is refused", async () => {
    // A = identity-like small-order point, R = small-order, S = 0: accepted by lax verifiers for any message.
    const smallOrderA = base58.encode(Buffer.from("c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac03fa", "hex"));
    const ch = await getChallenge(url, smallOrderA);
    const sig = Buffer.concat([Buffer.from("c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac037a", "hex"), Buffer.alloc(32)]);
    const res = await call(url, "/auth/verify", { body: { walletAddress: smallOrderA, nonce: ch.nonce, signature: sig.toString("base64") } });
    expect(res.status).toBe(401);
    expect(res.body.code).toBe("INVALID_SIGNATURE");
  });

  test("schema errors: missing fields, wrong types, malformed JSON", async () => {
    const missing = await call(url, "/auth/verify", { body: { walletAddress: newWallet().address } });
    expect(missing.status).toBe(400);
    expect(missing.body.code).toBe("VALIDATION_ERROR");
    // One shape for every error that names fields (spec/README.md: details lists the fields).
    const named = (missing.body.details as { fields: { field: string; message: string }[] }).fields;
    expect(named.map((f) => f.field).sort()).toEqual(["nonce", "signature"]);
    for (const f of named) expect(f.message.length).toBeGreaterThan(0);
    const wrongType = await call(url, "/auth/verify", { body: { walletAddress: 5, nonce: "x", signature: "y" } });
    expect(wrongType.body.code).toBe("VALIDATION_ERROR");
    // The refused value is not repeated back (it may be a secret pasted into the wrong field).
    const pasted = await call(url, "/auth/verify", { body: { walletAddress: newWallet().address, nonce: ["ft_pasted_secret"], signature: "y" } });
    expect(pasted.body.details).toEqual({ fields: [{ field: "nonce", message: "Expected property 'nonce' to be string" }] });
    expect(JSON.stringify(pasted.body)).not.toContain("ft_pasted_secret");
    const malformed = await call(url, "/auth/verify", { body: "{not json" });
    expect([malformed.status, malformed.body.code]).toEqual([400, "VALIDATION_ERROR"]);
  });

  test("bodies over MAX_BODY_BYTES: 413 PAYLOAD_TOO_LARGE, with or without Content-Length", async () => {
    const big = JSON.stringify({ walletAddress: "x".repeat(70_000), nonce: "n", signature: "s" });
    const sized = await call(url, "/auth/verify", { body: big });
    expect([sized.status, sized.body.code]).toEqual([413, "PAYLOAD_TOO_LARGE"]);
    const stream = new ReadableStream({
      start(c) {
        for (let i = 0; i < 10; i++) c.enqueue(new TextEncoder().encode("x".repeat(10_000)));
        c.close();
      },
    });
    const res = await fetch(url + "/auth/verify", { method: "POST", body: stream, headers: { "content-type": "application/json" } });
    expect(res.status).toBe(413);
    expect(((await res.json()) as { code: string }).code).toBe("PAYLOAD_TOO_LARGE");
    // An owner's answers are never cached, this one included (it comes before any route runs).
    const owner = await call(url, "/dashboard/api/keys", { body: { label: "x".repeat(70_000) } });
    expect([owner.status, owner.body.code, owner.headers.get("cache-control")]).toEqual([413, "PAYLOAD_TOO_LARGE", "no-store"]);
  });

  test("Content-Length sent twice (which Bun accepts) does not lift the limit: the body is counted as read", async () => {
    const { port, hostname } = new URL(url);
    const raw = (path: string, body: string) =>
      new Promise<string>((resolve, reject) => {
        let text = "";
        const length = Buffer.byteLength(body);
        const socket = connect({ host: hostname, port: Number(port) }, () => {
          socket.write(
            `POST ${path} HTTP/1.1\r\nHost: ${hostname}\r\nContent-Type: application/json\r\nContent-Length: ${length}\r\nContent-Length: ${length}\r\nConnection: close\r\n\r\n${body}`,
          );
        });
        socket.setEncoding("utf8");
        socket.on("data", (chunk: string) => (text += chunk));
        socket.on("close", () => resolve(text));
        socket.on("error", reject);
        setTimeout(() => reject(new Error(`no answer: ${JSON.stringify(text)}`)), 5_000).unref();
      });
    const big = JSON.stringify({ walletAddress: "x".repeat(70_000), nonce: "n", signature: "s" });
    for (const path of ["/auth/verify", "/mcp"]) {
      const answer = await raw(path, big);
      expect(answer).toStartWith("HTTP/1.1 413");
      expect(answer.toLowerCase()).toContain("x-request-id:");
      expect(answer).toContain('"code":"PAYLOAD_TOO_LARGE"');
    }
    // Under the limit, such a request is answered as usual.
    const small = await raw("/auth/verify", JSON.stringify({ walletAddress: "x", nonce: "n", signature: "s" }));
    expect(small).toStartWith("HTTP/1.1 400");
    expect(small).toContain('"code":"INVALID_ADDRESS"');
  });

  test("a declared length of gigabytes is answered at once with the same 413 body and a request id", async () => {
    const { port, hostname } = new URL(url);
    const answer = await new Promise<string>((resolve, reject) => {
      let text = "";
      const socket = connect({ host: hostname, port: Number(port) }, () => {
        socket.write(`POST /auth/verify HTTP/1.1\r\nHost: ${hostname}\r\nContent-Type: application/json\r\nContent-Length: ${4 * 1024 ** 3}\r\n\r\n{"a":`);
      });
      socket.setEncoding("utf8");
      socket.on("data", (chunk: string) => {
        text += chunk;
        if (text.includes("\r\n\r\n") && text.includes("}")) {
          socket.destroy();
          resolve(text);
        }
      });
      socket.on("error", reject);
      setTimeout(() => reject(new Error(`no answer: ${JSON.stringify(text)}`)), 5_000).unref();
    });
    expect(answer).toStartWith("HTTP/1.1 413");
    expect(answer.toLowerCase()).toContain("x-request-id:");
    expect(answer).toContain('"code":"PAYLOAD_TOO_LARGE"');
  });
});

describe("GET /auth/session", () => {
  test("describes a valid token", async () => {
    const wallet = newWallet();
    const { sessionToken } = await signIn(url, wallet);
    const res = await call(url, "/auth/session", { token: sessionToken });
    expect(res.status).toBe(200);
    const { payload } = decodeJwt(sessionToken);
    expect(res.body).toEqual({
      authenticated: true,
      walletAddress: wallet.address,
      sessionId: payload.sessionId,
      network: "localnet",
      issuedAt: new Date(payload.iat * 1000).toISOString(),
      expiresAt: new Date(payload.exp * 1000).toISOString(),
      expiresInSeconds: expect.any(Number),
      refreshRecommended: false,
    });
    expect(res.body.expiresInSeconds).toBeGreaterThan(604800 - 5);
  });

  test("UNAUTHENTICATED without a Bearer token", async () => {
    for (const headers of [{} as Record<string, string>, { authorization: "Basic dXNlcjpwYXNz" }, { authorization: "" }]) {
      const res = await call(url, "/auth/session", { headers });
      expect([res.status, res.body.code]).toEqual([401, "UNAUTHENTICATED"]);
    }
  });

  test("TOKEN_INVALID for garbage, other algorithms, no kid, wrong issuer, foreign secret, unknown jti, a jti under another wallet or session, future iat", async () => {
    const wallet = newWallet();
    const { sessionToken } = await signIn(url, wallet);
    const { payload } = decodeJwt(sessionToken);
    const now = Math.floor(Date.now() / 1000);
    const enc = (o: object) => Buffer.from(JSON.stringify(o)).toString("base64url");
    const cases: Record<string, string> = {
      garbage: "not.a.jwt",
      empty: "",
      none: `${enc({ alg: "none", typ: "JWT", kid: decodeJwt(sessionToken).header.kid })}.${enc(payload)}.`,
      hs512: await new SignJWT(payload)
        .setProtectedHeader({ alg: "HS512", typ: "JWT", kid: decodeJwt(sessionToken).header.kid })
        .sign(new TextEncoder().encode(SECRET)),
      noKid: await new SignJWT(payload).setProtectedHeader({ alg: "HS256", typ: "JWT" }).sign(new TextEncoder().encode(SECRET)),
      wrongIssuer: await forge({ ...payload, iss: "https://evil.example" }),
      foreignSecret: await forge(payload, {}, "another-secret-that-is-32-bytes-long!!"),
      unknownJti: await forge({ ...payload, jti: crypto.randomUUID() }),
      // A real token id under another wallet or another session than the one it was issued with (a leaked secret).
      otherWallet: await forge({ ...payload, walletAddress: newWallet().address }),
      otherSession: await forge({ ...payload, sessionId: crypto.randomUUID() }),
      futureIat: await forge({ ...payload, iat: now + 120, exp: now + 3600 }),
      tampered: sessionToken.slice(0, -2) + (sessionToken.endsWith("A") ? "BB" : "AA"),
      spaced: "a b",
      trailingWord: `${sessionToken} extra`,
    };
    for (const [name, token] of Object.entries(cases)) {
      const res = await call(url, "/auth/session", { token });
      expect({ name, status: res.status, code: res.body.code }).toEqual({ name, status: 401, code: "TOKEN_INVALID" });
    }
  });

  test("TOKEN_EXPIRED once exp has passed (no leeway)", async () => {
    const wallet = newWallet();
    const { sessionToken } = await signIn(url, wallet);
    const { payload } = decodeJwt(sessionToken);
    const now = Math.floor(Date.now() / 1000);
    const expired = await forge({ ...payload, iat: now - 100, exp: now - 1 });
    const res = await call(url, "/auth/session", { token: expired });
    expect([res.status, res.body.code]).toEqual([401, "TOKEN_EXPIRED"]);
  });

  test("the response never echoes the token", async () => {
    const { sessionToken } = await signIn(url, newWallet());
    const res = await call(url, "/auth/session", { token: sessionToken });
    expect(JSON.stringify(res.body)).not.toContain(sessionToken);
  });
});

describe("POST /auth/revoke", () => {
  test("revokes that token at once, and only that one", async () => {
    const wallet = newWallet();
    const a = await signIn(url, wallet);
    const b = await signIn(url, wallet);
    const res = await call(url, "/auth/revoke", { method: "POST", token: a.sessionToken });
    expect([res.status, res.body]).toEqual([200, { revoked: true }]);
    const after = await call(url, "/auth/session", { token: a.sessionToken });
    expect([after.status, after.body.code]).toEqual([401, "TOKEN_REVOKED"]);
    expect((await call(url, "/auth/session", { token: b.sessionToken })).status).toBe(200);
    const twice = await call(url, "/auth/revoke", { method: "POST", token: a.sessionToken });
    expect([twice.status, twice.body.code]).toEqual([401, "TOKEN_REVOKED"]);
  });

  test("UNAUTHENTICATED without a token, TOKEN_INVALID with a bad one, TOKEN_EXPIRED with an old one", async () => {
    const { payload } = decodeJwt((await signIn(url, newWallet())).sessionToken);
    const now = Math.floor(Date.now() / 1000);
    const expired = await call(url, "/auth/revoke", { method: "POST", token: await forge({ ...payload, iat: now - 100, exp: now - 1 }) });
    expect([expired.status, expired.body.code]).toEqual([401, "TOKEN_EXPIRED"]);
    const none = await call(url, "/auth/revoke", { method: "POST" });
    expect([none.status, none.body.code]).toEqual([401, "UNAUTHENTICATED"]);
    const bad = await call(url, "/auth/revoke", { method: "POST", token: "x.y.z" });
    expect([bad.status, bad.body.code]).toEqual([401, "TOKEN_INVALID"]);
  });
});

describe("POST /auth/revoke-all", () => {
  async function revokeAll(wallet: ReturnType<typeof newWallet>) {
    const ch = await getChallenge(url, wallet);
    return call(url, "/auth/revoke-all", { body: { walletAddress: wallet.address, nonce: ch.nonce, signature: wallet.sign(ch.message) } });
  }

  test("revokes every token of the wallet, not others; a sign-in afterwards works at once", async () => {
    const wallet = newWallet();
    const other = newWallet();
    const tokens = [await signIn(url, wallet), await signIn(url, wallet), await signIn(url, wallet)].map((s) => s.sessionToken);
    const otherToken = (await signIn(url, other)).sessionToken;
    const res = await revokeAll(wallet);
    expect([res.status, res.body]).toEqual([200, { revoked: 3, walletAddress: wallet.address }]);
    for (const token of tokens) {
      const r = await call(url, "/auth/session", { token });
      expect([r.status, r.body.code]).toEqual([401, "TOKEN_REVOKED"]);
    }
    expect((await call(url, "/auth/session", { token: otherToken })).status).toBe(200);
    const fresh = await signIn(url, wallet);
    expect((await call(url, "/auth/session", { token: fresh.sessionToken })).status).toBe(200);
    const again = await revokeAll(wallet);
    expect(again.body).toEqual({ revoked: 1, walletAddress: wallet.address });
  });

  test("tokens issued before the cutoff are dead even when the store never listed them", async () => {
    const wallet = newWallet();
    const { sessionToken } = await signIn(url, wallet);
    const { payload } = decodeJwt(sessionToken);
    const unlisted = await forge({ ...payload, jti: crypto.randomUUID(), iat: payload.iat - 10 });
    expect((await call(url, "/auth/session", { token: unlisted })).body.code).toBe("TOKEN_INVALID");
    await Bun.sleep(1000); // the cutoff is a whole second: step past the second the first token was issued in
    expect((await revokeAll(wallet)).status).toBe(200);
    expect((await call(url, "/auth/session", { token: unlisted })).body.code).toBe("TOKEN_REVOKED");
  });

  test("checked exactly as a verification: every refusal code, and none of them revokes anything", async () => {
    const wallet = newWallet();
    const { sessionToken } = await signIn(url, wallet); // a session that every refused revoke-all below must leave alive
    const ch = await getChallenge(url, wallet);
    const post = (body: object) => call(url, "/auth/revoke-all", { body });
    expect((await post({ walletAddress: "bad", nonce: ch.nonce, signature: wallet.sign(ch.message) })).body.code).toBe("INVALID_ADDRESS");
    const hex = Buffer.from(wallet.sign(ch.message), "base64").toString("hex");
    expect((await post({ walletAddress: wallet.address, nonce: ch.nonce, signature: hex })).body).toEqual({
      error: "signatures are base64, not hex",
      code: "INVALID_SIGNATURE",
    });
    expect((await post({ walletAddress: wallet.address, nonce: "unknown", signature: wallet.sign(ch.message) })).body.code).toBe(
      "NONCE_NOT_FOUND",
    );
    expect((await post({ walletAddress: wallet.address, nonce: ch.nonce })).body.code).toBe("VALIDATION_ERROR");
    const forged = await post({ walletAddress: wallet.address, nonce: ch.nonce, signature: newWallet().sign(ch.message) });
    expect([forged.status, forged.body.code]).toEqual([401, "INVALID_SIGNATURE"]);
    const replay = await post({ walletAddress: wallet.address, nonce: ch.nonce, signature: wallet.sign(ch.message) });
    expect([replay.status, replay.body.code]).toEqual([401, "NONCE_USED"]);
    const ch2 = await getChallenge(url, wallet);
    const altered = await post({ walletAddress: wallet.address, nonce: ch2.nonce, signature: wallet.sign(ch2.message), message: ch2.message + "!" });
    expect(altered.body).toEqual({ error: "message does not match the challenge", code: "INVALID_SIGNATURE" });
    const stranger = newWallet();
    const ch3 = await getChallenge(url, wallet);
    const foreignNonce = await post({ walletAddress: stranger.address, nonce: ch3.nonce, signature: stranger.sign(ch3.message) });
    expect([foreignNonce.status, foreignNonce.body.code]).toEqual([401, "NONCE_NOT_FOUND"]);
    const big = await post({ walletAddress: wallet.address, nonce: ch3.nonce, signature: "A".repeat(70_000) });
    expect([big.status, big.body.code]).toEqual([413, "PAYLOAD_TOO_LARGE"]);
    // Anyone may ask a challenge for any wallet: a forged signature on a fresh one spends it, and revokes nothing.
    const ch4 = await getChallenge(url, wallet);
    const stranger4 = await post({ walletAddress: wallet.address, nonce: ch4.nonce, signature: stranger.sign(ch4.message) });
    expect([stranger4.status, stranger4.body.code]).toEqual([401, "INVALID_SIGNATURE"]);
    expect((await call(url, "/auth/session", { token: sessionToken })).status).toBe(200);
  });

  test("needs no session token, and a nonce already spent on sign-in cannot be reused", async () => {
    const wallet = newWallet();
    const ch = await getChallenge(url, wallet);
    const body = { walletAddress: wallet.address, nonce: ch.nonce, signature: wallet.sign(ch.message) };
    expect((await call(url, "/auth/verify", { body })).status).toBe(200);
    const res = await call(url, "/auth/revoke-all", { body });
    expect([res.status, res.body.code]).toEqual([401, "NONCE_USED"]);
  });
});

describe("fingerprint link from the real socket", () => {
  test("stored as HMAC of the client's address and User-Agent, never the clear fingerprint", async () => {
    const { createHash, createHmac } = await import("node:crypto");
    const { Database } = await import("bun:sqlite");
    const ua = `fingerprint-test/${crypto.randomUUID()}`;
    await signIn(url, newWallet(), { "user-agent": ua });
    const clear = createHash("sha256").update("127.0.0.1" + ua).digest("hex");
    const key = createHmac("sha256", SECRET).update("walletgate fingerprint link v1").digest();
    const stored = createHmac("sha256", key).update(`127.0.0.1\n${clear}`).digest("hex");
    const db = new Database(`${server.dataDir}/walletgate.db`, { readonly: true });
    const rows = db.query("SELECT fingerprint FROM fingerprint_wallet_links").all() as { fingerprint: string }[];
    db.close();
    expect(rows.map((r) => r.fingerprint)).toContain(stored);
    expect(rows.map((r) => r.fingerprint)).not.toContain(clear);
  });
});

describe("tokens at rest", () => {
  test("a session token is in no column of the database (its jti is) and in no log line", async () => {
    const { sessionToken } = await signIn(url, newWallet(), { "user-agent": `at-rest-test/${crypto.randomUUID()}` });
    const database = `${server.dataDir}/walletgate.db`;
    expect(columnsHolding(database, sessionToken)).toEqual([]);
    expect(columnsHolding(database, sessionToken.split(".")[2]!)).toEqual([]); // not its signature either
    expect(columnsHolding(database, decodeJwt(sessionToken).payload.jti)).toEqual(["auth_tokens.jti", "fingerprint_wallet_links.jti"]);
    expect(server.output()).not.toContain(sessionToken.split(".")[2]!);
  });
});

describe("health, docs, logs", () => {
  test("/healthz and /readyz", async () => {
    expect((await call(url, "/healthz")).body).toEqual({ status: "ok" });
    const ready = await call(url, "/readyz");
    expect(ready.status).toBe(200);
    expect(ready.body.status).toBe("ready");
  });

  test("/openapi.json documents every route group, also those built on first use; /docs serves a page", async () => {
    const spec = (await call(url, "/openapi.json")).body;
    for (const path of [
      "/auth/challenge", "/auth/verify", "/auth/session", "/auth/revoke", "/auth/revoke-all", "/healthz", "/readyz", "/mcp",
      "/public/access/check", "/public/products/{id}", "/pay/{productId}/checkout", "/dashboard/api/me", "/dashboard/api/products",
    ]) {
      expect(Object.keys(spec.paths)).toContain(path);
    }
    // The pages, answered before the routes, are endpoints too.
    for (const path of ["/dashboard", "/pay/{productId}"]) {
      expect(Object.keys(spec.paths[path])).toEqual(["get"]);
      expect(Object.keys(spec.paths[path].get.responses["200"].content)).toEqual(["text/html"]);
      expect((await fetch(url + path.replace("{productId}", "prod_x"))).headers.get("content-type")).toContain("text/html");
    }
    expect(spec.paths["/pay/{productId}"].get.parameters).toMatchObject([{ name: "productId", in: "path", required: true }]);
    // The documented answers include those in a shape of their own (paygate.md: revoke's 404) and a 429's retryAfter.
    for (const path of ["/public/feature/revoke", "/dashboard/api/tokens/revoke"]) {
      expect(spec.paths[path].post.responses["404"].content["application/json"].schema.properties.success).toEqual({ const: false, type: "boolean" });
    }
    expect(spec.paths["/dashboard/api/products"].post.responses["429"].content["application/json"].schema.properties).toHaveProperty("retryAfter");
    // Bodies are JSON with their schema, whichever parser reads them (ours, or the text read first for /public/*).
    for (const [path, field] of [["/dashboard/api/products", "title"], ["/public/access/check", "productId"], ["/auth/verify", "signature"], ["/pay/{productId}/checkout", "walletAddress"]]) {
      const body = spec.paths[path!].post.requestBody;
      expect([path, Object.keys(body.content)]).toEqual([path, ["application/json"]]);
      expect(body.content["application/json"].schema.properties).toHaveProperty(field!);
    }
    // The dashboard's bodies refuse unknown fields, and say so; the others drop them.
    expect(spec.paths["/dashboard/api/products"].post.requestBody.content["application/json"].schema.additionalProperties).toBe(false);
    expect(spec.paths["/public/access/check"].post.requestBody.content["application/json"].schema).not.toHaveProperty("additionalProperties");
    // The errors routes share by their kind are listed: no session (401), a cookie write without Origin (403),
    // a body over the limit (413), a bad path parameter (400).
    const responses = (path: string, method: string) => Object.keys(spec.paths[path][method].responses);
    expect(responses("/dashboard/api/me", "get")).toContain("401");
    expect(responses("/dashboard/api/keys", "post")).toEqual(expect.arrayContaining(["400", "401", "403", "409", "413"]));
    expect(responses("/dashboard/api/products/{id}", "get")).toEqual(expect.arrayContaining(["400", "401", "404"]));
    expect(spec.paths["/dashboard/api/me"].get.responses["401"].description).toStartWith("UNAUTHENTICATED");
    // What each status means follows the catalogue: a checkout's 422 is a refused payment, and a route that
    // reads the chain says it can answer 503.
    expect(spec.paths["/pay/{productId}/submit"].post.responses["422"].description).toContain("PAYMENT_MISMATCH");
    expect(spec.paths["/public/verify/{txHash}"].get.responses["503"].description).toStartWith("CHAIN_UNAVAILABLE");
    expect(Object.keys(spec.paths["/dashboard/api/tokens/revoke"].post.responses)).not.toContain("429"); // nothing limits it
    // Operation ids are unique (OpenAPI); /mcp lists the three methods its transport uses.
    const ids = Object.values(spec.paths as Record<string, Record<string, { operationId: string }>>).flatMap((ops) => Object.values(ops).map((op) => op.operationId));
    expect(ids.filter((id, i) => ids.indexOf(id) !== i)).toEqual([]);
    expect(Object.keys(spec.paths["/mcp"]).sort()).toEqual(["delete", "get", "post"]);
    // Every operation lists an answer (OpenAPI requires one), /metrics and /mcp included.
    for (const [path, operations] of Object.entries(spec.paths as Record<string, Record<string, { responses?: object }>>)) {
      for (const [method, op] of Object.entries(operations)) expect([path, method, Object.keys(op.responses ?? {}).length > 0]).toEqual([path, method, true]);
    }
    expect(Object.keys(spec.paths["/metrics"].get.responses["200"].content)).toEqual(["text/plain; version=0.0.4"]);
    // Statuses a route answers whatever it declares: 503 where it reads the chain or checks readiness,
    // 413 on every route that takes a body, whether it reads one or not.
    expect(spec.paths["/readyz"].get.responses["503"].content["application/json"].schema.properties.status).toEqual({ const: "unavailable", type: "string" });
    expect(responses("/pay/{productId}/checkout", "post")).toContain("503");
    expect(responses("/auth/revoke", "post")).toContain("413");
    // What a 401 means by the kind of route; the headers paygate.md promises.
    expect(spec.paths["/public/products"].get.responses["401"].description).toStartWith("MISSING_API_KEY");
    expect(spec.paths["/auth/verify"].post.responses["401"].description).toStartWith("INVALID_SIGNATURE");
    expect(spec.paths["/dashboard/api/session"].delete.responses["401"].description).toStartWith("UNAUTHENTICATED"); // sign-out: a session's
    expect(responses("/public/products", "get")).toContain("413"); // any request with a declared body over the limit
    expect(Object.keys(spec.paths["/public/products"].get.responses["200"].headers).sort()).toEqual(["X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset"]);
    expect(spec.paths["/public/products"].get.responses["429"].headers).toHaveProperty("Retry-After");
    // The dashboard API takes the pages' cookie as well as a Bearer token; integers are integers.
    expect(spec.paths["/dashboard/api/me"].get.security).toEqual([{ bearer: [] }, { cookie: [] }]);
    expect(spec.components.securitySchemes.cookie).toMatchObject({ type: "apiKey", in: "cookie", name: "wg_session" });
    expect(JSON.stringify(spec)).not.toContain('"format":"integer"');
    expect(spec.paths["/auth/session"].get.responses["200"].content["application/json"].schema.properties.expiresInSeconds).toMatchObject({ type: "integer" });
    const docs = await fetch(url + "/docs");
    expect(docs.status).toBe(200);
    expect(docs.headers.get("content-type")).toContain("text/html");
    // A static page: no script, nothing from elsewhere (it shares the dashboard's origin and cookie), not framed.
    const html = await docs.text();
    expect(html).not.toMatch(/<script|src=|https?:\/\//i);
    const csp = docs.headers.get("content-security-policy")!;
    expect(csp).toStartWith("default-src 'none'; ");
    expect(csp).toContain("frame-ancestors 'none'");
    const style = /<style>([\s\S]*?)<\/style>/.exec(html)![1]!;
    expect(csp).toContain(`style-src 'sha256-${createHash("sha256").update(style).digest("base64")}'`);
    expect(docs.headers.get("x-frame-options")).toBe("DENY");
    for (const [path, operations] of Object.entries(spec.paths as Record<string, Record<string, { summary?: string }>>)) {
      expect(html).toContain(`<span class="path">${path}</span>`);
      for (const op of Object.values(operations)) expect(op.summary).toBeString(); // every endpoint says what it does
    }
  });

  test("/openapi.json is the same whatever the server answered before it was first asked", async () => {
    // Elysia completes a route's schemas when the route first runs; a schema shared by routes must not
    // show that in the document only after some traffic.
    const [quiet, used] = await Promise.all([startTestServer(), startTestServer({ AUTH_RATE_LIMIT: "off" })]);
    try {
      const wallet = newWallet();
      const token = (await signIn(used.url, wallet)).sessionToken;
      await call(used.url, "/auth/verify", { method: "POST", body: { walletAddress: wallet.address, nonce: "n", signature: "AAAA" } });
      await call(used.url, "/auth/session", { token });
      await call(used.url, "/dashboard/api/me");
      await call(used.url, "/dashboard/api/me", { token });
      const product = { title: "Pro", description: "d", type: "access", price: "1.00", accessDays: 30 };
      const created = await call(used.url, "/dashboard/api/products", { method: "POST", body: product, token });
      expect(created.status, JSON.stringify(created.body)).toBe(201);
      const productId = created.body.productId as string;
      const key = (await call(used.url, "/dashboard/api/keys", { method: "POST", body: { label: "s" }, token })).body.key as string;
      const headers = { "x-api-key": key };
      await call(used.url, "/public/access/check", { method: "POST", body: {}, headers });
      const check = await call(used.url, "/public/access/check", { method: "POST", body: { walletAddress: wallet.address, productId }, headers });
      expect(check.status, JSON.stringify(check.body)).toBe(200);
      expect((await call(used.url, `/public/products/${productId}`, { headers })).status).toBe(200);
      const [a, b] = await Promise.all([call(quiet.url, "/openapi.json"), call(used.url, "/openapi.json")]);
      expect(b.body).toEqual(a.body);
    } finally {
      await Promise.all([quiet.dispose(), used.dispose()]);
    }
  });

  test("unknown routes: 404 NOT_FOUND in the error shape, with a request id", async () => {
    const res = await call(url, "/nowhere");
    expect([res.status, res.body]).toEqual([404, { error: "no such route", code: "NOT_FOUND" }]);
    expect(res.headers.get("x-request-id")).toMatch(UUID_V4);
  });

  test("one log line per request with id, method, path, status, ms — and no secrets", async () => {
    const wallet = newWallet();
    const ch = await getChallenge(url, wallet);
    const signature = wallet.sign(ch.message);
    const res = await call(url, "/auth/verify", { body: { walletAddress: wallet.address, nonce: ch.nonce, signature } });
    const session = await call(url, "/auth/session", { token: res.body.sessionToken });
    // Request lines reach the pipe within the log's flush interval (50 ms), later on a busy machine.
    await logged(server, (lines) => lines.some((l) => l.requestId === session.headers.get("x-request-id")));
    const out = server.output();
    expect(out).not.toContain(res.body.sessionToken);
    expect(out).not.toContain(signature);
    expect(out).not.toContain(ch.nonce);
    expect(out).not.toContain(SECRET);
    expect(out).not.toContain("verification worker failed");
    const line = out
      .split("\n")
      .filter((l) => l.includes('"msg":"request"'))
      .map((l) => JSON.parse(l))
      .find((l) => l.requestId === res.headers.get("x-request-id"));
    expect(line).toMatchObject({ method: "POST", path: "/auth/verify", status: 200 });
    expect(typeof line.ms).toBe("number");
  });
});
