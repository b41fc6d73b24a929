// Restarts and crashes: no acknowledged token, revocation or spent nonce is lost; secrets persist; rotation.
import { afterEach, describe, expect, test } from "bun:test";
import { chmodSync, copyFileSync, existsSync, readdirSync, readFileSync, rmSync, statSync } from "node:fs";
import { join } from "node:path";
import { SignJWT } from "jose";
import { Database } from "bun:sqlite";
import { commandSucceeds, runCli, startTestServer, tempDir, type TestServer } from "./helpers/server.ts";
import { openedByAnother, restoreDatabase } from "../src/db/restore.ts";
import { call, decodeJwt, getChallenge, newWallet, signIn, type Json } from "./helpers/wallet.ts";
import { until } from "./helpers/until.ts";
import { connectMcp } from "./helpers/mcp.ts";

const servers: TestServer[] = [];
afterEach(async () => {
  for (const s of servers.splice(0)) await s.dispose();
});
async function start(env: Record<string, string> = {}) {
  // A fixed public URL: PORT=0 binds a new port on every start, and the token issuer is BASE_URL.
  const s = await startTestServer({ AUTH_RATE_LIMIT: "off", BASE_URL: "http://walletgate.test", ...env });
  servers.push(s);
  return s;
}
/**
 * Makes `request`, kills the server (-9) the moment `rowSql` (with `arg`) finds its row on disk (seen by another
 * connection), before its answer goes out, and restarts it. `answer` is what the cut call got: null, unless the
 * machine was so busy that the answer slipped out before the kill (the retry must then name what it named).
 */
async function killOnceWritten<T>(server: TestServer, rowSql: string, arg: string, request: () => Promise<T>): Promise<{ after: TestServer; answer: T | null }> {
  const lost = request().catch(() => null);
  const db = new Database(join(server.dataDir, "walletgate.db"), { readonly: true });
  try {
    await until(() => db.query(rowSql).get(arg) !== null, 20_000, 1);
  } finally {
    db.close();
  }
  await server.kill9();
  const answer = await lost;
  const after = await server.restart();
  servers.push(after);
  return { after, answer };
}
const status = async (url: string, token: string) => (await call(url, "/auth/session", { token })).body.code ?? "OK";

