// Connections over raw sockets: an idle one is closed after HTTP_IDLE_TIMEOUT_S, while a request without a
// body that waits on the ledger longer than that (a txHash verified against an RPC node answering slowly)
// still gets its answer instead of a reset connection (Bun cuts such a request at the idle timeout).
import { afterAll, expect, test } from "bun:test";
import { connect } from "node:net";
import { startLiteSvmRpc } from "./helpers/litesvm-rpc.ts";
import { logged, startTestServer, type TestServer } from "./helpers/server.ts";
import { call, newWallet, signIn } from "./helpers/wallet.ts";
import { connectMcp } from "./helpers/mcp.ts";

const servers: TestServer[] = [];
afterAll(async () => {
  for (const s of servers) await s.dispose();
});

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** One HTTP/1.1 request on its own socket: the answer's first line and body, and when the server closed the socket (ms after sending). */
function rawRequest(url: string, request: string): Promise<{ statusLine: string; body: string; closedAfterMs: number }> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    let received = "";
    const sent = performance.now();
    const socket = connect(Number(port), hostname, () => socket.write(request));
    socket.setEncoding("utf8");
    socket.on("data", (chunk: string) => (received += chunk));
    socket.on("error", reject);
    socket.on("close", () => {
      const [head = "", body = ""] = received.split("\r\n\r\n");
      resolve({ statusLine: head.split("\r\n")[0] ?? "", body, closedAfterMs: performance.now() - sent });
    });
  });
}

test("HTTP_IDLE_TIMEOUT_S closes an idle connection; a request waiting on a slow RPC node longer than that is still answered", async () => {
  const rpc = await startLiteSvmRpc();
  // In front of the ledger's RPC: once `slow` is set, each call waits 6 s, longer than the 1-s idle timeout
  // however Bun rounds it (its timers tick every ~4 s).
  let slow = false;
  const proxy = Bun.serve({
    port: 0,
    hostname: "127.0.0.1",
    async fetch(request) {
      const body = await request.text();
      if (slow) await sleep(6_000);
      return fetch(rpc.url, { method: "POST", headers: { "content-type": "application/json" }, body });
    },
  });
  try {
    const server = await startTestServer({ NETWORK: "devnet", SOLANA_RPC_URL: `http://127.0.0.1:${proxy.port}/`, HTTP_IDLE_TIMEOUT_S: "1" });
    servers.push(server);
    const host = new URL(server.url).host;
    const { sessionToken } = await signIn(server.url, newWallet());
    const key = (await call(server.url, "/dashboard/api/keys", { token: sessionToken, body: { label: "server" } })).body.key as string;
    const txHash = "1".repeat(64); // base58 of 64 zero bytes: a signature no transaction has
    slow = true;
    const [idle, idleAfterVerify, verified] = await Promise.all([
      // Idle after its answer (keep-alive): closed by the server within a few seconds (Bun checks every ~4 s), not after ten.
      rawRequest(server.url, `GET /healthz HTTP/1.1\r\nHost: ${host}\r\n\r\n`),
      // The longer wait lasts only while the answer is made (here a 401 without a key): idle, the same.
      rawRequest(server.url, `GET /public/verify/${"1".repeat(64)} HTTP/1.1\r\nHost: ${host}\r\n\r\n`),
      // The ledger is asked for the transaction: one RPC call, silent for 6 s.
      rawRequest(server.url, `GET /public/verify/${txHash} HTTP/1.1\r\nHost: ${host}\r\nX-Api-Key: ${key}\r\nConnection: close\r\n\r\n`),
    ]);
    expect(idle.statusLine).toBe("HTTP/1.1 200 OK");
    expect(idle.closedAfterMs).toBeLessThan(8_000);
    expect(idleAfterVerify.statusLine).toBe("HTTP/1.1 401 Unauthorized");
    expect(idleAfterVerify.closedAfterMs).toBeLessThan(8_000);
    expect(verified.statusLine).toBe("HTTP/1.1 200 OK");
    expect(JSON.parse(verified.body)).toEqual({ valid: false, txHash, error: "transaction not found" });
    expect(verified.closedAfterMs).toBeGreaterThan(6_000);
  } finally {
    await proxy.stop(true);
    await rpc.stop();
  }
}, 60_000);

test("a request without a usable Host is routed, logged and counted by its path, and its query never reaches the log", async () => {
  const server = await startTestServer({});
  servers.push(server);
  const secret = "SECRET-IN-QUERY";
  // HTTP/1.0 without Host; and HTTP/1.1 with an invalid one. Bun hands the app a url that is the path alone.
  const challenge = await rawRequest(server.url, `GET /auth/challenge?wallet=x&redirect=https://h/${secret} HTTP/1.0\r\n\r\n`);
  expect(challenge.statusLine).toContain(" 400 ");
  expect(JSON.parse(challenge.body)).toMatchObject({ code: "INVALID_ADDRESS" });
  const check = await rawRequest(server.url, `POST /public/access/check HTTP/1.0\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n{}`);
  expect([check.statusLine.includes(" 401 "), JSON.parse(check.body).code]).toEqual([true, "MISSING_API_KEY"]);
  const health = await rawRequest(server.url, `GET /healthz HTTP/1.1\r\nHost: a b\r\nConnection: close\r\n\r\n`);
  expect(health.statusLine).toContain(" 200 ");
  // The access log is written at the end of the event-loop turn, in batches: waited for, not slept on.
  const wanted = ["/auth/challenge", "/public/access/check", "/healthz"];
  const lines = await logged(server, (all) => wanted.every((path) => all.some((l) => l.path === path)));
  expect(lines.map((l) => l.path)).toEqual(expect.arrayContaining(wanted));
  expect(server.output()).not.toContain(secret);
  const metrics = await (await fetch(`${server.url}/metrics`)).text();
  expect(metrics).toContain('route="/auth/challenge",status="400"');
});

