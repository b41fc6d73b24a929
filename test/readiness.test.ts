// /readyz against the ledger of each network: the embedded one, a working Solana RPC (LiteSVM behind
// JSON-RPC), an RPC that refuses connections and one that never answers (2 s and it counts as down).
import { afterAll, describe, expect, test } from "bun:test";
import { startLiteSvmRpc } from "./helpers/litesvm-rpc.ts";
import { Database } from "bun:sqlite";
import { openSync, writeSync, closeSync } from "node:fs";
import { join } from "node:path";
import { commandSucceeds, startTestServer, tempDir, type TestServer } from "./helpers/server.ts";
import { until } from "./helpers/until.ts";
import { DISK_TROUBLE_MS } from "../src/db/open.ts";
import { newWallet, signIn } from "./helpers/wallet.ts";

const servers: TestServer[] = [];
afterAll(async () => {
  for (const s of servers) await s.dispose();
});

async function readyz(env: Record<string, string>) {
  const server = await startTestServer(env);
  servers.push(server);
  const started = performance.now();
  const response = await fetch(`${server.url}/readyz`);
  return { status: response.status, body: await response.json(), ms: performance.now() - started };
}

/** Overwrites a table's root page in a stopped server's database file, as a disk or a bad restore would leave it. */
function damageRootPage(dataDir: string, table: string): void {
  const file = join(dataDir, "walletgate.db");
  const db = new Database(file, { readonly: true });
  const { root, size } = db.query("SELECT rootpage AS root, (SELECT page_size FROM pragma_page_size) AS size FROM sqlite_master WHERE name = ?").get(table) as { root: number; size: number };
  db.close();
  const fd = openSync(file, "r+");
  writeSync(fd, new Uint8Array(size).fill(0xa5), 0, size, (root - 1) * size);
  closeSync(fd);
}

describe("/readyz checks the ledger", () => {
  test("localnet: the embedded ledger", async () => {
    expect(await readyz({})).toMatchObject({ status: 200, body: { status: "ready", checks: { database: "ok", ledger: "ok" } } });
  });

  test("devnet: a Solana RPC that answers", async () => {
    const rpc = await startLiteSvmRpc();
    try {
      const result = await readyz({ NETWORK: "devnet", SOLANA_RPC_URL: rpc.url });
      expect(result).toMatchObject({ status: 200, body: { checks: { database: "ok", ledger: "ok" } } });
    } finally {
      await rpc.stop();
    }
  });

  test("devnet: an RPC that refuses connections is 503", async () => {
    const closed = Bun.serve({ port: 0, hostname: "127.0.0.1", fetch: () => new Response() });
    const url = `http://127.0.0.1:${closed.port}/?api-key=SECRET`;
    await closed.stop(true);
    const result = await readyz({ NETWORK: "devnet", SOLANA_RPC_URL: url });
    expect(result).toMatchObject({ status: 503, body: { status: "unavailable", checks: { database: "ok", ledger: "error" } } });
    expect(JSON.stringify(result.body)).not.toContain("SECRET");
  });

  test("devnet: an RPC that never answers is 503 within about 2 s", async () => {
    const silent = Bun.serve({ port: 0, hostname: "127.0.0.1", fetch: () => new Promise<Response>(() => {}) });
    try {
      const result = await readyz({ NETWORK: "devnet", SOLANA_RPC_URL: `http://127.0.0.1:${silent.port}/` });
      expect(result).toMatchObject({ status: 503, body: { checks: { ledger: "error" } } });
      expect(result.ms).toBeLessThan(5_000);
    } finally {
      await silent.stop(true);
    }
  }, 60_000);
});

/** Whether this machine lets a test mount a small disk of its own (root, or user namespaces). */
const canMountTmpfs = commandSucceeds(["unshare", "-m", "sh", "-c", "mount -t tmpfs -o size=64k tmpfs /mnt"]);

