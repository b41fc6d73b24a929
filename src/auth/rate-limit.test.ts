// Rate limits: the sliding log in-process, and the three auth limits over HTTP from real sockets.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { AppError } from "../errors.ts";
import { createRateLimiter } from "./rate-limit.ts";
import { connectMcp } from "../../test/helpers/mcp.ts";
import { startTestServer, type TestServer } from "../../test/helpers/server.ts";
import { call, getChallenge, newWallet, type TestWallet } from "../../test/helpers/wallet.ts";

describe("sliding window", () => {
  const limit = { name: "t", max: 3, windowMs: 10_000 };

  test("allows max hits per window, then refuses with retryAfter until the oldest hit leaves", () => {
    const rl = createRateLimiter();
    rl.consume([[limit, "k"]], 0);
    rl.consume([[limit, "k"]], 4_000);
    rl.consume([[limit, "k"]], 5_000);
    let err: AppError | null = null;
    try {
      rl.consume([[limit, "k"]], 6_000);
    } catch (e) {
      err = e as AppError;
    }
    expect(err?.code).toBe("RATE_LIMITED");
    expect(err?.extra.retryAfter).toBe(4); // the hit at 0 leaves at 10 000
    rl.consume([[limit, "k"]], 10_001);
    expect(() => rl.consume([[limit, "other"]], 10_001)).not.toThrow();
  });

  test("a refused attempt counts against no limit", () => {
    const rl = createRateLimiter();
    const big = { name: "big", max: 100, windowMs: 10_000 };
    for (let i = 0; i < 3; i++) rl.consume([[limit, "k"], [big, "net"]], i);
    for (let i = 0; i < 50; i++) expect(() => rl.consume([[limit, "k"], [big, "net"]], 100)).toThrow();
    // only the 3 accepted hits count on the network limit: 97 more fit
    for (let i = 0; i < 97; i++) rl.consume([[big, "net"]], 200);
    expect(() => rl.consume([[big, "net"]], 200)).toThrow();
  });

  test("after the wall clock is stepped back, a refusal lasts at most a window, and the hits are not forgotten", () => {
    const rl = createRateLimiter();
    const limit = { name: "v", max: 5, windowMs: 900_000 };
    const t = 10_000_000;
    for (let i = 0; i < 5; i++) rl.consume([[limit, "k"]], t);
    const back = t - 3_600_000; // an hour back
    let refusal: unknown = null;
    try {
      rl.consume([[limit, "k"]], back);
    } catch (e) {
      refusal = e;
    }
    expect(refusal).toBeInstanceOf(AppError);
    expect((refusal as AppError).extra.retryAfter).toBe(900); // not 4,500: the step is not added
    expect(() => rl.consume([[limit, "k"]], back + 900_000)).not.toThrow();
  });

  test("when several limits are full, retryAfter waits for the one that frees last, whichever comes first in the list", () => {
    // As verification's per-wallet limit (listed first) and per-network one: the wallet's window here frees later.
    const perWallet = { name: "w", max: 1, windowMs: 60_000 };
    const perNetwork = { name: "n", max: 2, windowMs: 10_000 };
    const retryAfterAt = (rl: ReturnType<typeof createRateLimiter>, now: number) => {
      try {
        rl.consume([[perWallet, "k"], [perNetwork, "net"]], now);
      } catch (e) {
        return (e as AppError).extra.retryAfter;
      }
      return null;
    };
    const rl = createRateLimiter();
    rl.consume([[perNetwork, "net"]], 0); // another wallet of the network
    rl.consume([[perWallet, "k"], [perNetwork, "net"]], 1_000);
    expect(retryAfterAt(rl, 2_000)).toBe(59); // not 8: at 10 s the network has room, but this wallet has none until 61 s
    expect(retryAfterAt(rl, 10_000)).toBe(51); // one network slot freed; the wallet's limit still refuses
    expect(retryAfterAt(rl, 61_000)).toBeNull();
  });

  test("retryAfter is at least one second", () => {
    const rl = createRateLimiter();
    const short = { name: "s", max: 1, windowMs: 100 };
    rl.consume([[short, "k"]], 0);
    let refusal: unknown = null;
    try {
      rl.consume([[short, "k"]], 50);
    } catch (e) {
      refusal = e;
    }
    expect(refusal).toBeInstanceOf(AppError); // limited, not let through
    expect((refusal as AppError).extra.retryAfter).toBe(1);
  });

  test("refused requests create no keys, and the number of keys is capped", () => {
    const rl = createRateLimiter({ maxKeys: 100 });
    const tight = { name: "tight", max: 1, windowMs: 10_000 };
    const net = { name: "net", max: 1, windowMs: 10_000 };
    rl.consume([[net, "n"]], 0);
    for (let i = 0; i < 1000; i++) expect(() => rl.consume([[tight, `wallet-${i}`], [net, "n"]], 1)).toThrow();
    expect(rl.size()).toBe(1);
    for (let i = 0; i < 1000; i++) rl.consume([[tight, `k-${i}`]], 2);
    expect(rl.size()).toBe(101); // 100 of "tight", and "net"'s one, kept apart
  });

  test("a flood of one limit's keys cannot push out another limit's counters", () => {
    const rl = createRateLimiter({ maxKeys: 100 });
    const verify = { name: "verify", max: 2, windowMs: 60_000 };
    const challenge = { name: "challenge", max: 10, windowMs: 60_000 };
    rl.consume([[verify, "client|wallet"]], 0);
    rl.consume([[verify, "client|wallet"]], 1);
    expect(() => rl.consume([[verify, "client|wallet"]], 2)).toThrow();
    for (let i = 0; i < 10_000; i++) rl.consume([[challenge, `network-${i}|wallet`]], 3);
    expect(() => rl.consume([[verify, "client|wallet"]], 4)).toThrow(); // still spent
    expect(rl.size()).toBe(101);
  });

  test("purge drops windows whose hits have all left", () => {
    const rl = createRateLimiter();
    rl.consume([[limit, "a"]], 0);
    rl.consume([[limit, "b"]], 9_000);
    expect(rl.purge(10_500)).toBe(1);
    expect(rl.size()).toBe(1);
  });
});

