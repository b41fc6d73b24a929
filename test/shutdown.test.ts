// Graceful shutdown over real sockets: an MCP client's open event stream (GET /mcp, which the SDK's
// Streamable HTTP client opens by itself) does not hold SIGTERM for the whole grace period, while a tool
// call in flight when the signal arrives still gets its answer; a background check waiting on an RPC node
// that stopped answering does not hold it either.
import { afterAll, expect, test } from "bun:test";
import { startLiteSvmRpc } from "./helpers/litesvm-rpc.ts";
import { startSilentRpc } from "./helpers/silent-rpc.ts";
import { connectMcp } from "./helpers/mcp.ts";
import { logged, startTestServer, tempDir, type TestServer } from "./helpers/server.ts";
import { rmSync } from "node:fs";
import { join } from "node:path";
import { call, newWallet, signIn } from "./helpers/wallet.ts";

const servers: TestServer[] = [];
afterAll(async () => {
  for (const s of servers) await s.dispose();
});

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
/** Whether a process of this id still exists. */
const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

test("SIGTERM with an MCP event stream open: the call in flight is answered, and the process exits well inside the 10 s grace", async () => {
  const rpc = await startLiteSvmRpc();
  // In front of the ledger's RPC: once `slow` is set, each call waits 1.5 s, so a tool call is in flight
  // when the signal arrives.
  let slow = false;
  const held = Promise.withResolvers<void>();
  const proxy = Bun.serve({
    port: 0,
    hostname: "127.0.0.1",
    async fetch(request) {
      const body = await request.text();
      if (slow) {
        held.resolve();
        await sleep(1500);
      }
      return fetch(rpc.url, { method: "POST", headers: { "content-type": "application/json" }, body });
    },
  });
  const server = await startTestServer({ NETWORK: "devnet", SOLANA_RPC_URL: `http://127.0.0.1:${proxy.port}/` });
  servers.push(server);
  const mcp = await connectMcp(server.url, "shutdown-test");
  try {
    await mcp.ok("wallet_create", { airdropSol: 0 });
    // The SDK client opened its event stream after initializing.
    const lines = await logged(server, (ls) => ls.some((l) => l.method === "GET" && l.path === "/mcp" && l.status === 200));
    expect(lines.some((l) => l.method === "GET" && l.path === "/mcp" && l.status === 200)).toBe(true);

    slow = true;
    const balance = mcp.call("wallet_get_balance");
    await held.promise; // the call is waiting on the ledger
    const signalled = performance.now();
    const exited = server.stop("SIGTERM");
    const envelope = await balance;
    expect(envelope.success).toBe(true);
    expect(await exited).toBe(0);
    expect(performance.now() - signalled).toBeLessThan(5_000);
    expect(server.output()).not.toContain("cut off after grace period");
  } finally {
    await mcp.client.close().catch(() => undefined);
    await proxy.stop(true);
    await rpc.stop();
  }
}, 60_000);

test("SIGTERM while the checkout watcher waits on an RPC node that stopped answering: the process exits at once", async () => {
  // Once silent, each call would wait for the ledger's 15-s request timeout.
  const rpc = await startSilentRpc();
  const server = await startTestServer({ NETWORK: "devnet", SOLANA_RPC_URL: rpc.url, AUTH_RATE_LIMIT: "off" });
  servers.push(server);
  try {
    // An open checkout, which the watcher (every 5 s) looks for on the ledger.
    const owner = (await signIn(server.url, newWallet())).sessionToken;
    const product = await call(server.url, "/dashboard/api/products", { token: owner, body: { title: "Pass", type: "access", price: 1, description: "" } });
    expect(product.status).toBe(201);
    const opened = await call(server.url, `/pay/${product.body.productId}/checkout`, { body: { walletAddress: newWallet().address } });
    expect(opened.status).toBe(200);

    rpc.silence();
    await rpc.heard; // a watcher round is waiting on the node
    const signalled = performance.now();
    expect(await server.stop("SIGTERM")).toBe(0);
    expect(performance.now() - signalled).toBeLessThan(3_000);
    const lines = server
      .output()
      .split("\n")
      .filter((l) => l.startsWith("{"))
      .map((l) => JSON.parse(l) as { level: string; msg: string });
    expect(lines.filter((l) => l.level === "error" || l.level === "warn")).toEqual([]);
    expect(lines.at(-1)?.msg).toBe("stopped");
  } finally {
    await rpc.stop();
  }
}, 60_000);