describe("/readyz checks the database", () => {
  test.skipIf(!canMountTmpfs)("a full disk: writes fail and /readyz is 503; with room again it is 200 within DISK_TROUBLE_MS, and writes work", async () => {
    // DATA_DIR on a 4 MiB disk of the server's own (a mount namespace), filled and emptied from inside it.
    const dir = tempDir();
    const server = await startTestServer({ AUTH_RATE_LIMIT: "off" }, dir, ["unshare", "-m", "sh", "-c", 'mount -t tmpfs -o size=4m tmpfs "$DATA_DIR" && exec "$0" "$@"']);
    servers.push(server);
    const inside = (command: string) => Bun.$`nsenter -t ${server.pid} -m sh -c ${command}`.nothrow().quiet();
    const database = async () => {
      const res = await fetch(`${server.url}/readyz`);
      return [res.status, ((await res.json()) as { checks: { database: string } }).checks.database];
    };
    await signIn(server.url, newWallet());
    expect(await database()).toEqual([200, "ok"]);
    await inside(`dd if=/dev/zero of="${dir}/filler" bs=64k 2>/dev/null`); // until the disk is full
    const tried = await Promise.all(Array.from({ length: 20 }, () => signIn(server.url, newWallet()).then(() => "ok", () => "refused")));
    expect(tried).toContain("refused"); // the log cannot grow: commits fail
    expect(await database()).toEqual([503, "error"]);

    await inside(`rm "${dir}/filler"`);
    const since = performance.now();
    await until(async () => ((await database())[0] === 200 ? true : undefined), DISK_TROUBLE_MS + 3_000, 250);
    expect(performance.now() - since).toBeLessThan(DISK_TROUBLE_MS + 3_000);
    await signIn(server.url, newWallet());
    expect(await database()).toEqual([200, "ok"]);
  }, 60_000);

  test("a database file SQLite reports damaged: writes stop and /readyz is 503 from the first such error", async () => {
    const server = await startTestServer({ AUTH_RATE_LIMIT: "off" });
    servers.push(server);
    await Promise.all(Array.from({ length: 50 }, () => signIn(server.url, newWallet())));
    expect(await server.stop()).toBe(0); // the log checkpointed into the file
    // The tokens table's root page overwritten, as a disk or a bad restore would leave it.
    damageRootPage(server.dataDir, "auth_tokens");
    const restarted = await startTestServer({ AUTH_RATE_LIMIT: "off" }, server.dataDir);
    servers.push(restarted);
    // The start-up purge or this sign-in reads the page first: either way SQLite says the file is damaged.
    expect(await signIn(restarted.url, newWallet()).then(() => "signed in", (err: unknown) => String(err))).not.toBe("signed in");
    const ready = await fetch(`${restarted.url}/readyz`);
    expect([ready.status, ((await ready.json()) as { checks: { database: string } }).checks.database]).toEqual([503, "error"]);
  }, 60_000);

  test("a damaged page that only a request reads (no timer does): its 500 stops writes and /readyz is 503 (mutation review)", async () => {
    // app.ts unhandled(): `deps.db.noteFailure(error)` dropped → the request's 500 is logged, but writes go on
    // into the damaged file and /readyz stays 200. No background job reads the products table, so the
    // request is the first (and only) one to see the damage.
    const server = await startTestServer({ AUTH_RATE_LIMIT: "off" });
    servers.push(server);
    const wallet = newWallet();
    const owner = await signIn(server.url, wallet);
    const made = await fetch(`${server.url}/dashboard/api/products`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${owner.sessionToken}` },
      body: JSON.stringify({ title: "Pass", description: "", type: "access", price: "1" }),
    });
    expect(made.status).toBe(201);
    expect(await server.stop()).toBe(0);
    damageRootPage(server.dataDir, "products");
    const restarted = await startTestServer({ AUTH_RATE_LIMIT: "off" }, server.dataDir);
    servers.push(restarted);
    const before = await fetch(`${restarted.url}/readyz`);
    expect(before.status).toBe(200); // nothing has read the page yet
    const again = await signIn(restarted.url, wallet); // a token names its server's URL (another port now)
    const listed = await fetch(`${restarted.url}/dashboard/api/products`, { headers: { authorization: `Bearer ${again.sessionToken}` } });
    expect([listed.status, ((await listed.json()) as { code: string }).code]).toEqual([500, "INTERNAL_ERROR"]);
    const ready = await fetch(`${restarted.url}/readyz`);
    expect([ready.status, ((await ready.json()) as { checks: { database: string } }).checks.database]).toEqual([503, "error"]);
  }, 60_000);
});