async function attempt(url: string, wallet: TestWallet, headers: Record<string, string> = {}, nonce = "no-such-nonce") {
  return call(url, "/auth/verify", { body: { walletAddress: wallet.address, nonce, signature: wallet.sign("x") }, headers });
}

describe("over HTTP, without TRUST_PROXY", () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer();
  });
  afterAll(() => server.dispose());

  test("5 verification attempts per client and wallet, failures included; the 6th is 429 with Retry-After", async () => {
    const wallet = newWallet();
    for (let i = 0; i < 5; i++) expect((await attempt(server.url, wallet)).body.code).toBe("NONCE_NOT_FOUND");
    const limited = await attempt(server.url, wallet);
    expect(limited.status).toBe(429);
    expect(limited.body.code).toBe("RATE_LIMITED");
    expect(Number.isInteger(limited.body.retryAfter)).toBe(true);
    expect(limited.body.retryAfter).toBeGreaterThanOrEqual(890); // the first attempt leaves in ~15 minutes
    expect(limited.body.retryAfter).toBeLessThanOrEqual(900);
    expect(limited.headers.get("retry-after")).toBe(String(limited.body.retryAfter));
    // even a perfectly good signature is refused now
    const ch = await getChallenge(server.url, wallet);
    const good = await call(server.url, "/auth/verify", { body: { walletAddress: wallet.address, nonce: ch.nonce, signature: wallet.sign(ch.message) } });
    expect(good.status).toBe(429);
    // another wallet from the same client is not affected
    expect((await attempt(server.url, newWallet())).body.code).toBe("NONCE_NOT_FOUND");
  });

  test("a spoofed X-Forwarded-For does not help", async () => {
    const wallet = newWallet();
    for (let i = 0; i < 5; i++) {
      const res = await attempt(server.url, wallet, { "x-forwarded-for": `203.0.113.${i + 1}` });
      expect(res.body.code).toBe("NONCE_NOT_FOUND");
    }
    const res = await attempt(server.url, wallet, { "x-forwarded-for": "198.51.100.77" });
    expect(res.status).toBe(429);
  });

  test("requests refused at steps 1–2 do not count", async () => {
    const wallet = newWallet();
    for (let i = 0; i < 10; i++) {
      const res = await call(server.url, "/auth/verify", { body: { walletAddress: wallet.address, nonce: "n", signature: "abcd" } });
      expect(res.body.code).toBe("INVALID_SIGNATURE");
    }
    for (let i = 0; i < 5; i++) expect((await attempt(server.url, wallet)).body.code).toBe("NONCE_NOT_FOUND");
    expect((await attempt(server.url, wallet)).status).toBe(429);
  });

  test("revoke-all attempts count toward the same limit, and are limited themselves", async () => {
    const wallet = newWallet();
    const revokeAll = () => call(server.url, "/auth/revoke-all", { body: { walletAddress: wallet.address, nonce: "n", signature: wallet.sign("x") } });
    for (let i = 0; i < 4; i++) expect((await revokeAll()).body.code).toBe("NONCE_NOT_FOUND");
    expect((await attempt(server.url, wallet)).body.code).toBe("NONCE_NOT_FOUND"); // the 5th
    const limited = await revokeAll();
    expect([limited.status, limited.body.code]).toEqual([429, "RATE_LIMITED"]);
    expect(limited.headers.get("retry-after")).toBe(String(limited.body.retryAfter));
    expect((await attempt(server.url, wallet)).status).toBe(429);
  });

  test("wallet_connect attempts share the budget with /auth/verify, successes included; the 6th is refused either way", async () => {
    const wallet = newWallet();
    const mcp = await connectMcp(server.url, "rate-limit-test/wallet-connect");
    try {
      const connect = async (signature: (message: string) => string) => {
        const ch = await mcp.ok("session_auth", { walletAddress: wallet.address });
        return mcp.call("wallet_connect", { walletAddress: wallet.address, nonce: ch.nonce, signature: signature(ch.message) });
      };
      const unknownNonce = (w: TestWallet) => mcp.call("wallet_connect", { walletAddress: w.address, nonce: "no-such-nonce", signature: w.sign("x") });
      expect(await connect(wallet.sign)).toMatchObject({ success: true, data: { walletAddress: wallet.address } });
      expect(await connect(() => wallet.sign("x"))).toMatchObject({ success: false, code: "INVALID_SIGNATURE" });
      expect(await unknownNonce(wallet)).toMatchObject({ success: false, code: "NONCE_NOT_FOUND" });
      for (let i = 0; i < 2; i++) expect((await attempt(server.url, wallet)).body.code).toBe("NONCE_NOT_FOUND");

      const limited = await connect(wallet.sign); // a good signature, refused all the same
      expect(limited).toMatchObject({ success: false, code: "RATE_LIMITED" });
      const { retryAfter } = limited;
      expect(Number.isInteger(retryAfter)).toBe(true);
      expect(retryAfter).toBeGreaterThanOrEqual(890);
      expect(retryAfter).toBeLessThanOrEqual(900);
      expect(await unknownNonce(wallet)).toMatchObject({ success: false, code: "RATE_LIMITED" });
      const viaHttp = await attempt(server.url, wallet);
      expect([viaHttp.status, viaHttp.body.code]).toEqual([429, "RATE_LIMITED"]);
      // another wallet from the same client is not affected, by either way in
      const other = newWallet();
      expect(await unknownNonce(other)).toMatchObject({ success: false, code: "NONCE_NOT_FOUND" });
      expect((await attempt(server.url, other)).body.code).toBe("NONCE_NOT_FOUND");
    } finally {
      await mcp.client.close();
    }
  });

  test("10 challenges per minute per client and wallet", async () => {
    const wallet = newWallet();
    for (let i = 0; i < 10; i++) expect((await call(server.url, `/auth/challenge?wallet=${wallet.address}`)).status).toBe(200);
    const limited = await call(server.url, `/auth/challenge?wallet=${wallet.address}`);
    expect([limited.status, limited.body.code]).toEqual([429, "RATE_LIMITED"]);
    expect(limited.body.retryAfter).toBeGreaterThanOrEqual(55);
    expect(limited.body.retryAfter).toBeLessThanOrEqual(60);
    expect(limited.headers.get("retry-after")).toBe(String(limited.body.retryAfter));
    expect((await call(server.url, `/auth/challenge?wallet=${newWallet().address}`)).status).toBe(200);
  });

  test("session_auth shares the challenges' limit with /auth/challenge: the 11th is RATE_LIMITED with retryAfter", async () => {
    const wallet = newWallet();
    const mcp = await connectMcp(server.url, "rate-limit-test/session-auth");
    try {
      for (let i = 0; i < 5; i++) expect((await call(server.url, `/auth/challenge?wallet=${wallet.address}`)).status).toBe(200);
      for (let i = 0; i < 5; i++) expect(await mcp.call("session_auth", { walletAddress: wallet.address })).toMatchObject({ success: true });
      const limited = await mcp.call("session_auth", { walletAddress: wallet.address });
      expect(limited).toMatchObject({ success: false, code: "RATE_LIMITED", error: expect.any(String) });
      expect(limited.retryAfter).toBeGreaterThanOrEqual(55);
      expect(limited.retryAfter).toBeLessThanOrEqual(60);
      expect((await call(server.url, `/auth/challenge?wallet=${wallet.address}`)).status).toBe(429);
      expect(await mcp.call("session_auth", { walletAddress: newWallet().address })).toMatchObject({ success: true });
    } finally {
      await mcp.client.close();
    }
  });
});