describe("restarts", () => {
  test("a graceful restart (SIGTERM, exit 0) keeps tokens, revocations, cutoffs and spent nonces", async () => {
    const first = await start();
    const wallet = newWallet();
    const kept = await signIn(first.url, wallet);
    const revoked = await signIn(first.url, wallet);
    await call(first.url, "/auth/revoke", { method: "POST", token: revoked.sessionToken });
    const other = newWallet();
    const cut = await signIn(first.url, other);
    const ch = await getChallenge(first.url, other);
    await Bun.sleep(1000);
    await call(first.url, "/auth/revoke-all", { body: { walletAddress: other.address, nonce: ch.nonce, signature: other.sign(ch.message) } });
    const spent = await getChallenge(first.url, wallet);
    const spentBody = { walletAddress: wallet.address, nonce: spent.nonce, signature: wallet.sign(spent.message) };
    expect((await call(first.url, "/auth/verify", { body: spentBody })).status).toBe(200);

    const code = await first.stop();
    expect(code).toBe(0);
    expect(first.output()).toContain('"msg":"stopped"');
    const second = await first.restart();
    servers.push(second);
    expect(await status(second.url, kept.sessionToken)).toBe("OK");
    expect(await status(second.url, revoked.sessionToken)).toBe("TOKEN_REVOKED");
    expect(await status(second.url, cut.sessionToken)).toBe("TOKEN_REVOKED");
    const replay = await call(second.url, "/auth/verify", { body: spentBody });
    expect(replay.body.code).toBe("NONCE_USED");
  });

  test("kill -9 right after a burst loses no acknowledged sign-in or revocation", async () => {
    const server = await start();
    const wallets = Array.from({ length: 40 }, () => newWallet());
    const sessions = await Promise.all(wallets.map((w) => signIn(server.url, w)));
    const toRevoke = sessions.slice(0, 15);
    const revokes = await Promise.all(toRevoke.map((s) => call(server.url, "/auth/revoke", { method: "POST", token: s.sessionToken })));
    for (const r of revokes) expect(r.status).toBe(200);
    await server.kill9(); // no shutdown, no checkpoint: only what was committed survives
    const after = await server.restart();
    servers.push(after);
    for (const s of toRevoke) expect(await status(after.url, s.sessionToken)).toBe("TOKEN_REVOKED");
    for (const s of sessions.slice(15)) expect(await status(after.url, s.sessionToken)).toBe("OK");
  });

  test("kill -9 once checkout_pay's purchase is written, before its answer: the retry with its idempotencyKey answers that purchase", async () => {
    const server = await start();
    const owner = (await signIn(server.url, newWallet())).sessionToken;
    const product = await call(server.url, "/dashboard/api/products", { token: owner, body: { title: "Pass", description: "", type: "access", price: "2" } });
    const agent = await call(server.url, "/mcp", { body: { tool: "wallet_create", params: { airdropSol: 1, airdropUsdc: 10 } } });
    const token = agent.body.data.sessionToken as string;
    const wallet = agent.body.data.address as string;
    const pay = (url: string) => call(url, "/mcp", { body: { tool: "checkout_pay", params: { productId: product.body.productId, idempotencyKey: "intent-1" } }, token });
    // Its answer is lost: killed the moment the purchase is on disk, before the answer goes out.
    const { after, answer } = await killOnceWritten(server, "SELECT 1 FROM purchases WHERE wallet = ?", wallet, () => pay(server.url));
    const answered = (answer?.body.data?.purchaseId as string | undefined) ?? null;
    const retried = await pay(after.url);
    const purchaseId = retried.body.data?.purchaseId as string; // read before a matcher stands in for it (bun:test)
    expect(retried.body).toMatchObject({ success: true, data: { status: "completed" } });
    expect(purchaseId).toMatch(/^pur_/);
    if (answered !== null) expect(purchaseId).toBe(answered);
    expect((await pay(after.url)).body.data.purchaseId).toBe(purchaseId);
    const balance = await call(after.url, "/mcp", { body: { tool: "wallet_get_balance", params: {} }, token });
    expect(balance.body.data.balances.usdc).toBe(8); // paid once
  }, 60_000);

  test("kill -9 once wallet_transfer's transaction is recorded: the retry with its idempotencyKey sends it at most once", async () => {
    const server = await start();
    const agent = await call(server.url, "/mcp", { body: { tool: "wallet_create", params: { airdropSol: 1, airdropUsdc: 10 } } });
    const token = agent.body.data.sessionToken as string;
    const wallet = agent.body.data.address as string;
    const to = newWallet().address;
    const send = (url: string, params: Json = {}) =>
      call(url, "/mcp", { body: { tool: "wallet_transfer", params: { to, amount: "2.5", token: "usdc", idempotencyKey: "pay-to-1", ...params } }, token });
    // Killed the moment the key's transaction is on disk (it may or may not have been sent yet).
    const { after, answer } = await killOnceWritten(server, "SELECT 1 FROM transfer_keys WHERE wallet = ?", wallet, () => send(server.url));
    const answered = (answer?.body.data?.signature as string | undefined) ?? null;
    const retried = await send(after.url);
    const signature = retried.body.data?.signature as string; // read before a matcher stands in for it (bun:test)
    expect(retried.body).toMatchObject({ success: true, data: { status: "confirmed", amount: "2.5", token: "usdc", to } });
    if (answered !== null) expect(signature).toBe(answered);
    expect((await send(after.url)).body.data.signature).toBe(signature);
    // Another amount under the key is refused, and nothing is sent.
    expect((await send(after.url, { amount: "3" })).body).toMatchObject({ success: false, code: "VALIDATION_ERROR" });
    const balance = await call(after.url, "/mcp", { body: { tool: "wallet_get_balance", params: {} }, token });
    expect(balance.body.data.balances.usdc).toBe(7.5); // sent once
    const history = await call(after.url, "/mcp", { body: { tool: "wallet_get_history", params: {} }, token });
    expect((history.body.data.transactions as { direction: string; signature: string }[]).filter((t) => t.direction === "out").map((t) => t.signature)).toEqual([signature]);
  }, 60_000);

  test("a marketplace order whose deadline passed while the server was down is refunded within seconds of the start, not a timer period", async () => {
    const server = await start({ ALLOW_PRIVATE_NETWORK_TARGETS: "true" });
    const tool = async (tool: string, params: Json, token?: string) => {
      const res = await call(server.url, "/mcp", { body: { tool, params }, ...(token === undefined ? {} : { token }) });
      expect(res.body.success, JSON.stringify(res.body)).toBe(true);
      return res.body.data;
    };
    const provider = (await tool("wallet_create", { airdropSol: 1 })).sessionToken as string;
    const agent = await tool("provider_register", { endpoint: "http://127.0.0.1:9/agent", profile: { name: "Late", basePrice: "1" }, services: [] }, provider);
    const consumer = await tool("wallet_create", { airdropSol: 1, airdropUsdc: 10 });
    const started = await tool("consumer_start_conversation", { agentId: agent.agent.agentId, message: "hi" }, consumer.sessionToken);
    const conversationId = started.conversation.conversationId as string;
    const { order } = await tool("provider_create_order", { conversationId, description: "x", price: "4", deliveryTime: 60 }, provider);
    await tool("consumer_accept_order", { orderId: order.orderId, conversationId, paymentMethod: "usdc" }, consumer.sessionToken);
    expect(await server.stop()).toBe(0);
    // The deadline passed while it was stopped.
    const db = new Database(join(server.dataDir, "walletgate.db"));
    try {
      db.query("UPDATE market_orders SET deadline = ?, due_at = ? WHERE id = ?").run(Date.now() - 1000, Date.now() - 1000, order.orderId);
    } finally {
      db.close();
    }
    const after = await server.restart();
    servers.push(after);
    const began = Date.now();
    const statusOf = async () => {
      const res = await call(after.url, "/mcp", { body: { tool: "consumer_list_orders", params: {} }, token: consumer.sessionToken });
      return (res.body.data.orders as { orderId: string; status: string }[]).find((o) => o.orderId === order.orderId)!.status;
    };
    await until(async () => ((await statusOf()) === "paid" ? undefined : true), 15_000, 100);
    expect(Date.now() - began).toBeLessThan(15_000); // the timers' period is 30 s
    expect(await statusOf()).toBe("expired"); // a missed deadline: refunded in full
    const balance = await call(after.url, "/mcp", { body: { tool: "wallet_get_balance", params: {} }, token: consumer.sessionToken });
    expect(balance.body.data.balances.usdc).toBe(10);
  }, 60_000);

  test("kill -9 right after a revoke-all loses neither the revocations nor the wallet's cutoff", async () => {
    const secret = "durability-secret-0123456789-0123456789";
    const server = await start({ JWT_SECRET: secret });
    const wallet = newWallet();
    const tokens = [await signIn(server.url, wallet), await signIn(server.url, wallet)].map((s) => s.sessionToken);
    // Signed as the server signs, issued before the cutoff, but never listed: only the cutoff kills it.
    const { header, payload } = decodeJwt(tokens[0]!);
    const unlisted = await new SignJWT({ ...payload, jti: crypto.randomUUID(), iat: payload.iat - 10 })
      .setProtectedHeader({ alg: "HS256", typ: "JWT", kid: header.kid })
      .sign(new TextEncoder().encode(secret));
    expect(await status(server.url, unlisted)).toBe("TOKEN_INVALID");
    const ch = await getChallenge(server.url, wallet);
    const res = await call(server.url, "/auth/revoke-all", { body: { walletAddress: wallet.address, nonce: ch.nonce, signature: wallet.sign(ch.message) } });
    expect([res.status, res.body]).toEqual([200, { revoked: 2, walletAddress: wallet.address }]);
    await server.kill9();
    const after = await server.restart();
    servers.push(after);
    for (const token of [...tokens, unlisted]) expect(await status(after.url, token)).toBe("TOKEN_REVOKED");
    const fresh = await signIn(after.url, wallet);
    expect(await status(after.url, fresh.sessionToken)).toBe("OK");
    // The two rows stayed revoked (not only cut off): a second revoke-all finds just the new token.
    const ch2 = await getChallenge(after.url, wallet);
    const again = await call(after.url, "/auth/revoke-all", { body: { walletAddress: wallet.address, nonce: ch2.nonce, signature: wallet.sign(ch2.message) } });
    expect([again.status, again.body]).toEqual([200, { revoked: 1, walletAddress: wallet.address }]);
  });

  test("kill -9 in the middle of a burst: every answered sign-in survives", async () => {
    const server = await start();
    const wallets = Array.from({ length: 60 }, () => newWallet());
    const challenges = await Promise.all(wallets.map((w) => getChallenge(server.url, w)));
    const acknowledged: string[] = [];
    const inFlight = wallets.map((w, i) =>
      call(server.url, "/auth/verify", {
        body: { walletAddress: w.address, nonce: challenges[i]!.nonce, signature: w.sign(challenges[i]!.message) },
      })
        .then((r) => {
          if (r.status === 200) acknowledged.push(r.body.sessionToken);
        })
        .catch(() => undefined),
    );
    const deadline = Date.now() + 10_000;
    while (acknowledged.length < 10 && Date.now() < deadline) await Bun.sleep(1);
    await server.kill9(); // some answered, the rest still in flight
    await Promise.all(inFlight);
    expect(acknowledged.length).toBeGreaterThanOrEqual(10);
    const after = await server.restart();
    servers.push(after);
    for (const token of acknowledged) expect(await status(after.url, token)).toBe("OK");
  });
});