test("a request still waiting on the ledger after the 10 s grace is cut off: the process does not wait for it", async () => {
  // The call would otherwise hold the exit until the RPC client's own 15 s timeout.
  const rpc = await startSilentRpc();
  const server = await startTestServer({ NETWORK: "devnet", SOLANA_RPC_URL: rpc.url, AUTH_RATE_LIMIT: "off" });
  servers.push(server);
  try {
    const created = await call(server.url, "/mcp", { body: { tool: "wallet_create", params: { airdropSol: 0 } } });
    expect(created.body.success).toBe(true);
    rpc.silence();
    const balance = call(server.url, "/mcp", { body: { tool: "wallet_get_balance" }, token: created.body.data.sessionToken }).catch(() => null);
    await rpc.heard; // the call is waiting on the node
    const signalled = performance.now();
    expect(await server.stop("SIGTERM")).toBe(0);
    const took = performance.now() - signalled;
    expect(took).toBeGreaterThan(9_000);
    expect(took).toBeLessThan(13_000);
    expect(server.output()).toContain("shutdown: in-flight requests cut off after grace period");
    await balance;
  } finally {
    await rpc.stop();
  }
}, 60_000);

test("EXIT_WITH_PARENT: a server whose starter was killed with SIGKILL stops by itself; without it, it goes on", async () => {
  /** `serve` started by a shell that is then killed: the server's pid and its log, read by this test. */
  const orphan = async (exitWithParent: boolean, waitMs: number) => {
    const dir = tempDir();
    const starter = Bun.spawn(["sh", "-c", `"$0" "$1" serve & echo "$!" >&2; wait`, process.execPath, join(import.meta.dir, "../src/main.ts")], {
      env: { PATH: process.env.PATH ?? "", HOME: process.env.HOME ?? "/tmp", PORT: "0", DATA_DIR: dir, LOG_FORMAT: "json", ...(exitWithParent ? { EXIT_WITH_PARENT: "true" } : {}) },
      stdout: "pipe",
      stderr: "pipe",
    });
    const reader = starter.stderr.getReader();
    const pid = Number(new TextDecoder().decode((await reader.read()).value).trim());
    let out = "";
    const log = (async () => {
      for await (const chunk of starter.stdout) out += new TextDecoder().decode(chunk);
    })();
    for (let i = 0; i < 300 && !out.includes('"msg":"listening"'); i++) await sleep(50);
    expect(out).toContain('"msg":"listening"');
    starter.kill("SIGKILL");
    await starter.exited;
    const killedAt = performance.now();
    while (alive(pid) && performance.now() - killedAt < waitMs) await sleep(100);
    const stillAlive = alive(pid);
    if (stillAlive) process.kill(pid, "SIGKILL");
    while (alive(pid)) await sleep(50);
    await log;
    rmSync(dir, { recursive: true, force: true });
    return { stillAlive, out };
  };
  const watched = await orphan(true, 5_000);
  expect(watched.stillAlive).toBe(false);
  expect(watched.out).toContain('"msg":"shutting down","cause":"the process that started it ended (EXIT_WITH_PARENT)"');
  expect(watched.out).toContain('"msg":"stopped"');
  const unwatched = await orphan(false, 2_000); // four times as long as the watched one's check period
  expect(unwatched.stillAlive).toBe(true);
}, 60_000);

test("EXIT_WITH_PARENT=<pid>: a starter that ended before the server even looked is seen at once", async () => {
  const dir = tempDir();
  // The shell names itself ($$) and exits at once, long before the server has loaded.
  const starter = Bun.spawn(["sh", "-c", `EXIT_WITH_PARENT=$$ "$0" "$1" serve & echo "$!" >&2; exit 0`, process.execPath, join(import.meta.dir, "../src/main.ts")], {
    env: { PATH: process.env.PATH ?? "", HOME: process.env.HOME ?? "/tmp", PORT: "0", DATA_DIR: dir, LOG_FORMAT: "json" },
    stdout: "pipe",
    stderr: "pipe",
  });
  const pid = Number(new TextDecoder().decode((await starter.stderr.getReader().read()).value).trim());
  const log = new Response(starter.stdout).text(); // to its end: the server's exit closes it
  for (let waited = 0; alive(pid) && waited < 10_000; waited += 100) await sleep(100);
  const stillAlive = alive(pid);
  if (stillAlive) process.kill(pid, "SIGKILL");
  const out = await log;
  rmSync(dir, { recursive: true, force: true });
  expect(stillAlive).toBe(false);
  expect(out).toContain('"msg":"shutting down","cause":"the process that started it ended (EXIT_WITH_PARENT)"');
}, 60_000);