describe("over HTTP, behind proxies trusted by CIDR", () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer({ TRUST_PROXY: "127.0.0.0/8, 10.0.0.0/8" });
  });
  afterAll(() => server.dispose());

  test("walks left past trusted proxies to the first untrusted address", async () => {
    const wallet = newWallet();
    for (let i = 0; i < 5; i++) await attempt(server.url, wallet, { "x-forwarded-for": `198.51.100.${i}, 203.0.113.50, 10.1.2.3` });
    expect((await attempt(server.url, wallet, { "x-forwarded-for": "203.0.113.50" })).status).toBe(429);
    expect((await attempt(server.url, wallet, { "x-forwarded-for": "203.0.113.51, 10.9.9.9" })).body.code).toBe("NONCE_NOT_FOUND");
  });

  test("a trusted proxy written IPv4-mapped by a dual-stack hop is walked past too: its clients keep their own windows", async () => {
    const wallet = newWallet();
    for (let i = 1; i <= 6; i++) {
      const res = await attempt(server.url, wallet, { "x-forwarded-for": `198.51.100.${100 + i}, ::ffff:10.0.0.5` });
      expect([i, res.body.code]).toEqual([i, "NONCE_NOT_FOUND"]); // six clients, not one (that would be refused at the sixth)
    }
  });
});