describe("secrets", () => {
  test("generated JWT and wallet keys are written once with mode 0600 and reused", async () => {
    const server = await start({ JWT_SECRET: "" });
    for (const name of ["jwt-secret", "wallet-encryption-key"]) {
      expect(statSync(join(server.dataDir, name)).mode & 0o777).toBe(0o600);
    }
    const session = await signIn(server.url, newWallet());
    const again = await server.restart();
    servers.push(again);
    expect(await status(again.url, session.sessionToken)).toBe("OK");
  });

  // What a power cut can undo is only what was never flushed: watched with strace, the real system
  // calls of a first start (a CLI command, which resolves the secrets as `serve` does).
  const strace = Bun.which("strace");
  if (strace === null) {
    if (process.env.CI) throw new Error("strace is missing: .ci/run installs it");
    console.warn("strace is not installed: the test of what a first start flushes is skipped (apt-get install strace)");
  }
  test.skipIf(strace === null)("a generated secret is flushed before it is linked into place, and so are the directory entries", async () => {
    const root = tempDir();
    try {
      const dataDir = join(root, "new", "data");
      const trace = join(root, "strace.log");
      // `mcp` (tools over stdio, on a DATA_DIR of its own when it has none) with stdin closed: it sets up
      // DATA_DIR, then ends. (Commands for a server's DATA_DIR refuse one without a database.)
      const proc = Bun.spawn(["strace", "-f", "-e", "trace=openat,close,fsync,fdatasync,link,linkat", "-o", trace, process.execPath, "src/main.ts", "mcp"], {
        cwd: join(import.meta.dir, ".."),
        env: { PATH: process.env.PATH ?? "", HOME: process.env.HOME ?? "/tmp", DATA_DIR: dataDir, LOG_LEVEL: "silent" },
        stdin: "ignore",
        stdout: "pipe",
        stderr: "pipe",
      });
      expect(await proc.exited).toBe(0);
      // One line per call, in order: "<pid> openat(AT_FDCWD, \"<path>\", ...) = <fd>", "<pid> fsync(<fd>) = 0", ...
      const calls = readFileSync(trace, "utf8").split("\n");
      const openedAt = (path: string) => calls.flatMap((l, i) => (l.includes(`openat(AT_FDCWD, "${path}"`) && / = \d+$/.test(l) ? [{ i, fd: l.match(/ = (\d+)$/)![1]! }] : []));
      // fd was opened on `path` at line i: flushed before that descriptor was closed (numbers are reused)
      const flushedBeforeClose = (i: number, fd: string) => {
        const closed = calls.findIndex((l, j) => j > i && l.includes(`close(${fd})`));
        return calls.slice(i, closed === -1 ? undefined : closed).some((l) => l.includes(`fsync(${fd})`));
      };
      const fsyncedAfter = (path: string, from: number) => openedAt(path).some(({ i, fd }) => i >= from && flushedBeforeClose(i, fd));
      for (const name of ["jwt-secret", "wallet-encryption-key"]) {
        const secret = join(dataDir, name);
        const linked = calls.findIndex((l) => /link(at)?\(/.test(l) && l.includes(`"${secret}"`));
        expect(linked).toBeGreaterThan(0);
        const temp = calls[linked]!.match(/"([^"]+)"/)![1]!; // link(old, new) or linkat(dirfd, old, dirfd, new, flags)
        // the temp file's data before the link, DATA_DIR's entries after it
        expect(openedAt(temp).some(({ i, fd }) => i < linked && flushedBeforeClose(i, fd))).toBe(true);
        expect(fsyncedAfter(dataDir, linked)).toBe(true);
      }
      // The two directories made for DATA_DIR are entries of their parents: both flushed.
      expect(fsyncedAfter(root, 0)).toBe(true);
      expect(fsyncedAfter(join(root, "new"), 0)).toBe(true);
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  });

  test.skipIf(strace === null)("an idle server flushes nothing: background work that finds nothing to do commits no change", async () => {
    const root = tempDir();
    let server: TestServer | null = null;
    // strace 6.1 cannot kill what it traces when it is killed: the server is stopped first, then strace ends.
    const stopTraced = async (s: TestServer) => {
      const traced = Number(readFileSync(`/proc/${s.pid}/task/${s.pid}/children`, "utf8").trim().split(" ")[0]);
      if (traced > 0) process.kill(traced, "SIGTERM");
      return s.stop();
    };
    try {
      const trace = join(root, "strace.log");
      // The purge every half second: each of its steps is a write, which finds nothing to delete here.
      server = await startTestServer({ PURGE_INTERVAL_MS: "500" }, undefined, ["strace", "-f", "-e", "trace=fsync,fdatasync", "-o", trace]);
      servers.push(server);
      const flushes = () => readFileSync(trace, "utf8").split("\n").filter((l) => /\b(fsync|fdatasync)\(/.test(l)).length;
      await Bun.sleep(1_500); // start-up's own writes (the first purge)
      const before = flushes();
      // Past a dozen purges, the webhook worker's polls (every second) and the checkout watcher's first round (5 s).
      await Bun.sleep(6_000);
      expect(flushes()).toBe(before);
      await signIn(server.url, newWallet()); // a write: flushed (the trace sees flushes)
      expect(flushes()).toBeGreaterThan(before);
      expect(await stopTraced(server)).toBe(0);
      server = null;
    } finally {
      if (server !== null) await stopTraced(server).catch(() => undefined);
      rmSync(root, { recursive: true, force: true });
    }
  }, 30_000);

  test("rotation: JWT_SECRET_PREVIOUS keeps old tokens valid by kid; dropping it ends them", async () => {
    const oldSecret = "old-secret-old-secret-old-secret-0001";
    const newSecret = "new-secret-new-secret-new-secret-0002";
    const first = await start({ JWT_SECRET: oldSecret });
    const session = await signIn(first.url, newWallet());
    const oldKid = decodeJwt(session.sessionToken).header.kid;

    const rotated = await first.restart({ JWT_SECRET: newSecret, JWT_SECRET_PREVIOUS: oldSecret });
    servers.push(rotated);
    expect(await status(rotated.url, session.sessionToken)).toBe("OK");
    const fresh = await signIn(rotated.url, newWallet());
    expect(decodeJwt(fresh.sessionToken).header.kid).not.toBe(oldKid);

    const retired = await rotated.restart({ JWT_SECRET: newSecret, JWT_SECRET_PREVIOUS: "" });
    servers.push(retired);
    expect(await status(retired.url, session.sessionToken)).toBe("TOKEN_INVALID");
    expect(await status(retired.url, fresh.sessionToken)).toBe("OK");
  });
});

describe("expiry with short lifetimes from config", () => {
  test("a challenge older than CHALLENGE_TTL_MS: CHALLENGE_EXPIRED", async () => {
    const server = await start({ CHALLENGE_TTL_MS: "300" });
    const wallet = newWallet();
    const ch = await getChallenge(server.url, wallet);
    await Bun.sleep(400);
    const res = await call(server.url, "/auth/verify", { body: { walletAddress: wallet.address, nonce: ch.nonce, signature: wallet.sign(ch.message) } });
    expect([res.status, res.body.code]).toEqual([401, "CHALLENGE_EXPIRED"]);
    const ch2 = await getChallenge(server.url, wallet);
    await Bun.sleep(400);
    const revokeAll = await call(server.url, "/auth/revoke-all", {
      body: { walletAddress: wallet.address, nonce: ch2.nonce, signature: wallet.sign(ch2.message) },
    });
    expect([revokeAll.status, revokeAll.body.code]).toEqual([401, "CHALLENGE_EXPIRED"]);
    // wallet_connect checks as /auth/verify does (the plain JSON envelope answers with the table's status).
    const ch3 = await getChallenge(server.url, wallet);
    await Bun.sleep(400);
    const connect = await call(server.url, "/mcp", {
      body: { tool: "wallet_connect", params: { walletAddress: wallet.address, nonce: ch3.nonce, signature: wallet.sign(ch3.message) } },
    });
    expect([connect.status, connect.body.success, connect.body.code]).toEqual([401, false, "CHALLENGE_EXPIRED"]);
  });

  test("a token past SESSION_TTL_S: TOKEN_EXPIRED; refreshRecommended near the end", async () => {
    const server = await start({ SESSION_TTL_S: "5", REFRESH_THRESHOLD_S: "3600" });
    const { sessionToken } = await signIn(server.url, newWallet());
    const live = await call(server.url, "/auth/session", { token: sessionToken });
    expect(live.body.refreshRecommended).toBe(true);
    await Bun.sleep(decodeJwt(sessionToken).payload.exp * 1000 + 100 - Date.now()); // past its exp, however long the sign-in took
    const res = await call(server.url, "/auth/session", { token: sessionToken });
    expect([res.status, res.body.code]).toEqual([401, "TOKEN_EXPIRED"]);
  }, 60_000);

  test("the purge timer deletes expired challenges", async () => {
    const server = await start({ CHALLENGE_TTL_MS: "100", PURGE_INTERVAL_MS: "100" });
    const wallet = newWallet();
    const ch = await getChallenge(server.url, wallet);
    const verify = () => call(server.url, "/auth/verify", { body: { walletAddress: wallet.address, nonce: ch.nonce, signature: wallet.sign(ch.message) } });
    // Expired at once (an expired challenge is refused before it is spent, so asking again changes nothing),
    // then purged by a later round of the timer: not merely expired.
    expect((await until(async () => ((await verify()).body.code === "NONCE_NOT_FOUND" ? "purged" : undefined), 10_000))).toBe("purged");
  });
});

describe("graceful shutdown", () => {
  test.each(["SIGTERM", "SIGINT"] as const)("%s lets a request in flight finish before the process exits", async (signal) => {
    const server = await start();
    const wallet = newWallet();
    const ch = await getChallenge(server.url, wallet);
    const body = JSON.stringify({ walletAddress: wallet.address, nonce: ch.nonce, signature: wallet.sign(ch.message) });
    const half = Math.floor(body.length / 2);
    const port = Number(new URL(server.url).port);
    // A socket of its own, so that the test knows the request's connection: its headers and half its body are
    // sent, and the signal comes once the server has read them (the request is then in flight).
    let answer = "";
    const socket = await Bun.connect({ hostname: "127.0.0.1", port, socket: { data: (_s, chunk) => void (answer += chunk.toString()) } });
    try {
      const head = `POST /auth/verify HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n`;
      expect(socket.write(head + body.slice(0, half))).toBe(Buffer.byteLength(head + body.slice(0, half)));
      await readByServer(port, socket.localPort);
      const exited = server.stop(signal);
      await Bun.sleep(100);
      socket.write(body.slice(half));
      await until(() => (/^HTTP\/1\.1 \d{3}/.test(answer) ? true : undefined), 10_000, 5);
      expect(answer).toStartWith("HTTP/1.1 200");
      expect(await exited).toBe(0);
    } finally {
      socket.end();
    }
  });
});

/**
 * Until the server has read all that was sent on the connection from `clientPort` to `serverPort`: on Linux,
 * the client's side has nothing unacknowledged and the server's side an empty receive queue (/proc/net/tcp,
 * or tcp6); elsewhere, or when the kernel lists no such connection, a pause.
 */
async function readByServer(serverPort: number, clientPort: number): Promise<void> {
  const tables = ["/proc/net/tcp", "/proc/net/tcp6"].filter((t) => existsSync(t));
  const hex = (p: number) => `:${p.toString(16).toUpperCase().padStart(4, "0")}`;
  const queues = (local: number, remote: number) => {
    for (const table of tables) {
      for (const line of readFileSync(table, "utf8").split("\n")) {
        const f = line.trim().split(/\s+/); // sl, local, remote, state, tx_queue:rx_queue, …
        if (f[1]?.endsWith(hex(local)) && f[2]?.endsWith(hex(remote)) && f[3] === "01") return f[4]!.split(":").map((q) => parseInt(q, 16));
      }
    }
    return null;
  };
  if (queues(clientPort, serverPort) === null || queues(serverPort, clientPort) === null) return Bun.sleep(500);
  await until(() => queues(clientPort, serverPort)?.[0] === 0 && queues(serverPort, clientPort)?.[1] === 0, 10_000, 5);
}

describe("walletgate restore", () => {
  test("after a kill -9 (a log left beside the database): the backup comes back whole, the old database and its log kept aside", async () => {
    const server = await start();
    const dir = tempDir();
    try {
      const before = await Promise.all(Array.from({ length: 5 }, () => signIn(server.url, newWallet())));
      const backup = join(dir, "before.db");
      expect((await runCli(["backup", backup], { DATA_DIR: server.dataDir })).code).toBe(0);
      const after = await Promise.all(Array.from({ length: 200 }, () => signIn(server.url, newWallet()))); // into the log only
      // While the server has the database open, restoring is refused and nothing moves.
      const refused = await runCli(["restore", backup], { DATA_DIR: server.dataDir });
      expect({ code: refused.code, why: refused.stderr.includes("stop the server first") }).toEqual({ code: 1, why: true });
      await server.kill9();
      expect(statSync(join(server.dataDir, "walletgate.db-wal")).size).toBeGreaterThan(0);
      // Not a database, or no file: refused, nothing moved.
      const junk = join(dir, "junk.db");
      await Bun.write(junk, "not a database at all, just text that is long enough to be read as a header".repeat(20));
      for (const file of [junk, join(dir, "missing.db")]) expect((await runCli(["restore", file], { DATA_DIR: server.dataDir })).code).toBe(1);
      const out = await runCli(["restore", backup, "--json"], { DATA_DIR: server.dataDir });
      expect(out.code).toBe(0);
      // Each long step is said before it runs, on stderr (operations.md: long work shows progress).
      const steps = out.stderr.split("\n").filter((line) => line.endsWith(" …"));
      expect(steps).toEqual([`checking ${backup} …`, `copying ${backup} into ${server.dataDir} …`, "copying the database it replaces aside …", expect.stringMatching(/^carrying over revocations /)]);
      const result = JSON.parse(out.stdout) as { restored: string; schemaVersion: number; movedAside: string };
      expect(result).toMatchObject({ restored: join(server.dataDir, "walletgate.db"), schemaVersion: expect.any(Number) });
      // The replaced database with its log is still a pair SQLite opens: nothing lost by restoring.
      const aside = new Database(result.movedAside, { readonly: true });
      expect(aside.query("PRAGMA quick_check").get()).toEqual({ quick_check: "ok" });
      aside.close();
      const restarted = await startTestServer({ AUTH_RATE_LIMIT: "off", BASE_URL: "http://walletgate.test" }, server.dataDir);
      servers.push(restarted);
      expect((await call(restarted.url, "/readyz")).status).toBe(200);
      for (const s of before) expect(await status(restarted.url, s.sessionToken)).toBe("OK");
      for (const s of after.slice(0, 5)) expect(await status(restarted.url, s.sessionToken)).toBe("TOKEN_INVALID"); // signed in after the backup
      expect((await signIn(restarted.url, newWallet())).sessionToken).toEqual(expect.any(String)); // and it writes
      const db = new Database(join(server.dataDir, "walletgate.db"), { readonly: true });
      expect(db.query("PRAGMA integrity_check").get()).toEqual({ integrity_check: "ok" });
      db.close();
      // A new host: DATA_DIR does not exist yet (the secrets come from the environment). The backup was
      // copied there readable by all, as cp and scp often leave a file: the database is its owner's only.
      chmodSync(backup, 0o644);
      const fresh = join(dir, "new-host", "data");
      expect((await runCli(["restore", backup, "--json"], { DATA_DIR: fresh })).code).toBe(0);
      expect(statSync(fresh).mode & 0o777).toBe(0o700);
      expect(statSync(join(fresh, "walletgate.db")).size).toBe(statSync(backup).size);
      expect(statSync(join(fresh, "walletgate.db")).mode & 0o777).toBe(0o600);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 60_000);

  test("revocations made after the backup survive the restore (session tokens, revoke-all, API keys, feature tokens, MCP sessions ended, webhook endpoints disabled, moved and deleted, an agent's endpoint moved), and custodial wallets made since keep their keys", async () => {
    const server = await start();
    const dir = tempDir();
    try {
      const owner = await signIn(server.url, newWallet());
      const dash = (path: string, init: { method?: string; body?: unknown } = {}) => call(server.url, `/dashboard/api${path}`, { ...init, token: owner.sessionToken });
      const keys = [(await dash("/keys", { body: { label: "revoked later" } })).body, (await dash("/keys", { body: { label: "kept" } })).body];
      const product = await dash("/products", { body: { title: "Export", description: "", type: "feature_unlock", price: "1", featureIds: ["export"] } });
      const agent = await call(server.url, "/mcp", { body: { tool: "wallet_create", params: { airdropSol: 1, airdropUsdc: 5 } } });
      const paid = await call(server.url, "/mcp", { body: { tool: "checkout_pay", params: { productId: product.body.productId } }, token: agent.body.data.sessionToken });
      const accessToken = paid.body.data.accessToken as string;
      const [a, b, c] = [newWallet(), newWallet(), newWallet()];
      const [revoked, kept, cutOff] = [await signIn(server.url, a), await signIn(server.url, c), await signIn(server.url, b)];
      const hook = (await dash("/webhooks", { body: { url: "https://hooks.example.test/walletgate", events: ["product.created"] } })).body;
      const hookMoved = (await dash("/webhooks", { body: { url: "https://hooks.example.test/old", events: ["feature.unlocked"] } })).body;
      const hookDeleted = (await dash("/webhooks", { body: { url: "https://hooks.example.test/gone", events: ["product.created"] } })).body;
      // MCP sessions bound to custodial wallets (over the SDK): two their clients will end, one kept.
      const mcps = [await connectMcp(server.url, "restore-ended"), await connectMcp(server.url, "restore-ended-too"), await connectMcp(server.url, "restore-kept")];
      const mcpWallets: string[] = [];
      for (const m of mcps) mcpWallets.push((await m.ok("wallet_create", { airdropSol: 1 })).address as string);
      const mcpIds = mcps.map((m) => m.transport.sessionId!);
      // A marketplace agent, whose notifications carry its orders' messages.
      const agentProfile = { name: "Restored", tagline: "", description: "", categories: ["Restore"], basePrice: 1 };
      const agentId = ((await mcps[2]!.ok("provider_register", { endpoint: "https://agent.example.test/old", profile: agentProfile })).agent as Json).agentId as string;
      const replay = newWallet();
      const replayChallenge = await getChallenge(server.url, replay);
      const replayBody = { walletAddress: replay.address, nonce: replayChallenge.nonce, signature: replay.sign(replayChallenge.message) };
      const backup = join(dir, "before.db");
      expect((await runCli(["backup", backup], { DATA_DIR: server.dataDir })).code).toBe(0);
      // After the backup: the challenge spent (its signed body could be replayed on the restored database),
      // the webhook secret rotated (the old one leaked, say).
      expect((await call(server.url, "/auth/verify", { body: replayBody })).status).toBe(200);
      const rotation = await dash(`/webhooks/${hook.endpointId}/rotate-secret`, { method: "POST" });
      expect(rotation.status).toBe(200);
      const rotated = rotation.body.secret as string;
      // After the backup: one token revoked, a revoke-all, one API key and the feature token revoked.
      expect((await call(server.url, "/auth/revoke", { method: "POST", token: revoked.sessionToken })).status).toBe(200);
      const ch = await getChallenge(server.url, b);
      expect((await call(server.url, "/auth/revoke-all", { body: { walletAddress: b.address, nonce: ch.nonce, signature: b.sign(ch.message) } })).body.revoked).toBe(1);
      expect((await dash(`/keys/${keys[0]!.keyId}`, { method: "DELETE" })).status).toBe(200);
      const pub = (path: string, key: string, body: unknown) => call(server.url, `/public${path}`, { body, headers: { "x-api-key": key } });
      expect((await pub("/feature/revoke", keys[1]!.key, { accessToken })).status).toBe(200);
      // After the backup: the agent's endpoint moved (the old one leaked, say) and the agent paused.
      expect(await mcps[2]!.ok("provider_update", { agentId, endpoint: "https://agent.example.test/new", status: "paused" })).toMatchObject({ agent: { status: "paused" } });
      // After the backup: two MCP sessions ended by their clients (DELETE), an endpoint disabled and sent
      // elsewhere (its receiver leaked, say), another deleted.
      for (const m of mcps.slice(0, 2)) await m.transport.terminateSession();
      await Promise.all(mcps.map((m) => m.client.close()));
      expect((await dash(`/webhooks/${hookMoved.endpointId}`, { method: "PATCH", body: { url: "https://hooks.example.test/new", enabled: false } })).status).toBe(200);
      expect((await dash(`/webhooks/${hookDeleted.endpointId}`, { method: "DELETE" })).status).toBe(200);
      // After the backup: a custodial wallet made, whose key exists nowhere else (on devnet and mainnet its money is on chain).
      const late = (await call(server.url, "/mcp", { body: { tool: "wallet_create", params: {} } })).body.data.address as string;
      const exported = await runCli(["wallets", "export", late], { DATA_DIR: server.dataDir });
      expect([exported.code, exported.stdout.trim().length > 0]).toEqual([0, true]);
      await server.stop();
      const out = await runCli(["restore", backup, "--json"], { DATA_DIR: server.dataDir });
      expect(out.code).toBe(0);
      expect(JSON.parse(out.stdout).revocations).toEqual({
        sessionTokens: 2,
        walletCutoffs: 1,
        apiKeys: 1,
        featureTokens: 1,
        spentProofs: 1,
        webhookSecrets: 1,
        mcpSessions: 2,
        webhookEndpoints: 2,
        agentEndpoints: 1,
      });
      expect(out.stderr).toContain("carried over");
      expect(JSON.parse(out.stdout).walletKeys).toEqual({ custodialWallets: 1, escrows: 0, notCarried: [] });
      expect(out.stderr).toContain("custodial wallets made after the backup, their keys carried over: 1");
      const again = await runCli(["wallets", "export", late], { DATA_DIR: server.dataDir });
      expect([again.code, again.stdout]).toEqual([0, exported.stdout]); // the same key
      const after = await server.restart();
      servers.push(after);
      expect(await status(after.url, revoked.sessionToken)).toBe("TOKEN_REVOKED");
      expect(await status(after.url, cutOff.sessionToken)).toBe("TOKEN_REVOKED");
      for (const s of [kept, owner]) expect(await status(after.url, s.sessionToken)).toBe("OK");
      expect((await call(after.url, "/public/products", { headers: { "x-api-key": keys[0]!.key } })).body.code).toBe("INVALID_API_KEY");
      const verified = await call(after.url, "/public/feature/verify", { body: { accessToken }, headers: { "x-api-key": keys[1]!.key } });
      expect(verified.body.valid).toBe(false);
      expect((await call(after.url, "/auth/verify", { body: replayBody })).body.code).toBe("NONCE_USED");
      const secret = await call(after.url, `/dashboard/api/webhooks/${hook.endpointId}/secret`, { token: owner.sessionToken });
      expect(secret.body.secret).toBe(rotated);
      const endpoints = (await call(after.url, "/dashboard/api/webhooks", { token: owner.sessionToken })).body.endpoints as { endpointId: string; url: string; enabled: boolean }[];
      expect(endpoints.map((e) => [e.endpointId, e.url, e.enabled])).toEqual([
        [hook.endpointId, "https://hooks.example.test/walletgate", true],
        [hookMoved.endpointId, "https://hooks.example.test/new", false],
      ]);
      // The ended sessions answer 404 (mcp.md), from any client; the kept one is rebuilt, still bound.
      const rpc = (id: string) =>
        fetch(`${after.url}/mcp`, {
          method: "POST",
          headers: { "content-type": "application/json", accept: "application/json, text/event-stream", "mcp-session-id": id, "user-agent": "another" },
          body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/call", params: { name: "session_info", arguments: {} } }),
        });
      for (const id of mcpIds.slice(0, 2)) expect((await rpc(id)).status).toBe(404);
      const rebuilt = await rpc(mcpIds[2]!);
      expect(rebuilt.status).toBe(200);
      expect(await rebuilt.text()).toContain(mcpWallets[2]!);
      // The deleted endpoint stays deleted, also after a second restore of the same backup (the restored
      // database keeps the record of its deletion); the agent keeps its later endpoint and status.
      const viewer = await connectMcp(after.url, "restore-viewer");
      await viewer.ok("wallet_create", {});
      expect((await viewer.ok("consumer_get_agent", { agentId })).agent).toMatchObject({ status: "paused", name: "Restored" });
      await viewer.client.close();
      const restored = new Database(join(server.dataDir, "walletgate.db"), { readonly: true });
      expect(restored.query("SELECT endpoint FROM market_agents WHERE id = ?").get(agentId)).toEqual({ endpoint: "https://agent.example.test/new" }); // shown to its owner only
      restored.close();
      await after.stop();
      const twice = await runCli(["restore", backup, "--json"], { DATA_DIR: server.dataDir });
      expect([twice.code, JSON.parse(twice.stdout).revocations.webhookEndpoints]).toEqual([0, 2]);
      const third = await server.restart();
      servers.push(third);
      const listed = (await call(third.url, "/dashboard/api/webhooks", { token: owner.sessionToken })).body.endpoints as { endpointId: string }[];
      expect(listed.map((e) => e.endpointId)).toEqual([hook.endpointId, hookMoved.endpointId]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 60_000);

  test("a server and a CLI command started while a restore runs wait for it, then use the restored database: nothing they write is lost", async () => {
    const server = await start();
    const dir = tempDir();
    try {
      const owner = newWallet();
      const ownerToken = (await signIn(server.url, owner)).sessionToken;
      expect((await call(server.url, "/dashboard/api/me", { token: ownerToken })).body).toMatchObject({ tier: "free" });
      const backup = join(dir, "before.db");
      expect((await runCli(["backup", backup], { DATA_DIR: server.dataDir })).code).toBe(0);
      expect(await server.stop()).toBe(0);
      // Both start just before the backup takes the name and are given time enough to open and write, if
      // they could: they must wait for the restore instead, and then open the database it put in place.
      let command: ReturnType<typeof runCli> | undefined;
      let second: Promise<TestServer> | undefined;
      restoreDatabase(join(server.dataDir, "walletgate.db"), backup, new Date(), () => {
        command = runCli(["owners", "set-tier", owner.address, "pro"], { DATA_DIR: server.dataDir });
        second = startTestServer({ AUTH_RATE_LIMIT: "off", BASE_URL: "http://walletgate.test" }, server.dataDir);
        Bun.sleepSync(2_000);
      });
      expect(await command!).toMatchObject({ code: 0 });
      const restarted = await second!;
      servers.push(restarted);
      const late = await signIn(restarted.url, newWallet());
      expect(await status(restarted.url, ownerToken)).toBe("OK"); // signed in before the backup
      expect(await restarted.stop()).toBe(0);
      const db = new Database(join(server.dataDir, "walletgate.db"), { readonly: true });
      try {
        expect(db.query("SELECT tier FROM owners WHERE wallet = ?").get(owner.address)).toEqual({ tier: "pro" });
        expect(db.query("SELECT count(*) AS n FROM auth_tokens WHERE wallet = ?").get(late.walletAddress)).toEqual({ n: 1 });
      } finally {
        db.close();
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 60_000);

  test("a second server on the same database is refused, naming it; the first goes on", async () => {
    const server = await start();
    const second = await runCli(["serve"], { DATA_DIR: server.dataDir, PORT: "0", HOST: "127.0.0.1" });
    expect(second.code).toBe(1);
    expect(second.stderr + second.stdout).toContain("another walletgate serve is already using");
    expect((await call(server.url, "/readyz")).status).toBe(200);
    expect(await server.stop()).toBe(0);
    // Once it has stopped, a server starts there again.
    servers.push(await startTestServer({ AUTH_RATE_LIMIT: "off" }, server.dataDir));
  }, 60_000);
});

// Another PID namespace, as a container beside the server's has: the restore cannot see the server in /proc.
const canUnshare = commandSucceeds(["unshare", "--pid", "--fork", "--mount-proc", "true"]);

describe("walletgate restore beside a server it cannot see", () => {
  test("an exclusive lock on the database is refused while another process has it open, whatever /proc shows", async () => {
    const dir = tempDir();
    const path = join(dir, "walletgate.db");
    const holder = Bun.spawn(
      [process.execPath, "-e", `const db = new (require("bun:sqlite").Database)(${JSON.stringify(path)}); db.run("PRAGMA journal_mode=WAL"); db.run("CREATE TABLE t (x)"); console.log("open"); await Bun.sleep(30000);`],
      { stdout: "pipe" },
    );
    try {
      const reader = holder.stdout.getReader();
      expect(new TextDecoder().decode((await reader.read()).value)).toContain("open");
      expect(openedByAnother(path)).toBe(true);
      holder.kill();
      await holder.exited;
      expect(openedByAnother(path)).toBe(false);
      expect(openedByAnother(join(dir, "none.db"))).toBe(false);
    } finally {
      holder.kill();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test.skipIf(!canUnshare)("a server in another PID namespace: restore is refused and the server's database stays in place", async () => {
    const server = await start();
    const dir = tempDir();
    try {
      const backup = join(dir, "before.db");
      expect((await runCli(["backup", backup], { DATA_DIR: server.dataDir })).code).toBe(0);
      const refused = await runCli(["restore", backup], { DATA_DIR: server.dataDir }, ["unshare", "--pid", "--fork", "--mount-proc"]);
      expect({ code: refused.code, why: refused.stderr.includes("stop the server first") }).toEqual({ code: 1, why: true });
      expect(readdirSync(server.dataDir).filter((f) => f.includes("replaced"))).toEqual([]);
      const kept = await signIn(server.url, newWallet());
      const restarted = await server.restart();
      servers.push(restarted);
      expect(await status(restarted.url, kept.sessionToken)).toBe("OK"); // what it acknowledged is in the database
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 60_000);

  test.skipIf(!canUnshare)("a process that is no walletgate server (it takes no lock of ours) with the database open, out of restore's sight: restore is refused", async () => {
    // restore.ts restoreUnderLock(): `if (openedByAnother(databasePath)) throw` → `if (false)`; /proc and the lock file
    // see neither a process in another PID namespace nor one that never locks (sqlite3, a walletgate from before the lock file)
    const dataDir = tempDir();
    const dir = tempDir();
    try {
      expect((await runCli(["migrate"], { DATA_DIR: dataDir })).code).toBe(0);
      const backup = join(dir, "before.db");
      expect((await runCli(["backup", backup], { DATA_DIR: dataDir })).code).toBe(0);
      const path = join(dataDir, "walletgate.db");
      const holder = Bun.spawn(
        [process.execPath, "-e", `const db = new (require("bun:sqlite").Database)(${JSON.stringify(path)}); db.query("SELECT count(*) FROM owners").get(); console.log("open"); await Bun.sleep(30000);`],
        { stdout: "pipe" },
      );
      try {
        expect(new TextDecoder().decode((await holder.stdout.getReader().read()).value)).toContain("open");
        const refused = await runCli(["restore", backup], { DATA_DIR: dataDir }, ["unshare", "--pid", "--fork", "--mount-proc"]);
        expect({ code: refused.code, why: refused.stderr.includes("the database is open in another process") }).toEqual({ code: 1, why: true });
        expect(readdirSync(dataDir).filter((f) => f.includes("replaced"))).toEqual([]);
      } finally {
        holder.kill();
        await holder.exited;
      }
    } finally {
      rmSync(dataDir, { recursive: true, force: true });
      rmSync(dir, { recursive: true, force: true });
    }
  }, 60_000);
});

describe("walletgate backup", () => {
  test("copies the live database while sign-ins land: a server on the copy keeps every token signed in before; never overwrites", async () => {
    const server = await start();
    const before = await Promise.all(Array.from({ length: 10 }, () => signIn(server.url, newWallet())));
    const dir = tempDir();
    try {
      const target = join(dir, "copy.db");
      // Sign-ins keep landing until the backup has finished: the copy is taken while the server writes.
      let copying = true;
      let during = 0;
      const racing = (async () => {
        while (copying) {
          await signIn(server.url, newWallet());
          during++;
        }
      })();
      const out = await runCli(["backup", target, "--json"], { DATA_DIR: server.dataDir });
      copying = false;
      await racing;
      expect(during).toBeGreaterThan(0);
      expect({ code: out.code, stderr: out.stderr.includes("backed up") }).toEqual({ code: 0, stderr: true });
      expect(JSON.parse(out.stdout)).toEqual({ file: target, bytes: statSync(target).size, ms: expect.any(Number) });
      expect(statSync(target).mode & 0o777).toBe(0o600);
      const copy = new Database(target, { readonly: true });
      expect(copy.query("PRAGMA integrity_check").get()).toEqual({ integrity_check: "ok" });
      copy.close();

      // A new DATA_DIR with the copy and the secret files: the tokens signed in before the backup work there.
      const restoredDir = tempDir();
      copyFileSync(target, join(restoredDir, "walletgate.db"));
      for (const secret of ["jwt-secret", "wallet-encryption-key"]) copyFileSync(join(server.dataDir, secret), join(restoredDir, secret));
      const restored = await startTestServer({ AUTH_RATE_LIMIT: "off", BASE_URL: "http://walletgate.test" }, restoredDir);
      servers.push(restored);
      for (const s of before) expect(await status(restored.url, s.sessionToken)).toBe("OK");

      // An existing file is never replaced; a missing argument is a usage error.
      const size = statSync(target).size;
      const again = await runCli(["backup", target], { DATA_DIR: server.dataDir });
      expect({ code: again.code, exists: again.stderr.includes("exists") }).toEqual({ code: 1, exists: true });
      expect(statSync(target).size).toBe(size);
      expect((await runCli(["backup"], { DATA_DIR: server.dataDir })).code).toBe(2);
      expect((await runCli(["backup", join(dir, "x.db")], { DATA_DIR: join(dir, "empty") })).code).toBe(1); // no database there
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 60_000);
});