test("a chunked body its client abandons is the client's failure: no error logged, not counted as a 500", async () => {
  const server = await startTestServer({});
  servers.push(server);
  const { hostname, port } = new URL(server.url);
  await new Promise<void>((resolve, reject) => {
    const socket = connect(Number(port), hostname, () => {
      socket.write(`POST /auth/verify HTTP/1.1\r\nHost: ${hostname}\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n5\r\n{"wal\r\n`);
      setTimeout(() => socket.destroy(), 100);
    });
    socket.on("close", () => resolve());
    socket.on("error", reject);
  });
  // /mcp reads its own body: one with a Content-Length its client does not send in full, likewise.
  await new Promise<void>((resolve, reject) => {
    const socket = connect(Number(port), hostname, () => {
      socket.write(`POST /mcp HTTP/1.1\r\nHost: ${hostname}\r\ncontent-type: application/json\r\naccept: application/json, text/event-stream\r\ncontent-length: 100\r\n\r\n{"wal`);
      setTimeout(() => socket.destroy(), 100);
    });
    socket.on("close", () => resolve());
    socket.on("error", reject);
  });
  // Both answered (400, logged) before the log is judged: no error line among what they wrote.
  const lines = await logged(server, (all) => ["/auth/verify", "/mcp"].every((path) => all.some((l) => l.path === path && l.status === 400)));
  expect(["/auth/verify", "/mcp"].map((path) => lines.some((l) => l.path === path && l.status === 400))).toEqual([true, true]);
  expect(server.output()).not.toContain('"level":"error"');
  const metrics = await (await fetch(`${server.url}/metrics`)).text();
  expect(metrics).not.toContain('status="500"');
});

test("an MCP event stream (GET /mcp) outlives HTTP_IDLE_TIMEOUT_S: its headers and a comment go out at once, and nothing cuts it", async () => {
  const server = await startTestServer({ HTTP_IDLE_TIMEOUT_S: "1" });
  servers.push(server);
  // The SDK's client opens its own stream after initializing: it must see no error while the stream idles.
  const mcp = await connectMcp(server.url, "stream-test");
  const errors: unknown[] = [];
  mcp.transport.onerror = (err) => errors.push(err);
  // A session of its own for the raw stream (one stream per session).
  const headers = { "content-type": "application/json", accept: "application/json, text/event-stream", "mcp-protocol-version": "2025-03-26" };
  const init = await fetch(`${server.url}/mcp`, {
    method: "POST",
    headers,
    body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "initialize", params: { protocolVersion: "2025-03-26", capabilities: {}, clientInfo: { name: "raw", version: "1" } } }),
  });
  const sessionId = init.headers.get("mcp-session-id")!;
  await fetch(`${server.url}/mcp`, { method: "POST", headers: { ...headers, "mcp-session-id": sessionId }, body: JSON.stringify({ jsonrpc: "2.0", method: "notifications/initialized" }) });
  const { hostname, port, host } = new URL(server.url);
  const received: { atMs: number; text: string }[] = [];
  const sent = performance.now();
  const socket = connect(Number(port), hostname, () =>
    socket.write(`GET /mcp HTTP/1.1\r\nHost: ${host}\r\nAccept: text/event-stream\r\nMcp-Session-Id: ${sessionId}\r\nMcp-Protocol-Version: 2025-03-26\r\n\r\n`),
  );
  socket.setEncoding("utf8");
  socket.on("data", (text: string) => received.push({ atMs: performance.now() - sent, text }));
  let closedAtMs: number | null = null;
  const closed = new Promise<void>((resolve) => socket.on("close", () => ((closedAtMs = performance.now() - sent), resolve())));
  // Bun closes a connection idle past its timeout within ~4 s (its timer's tick); 7 s is well past it.
  await sleep(7_000);
  const all = received.map((r) => r.text).join("");
  expect(all).toStartWith("HTTP/1.1 200 OK\r\n");
  expect(all.toLowerCase()).toContain("content-type: text/event-stream");
  // The end of the headers and a first comment came at once (a proxy waits for them), not with a first event.
  expect(received.find((r) => r.text.includes(": stream open\n\n"))!.atMs).toBeLessThan(1_000);
  expect(closedAtMs).toBeNull();
  expect(errors).toEqual([]);
  expect(await mcp.call("session_info")).toMatchObject({ success: true });
  // Ending the session ends its stream, and the server closes it.
  expect((await fetch(`${server.url}/mcp`, { method: "DELETE", headers: { ...headers, "mcp-session-id": sessionId } })).status).toBe(200);
  await Promise.race([closed, sleep(5_000)]);
  expect(received.map((r) => r.text).join("")).toEndWith("0\r\n\r\n"); // the chunked body's end
  socket.destroy();
  await mcp.client.close();
}, 30_000);