describe("over HTTP, behind a trusted proxy", () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer({ TRUST_PROXY: "1" });
  });
  afterAll(() => server.dispose());

  test("the client address comes from X-Forwarded-For, read from the right", async () => {
    const wallet = newWallet();
    for (let i = 0; i < 5; i++) await attempt(server.url, wallet, { "x-forwarded-for": "203.0.113.9" });
    expect((await attempt(server.url, wallet, { "x-forwarded-for": "203.0.113.9" })).status).toBe(429);
    // a different client behind the same proxy has its own window
    expect((await attempt(server.url, wallet, { "x-forwarded-for": "203.0.113.10" })).body.code).toBe("NONCE_NOT_FOUND");
    // a forged left-most entry does not move the client: the proxy appended the real one on the right
    expect((await attempt(server.url, wallet, { "x-forwarded-for": "1.1.1.1, 203.0.113.9" })).status).toBe(429);
  });

  test("50 attempts per network, IPv6 grouped by /64", async () => {
    for (let i = 0; i < 50; i++) {
      const res = await attempt(server.url, newWallet(), { "x-forwarded-for": `2001:db8:7:7:${(i + 1).toString(16)}::1` });
      expect(res.body.code).toBe("NONCE_NOT_FOUND");
    }
    const sameNet = await attempt(server.url, newWallet(), { "x-forwarded-for": "2001:db8:7:7:ffff::2" });
    expect([sameNet.status, sameNet.body.code]).toEqual([429, "RATE_LIMITED"]);
    const otherNet = await attempt(server.url, newWallet(), { "x-forwarded-for": "2001:db8:7:8::1" });
    expect(otherNet.body.code).toBe("NONCE_NOT_FOUND");
  });
});

test("a limiter made with enabled: false (AUTH_RATE_LIMIT=off) counts and refuses nothing", () => {
  const rl = createRateLimiter({ enabled: false });
  const limit = { name: "t", max: 1, windowMs: 60_000 };
  for (let i = 0; i < 5; i++) rl.consume([[limit, "k"]], 1_000);
  expect(rl.purge(1_000)).toBe(0);
});
