// `walletgate mcp` over stdio with the SDK's own StdioClientTransport: the same tools, the same database
// as the HTTP server, WALLETGATE_TOKEN as the caller, the binding held for the life of the process.
import { afterAll, describe, expect, test } from "bun:test";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { existsSync, rmSync } from "node:fs";
import { Keypair } from "@solana/web3.js";
import { join } from "node:path";
import { envelopeOf, type Envelope } from "./helpers/mcp.ts";
import { stdioMcpClient } from "./helpers/stdio.ts";
import { openServerDatabase, runCli, startTestServer, tempDir } from "./helpers/server.ts";
import { newWallet, signIn } from "./helpers/wallet.ts";

const ROOT = join(import.meta.dir, "..");
// Tokens name their issuer (BASE_URL): the stdio process and the HTTP server share one, as in production.
const BASE_URL = "http://walletgate.test";
const dataDir = tempDir();
const clients: Client[] = [];
afterAll(async () => {
  for (const c of clients) await c.close();
  rmSync(dataDir, { recursive: true, force: true });
});


async function stdioClient(env: Record<string, string> = {}): Promise<Client> {
  const client = await stdioMcpClient({ DATA_DIR: dataDir, BASE_URL, ...env });
  clients.push(client);
  return client;
}

async function call(client: Client, name: string, args: Record<string, unknown> = {}): Promise<Envelope> {
  return envelopeOf(await client.callTool({ name, arguments: args }));
}

describe("walletgate mcp (stdio)", () => {
  let token = "";
  let address = "";
  let lastCreated = "";

  test("lists the tools and binds the process's session with wallet_create", async () => {
    const client = await stdioClient();
    const names = (await client.listTools()).tools.map((t) => t.name);
    for (const name of ["wallet_create", "session_auth", "wallet_connect", "session_info", "session_restore", "wallet_disconnect", "wallet_get_balance", "wallet_transfer", "wallet_get_history", "wallet_submit_transaction"]) {
      expect(names).toContain(name);
    }
    // The hint names what works here: no HTTP header over stdio.
    expect(await call(client, "wallet_get_balance")).toMatchObject({ success: false, code: "UNAUTHENTICATED", error: expect.stringContaining("WALLETGATE_TOKEN") });
    const created = await call(client, "wallet_create", { label: "desk", airdropUsdc: 3 });
    expect(created).toMatchObject({ success: true, data: { label: "desk", network: "localnet", balances: { sol: 1, usdc: 3 } } });
    token = created.data!.sessionToken;
    address = created.data!.address;
    expect(await call(client, "session_info")).toMatchObject({ success: true, data: { walletAddress: address, restoredBy: "binding", custodial: true, mcpSessionId: null } });
    // A second wallet_create binds the process to the new wallet; session_restore binds it back.
    const other = (await call(client, "wallet_create", { airdropSol: 0 })).data!.address as string;
    lastCreated = other;
    expect(await call(client, "session_info")).toMatchObject({ data: { walletAddress: other } });
    expect(await call(client, "session_restore", { token })).toMatchObject({ success: true, data: { walletAddress: address, refreshed: false } });
    const sent = await call(client, "wallet_transfer", { to: other, amount: "1.25", token: "usdc" });
    expect(sent).toMatchObject({ success: true, data: { from: address, to: other, token: "usdc", amount: "1.25", status: "confirmed" } });
  }, 60_000);

  test("a restarted process gets the wallet last signed in from this host back by fingerprint, unless restore is off", async () => {
    const restarted = await stdioClient();
    expect(await call(restarted, "session_info")).toMatchObject({ success: true, data: { walletAddress: lastCreated, restoredBy: "fingerprint", custodial: true } });
    expect(await call(restarted, "wallet_get_balance")).toMatchObject({ success: true, data: { address: lastCreated } });
    const off = await stdioClient({ FINGERPRINT_RESTORE: "off" });
    expect(await call(off, "wallet_get_balance")).toMatchObject({ success: false, code: "UNAUTHENTICATED" });
  }, 60_000);

  test("WALLETGATE_TOKEN makes every call run as that token's wallet; a bad one answers its code", async () => {
    const client = await stdioClient({ WALLETGATE_TOKEN: token });
    expect(await call(client, "session_info")).toMatchObject({ success: true, data: { walletAddress: address, restoredBy: "token" } });
    const bad = await stdioClient({ WALLETGATE_TOKEN: "not-a-token" });
    expect(await call(bad, "wallet_get_balance")).toMatchObject({ success: false, code: "TOKEN_INVALID" });
    // The token is where the session starts, not a header for ever: a binding replaces a dead one...
    const created = await call(bad, "wallet_create", { airdropSol: 0 });
    expect(created.data).not.toHaveProperty("note"); // the HTTP header's note: here the binding does win
    expect(await call(bad, "session_info")).toMatchObject({ success: true, data: { walletAddress: created.data!.address, restoredBy: "binding" } });
    // ...and wallet_disconnect revokes it and leaves no wallet, until session_restore binds one.
    const second = await stdioClient({ WALLETGATE_TOKEN: created.data!.sessionToken });
    expect(await call(second, "wallet_disconnect")).toMatchObject({ success: true });
    expect(await call(second, "wallet_get_balance")).toMatchObject({ success: false, code: "UNAUTHENTICATED" });
    expect(await call(second, "session_restore", { token })).toMatchObject({ success: true, data: { walletAddress: address } });
    expect(await call(second, "wallet_get_balance")).toMatchObject({ success: true, data: { address } });
  }, 60_000);

  test("a host that closes stdin while a transfer runs still gets its answer, and the process exits 0", async () => {
    const proc = Bun.spawn([process.execPath, join(ROOT, "src/main.ts"), "mcp"], {
      env: { PATH: process.env.PATH ?? "", HOME: process.env.HOME ?? "/tmp", DATA_DIR: dataDir, BASE_URL, WALLETGATE_TOKEN: token },
      stdin: "pipe",
      stdout: "pipe",
      stderr: "pipe",
    });
    const send = (message: object) => proc.stdin.write(`${JSON.stringify(message)}\n`);
    send({ jsonrpc: "2.0", id: 1, method: "initialize", params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "t", version: "1" } } });
    send({ jsonrpc: "2.0", method: "notifications/initialized" });
    send({ jsonrpc: "2.0", id: 2, method: "tools/call", params: { name: "wallet_transfer", arguments: { to: Keypair.generate().publicKey.toBase58(), amount: "0.01", token: "usdc" } } });
    await proc.stdin.end(); // at once: the transfer is still running
    const [out, code] = await Promise.all([new Response(proc.stdout).text(), proc.exited]);
    const answers = out.trim().split("\n").map((line) => JSON.parse(line) as { id?: number; result?: { structuredContent?: Envelope } });
    const transfer = answers.find((a) => a.id === 2);
    expect(transfer?.result?.structuredContent).toMatchObject({ success: true, data: { status: "confirmed", amount: "0.01" } });
    expect(code).toBe(0);
  }, 60_000);

  test("a line that is not a message is said on stderr; a message over the 10 MB buffer ends the process with exit 1", async () => {
    const proc = Bun.spawn([process.execPath, join(ROOT, "src/main.ts"), "mcp"], {
      env: { PATH: process.env.PATH ?? "", HOME: process.env.HOME ?? "/tmp", DATA_DIR: dataDir, BASE_URL },
      stdin: "pipe",
      stdout: "pipe",
      stderr: "pipe",
    });
    const send = (text: string) => proc.stdin.write(`${text}\n`);
    send(JSON.stringify({ jsonrpc: "2.0", id: 1, method: "initialize", params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "t", version: "1" } } }));
    send('{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"arguments":{"sessionToken":eyJhbGciOiJIUzI1NiJ9SECRETPART}}}'); // a token pasted unquoted
    try {
      send(JSON.stringify({ jsonrpc: "2.0", id: 2, method: "tools/call", params: { name: "session_auth", arguments: { walletAddress: "x".repeat(11 * 1024 * 1024) } } }));
      await proc.stdin.flush();
    } catch {
      // the process stopped reading past its buffer: the rest of the message has nowhere to go
    }
    // stdin stays open: the process ends on its own.
    const [out, err, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
    expect(out.trim().split("\n").map((line) => (JSON.parse(line) as { id?: number }).id)).toEqual([1]); // stdout: messages only
    expect(err).toContain("stdio: a message could not be read");
    expect(err).toContain("the line is not JSON");
    expect(err).not.toContain("SECRETPART"); // the parser's message quotes the line: not logged
    expect(err).toContain("exceeded maximum size");
    expect(code).toBe(1);
  }, 60_000);

  test("stops writing once a newer walletgate migrated its database", async () => {
    const dir = tempDir();
    try {
      const transport = new StdioClientTransport({
        command: process.execPath,
        args: [join(ROOT, "src/main.ts"), "mcp"],
        env: { PATH: process.env.PATH ?? "", HOME: process.env.HOME ?? "/tmp", DATA_DIR: dir, BASE_URL },
        stderr: "pipe",
      });
      let stderr = "";
      transport.stderr?.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
      const client = new Client({ name: "stdio-test", version: "1" });
      await client.connect(transport);
      clients.push(client);
      expect(await call(client, "wallet_create", { airdropSol: 0 })).toMatchObject({ success: true });
      const db = openServerDatabase(dir);
      db.run("INSERT INTO schema_migrations (version, name, applied_at) VALUES (999, 'future', 0)");
      db.close();
      let made: Envelope = { success: true };
      for (let i = 0; i < 50 && made.success; i++) {
        await Bun.sleep(200);
        made = await call(client, "wallet_create", { airdropSol: 0 });
      }
      expect(made).toMatchObject({ success: false, code: "INTERNAL_ERROR" });
      expect(stderr).toContain("database migrated by a newer walletgate: writes are refused");
      await client.close();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 60_000);

  test("the same database as the HTTP server: the stdio wallet's token works over /mcp", async () => {
    const server = await startTestServer({ BASE_URL }, dataDir);
    try {
      const response = await fetch(`${server.url}/mcp`, {
        method: "POST",
        headers: { "content-type": "application/json", authorization: `Bearer ${token}` },
        body: JSON.stringify({ tool: "wallet_get_balance" }),
      });
      expect(response.status).toBe(200);
      expect(await response.json()).toMatchObject({ success: true, data: { address } });
    } finally {
      await server.stop();
    }
  }, 60_000);

  test("beside a server whose JWT_SECRET is in its environment: mcp without it is refused; commands that sign nothing run, writing no secret", async () => {
    const dir = tempDir();
    const jwtSecret = "s".repeat(48);
    const server = await startTestServer({ BASE_URL, JWT_SECRET: jwtSecret, AUTH_RATE_LIMIT: "off" }, dir);
    try {
      // Before any sign-in: the server has recorded which key it signs with.
      const owners = await runCli(["owners", "list"], { DATA_DIR: dir, BASE_URL });
      expect(owners.code).toBe(0);
      expect(existsSync(join(dir, "jwt-secret"))).toBe(false); // a secret of its own would be taken for the server's next time
      const refused = await runCli(["mcp"], { DATA_DIR: dir, BASE_URL });
      expect(refused.code).toBe(1);
      expect(refused.stderr).toContain("give it the same JWT_SECRET as the server");
      expect(refused.stderr).toMatch(/the server signs with key id [0-9a-f]{16}/);
      expect(existsSync(join(dir, "jwt-secret"))).toBe(false); // refused before making one
      // A jwt-secret file some other run left (not the server's) is refused, naming the server's key id.
      await Bun.write(join(dir, "jwt-secret"), "t".repeat(48));
      const other = await runCli(["mcp"], { DATA_DIR: dir, BASE_URL });
      expect({ code: other.code, said: other.stderr.includes("the server signs sessions with another JWT secret (key id ") }).toEqual({ code: 1, said: true });
      expect(other.stderr).not.toContain(jwtSecret);
      // With the server's secret it serves (and ends at once here: its stdin is empty).
      expect((await runCli(["mcp"], { DATA_DIR: dir, BASE_URL, JWT_SECRET: jwtSecret })).code).toBe(0);
      // A server of a version that recorded no key: live sessions in the database are the sign, when mcp would make its own secret.
      await signIn(server.url, newWallet());
      rmSync(join(dir, "jwt-secret"));
      const db = openServerDatabase(dir);
      db.run("DELETE FROM jwt_key_in_use");
      db.close();
      const unrecorded = await runCli(["mcp"], { DATA_DIR: dir, BASE_URL });
      expect({ code: unrecorded.code, said: unrecorded.stderr.includes("give it the same JWT_SECRET as the server") }).toEqual({ code: 1, said: true });
      expect(existsSync(join(dir, "jwt-secret"))).toBe(false);
      // A command that signs nothing still runs beside those live sessions (operations.md: the commands work
      // beside a running server), and writes no secret.
      // config.ts resolveSecrets(): `jwtMissing && !jwtThisRunOnly ? signedByAnother()` → `jwtMissing ? signedByAnother()`
      const beside = await runCli(["owners", "list"], { DATA_DIR: dir, BASE_URL });
      expect({ code: beside.code, stderr: beside.stderr }).toEqual({ code: 0, stderr: "" });
      expect(existsSync(join(dir, "jwt-secret"))).toBe(false);
    } finally {
      await server.dispose();
    }
  }, 60_000);

  test("beside a server under another BASE_URL (its PORT not given to mcp): mcp is refused, naming the server's", async () => {
    const dir = tempDir();
    const server = await startTestServer({ PORT: "0" }, dir); // no BASE_URL: it comes from HOST and the port listened on
    try {
      const port = new URL(server.url).port;
      // The server records its issuer with the first batch of writes after it listens.
      let issuer: unknown = null;
      for (let i = 0; i < 50 && issuer === null; i++) {
        const db = openServerDatabase(dir);
        issuer = (db.query("SELECT issuer FROM jwt_key_in_use").get() as { issuer: string | null } | null)?.issuer ?? null;
        db.close();
        if (issuer === null) await Bun.sleep(100);
      }
      expect(issuer).toBe(`http://127.0.0.1:${port}`);
      const withoutPort = await runCli(["mcp"], { DATA_DIR: dir, HOST: "127.0.0.1" });
      expect(withoutPort.code).toBe(1);
      expect(withoutPort.stderr).toContain(`the server signs sessions for BASE_URL http://127.0.0.1:${port}, this command for http://127.0.0.1:3000: set BASE_URL=http://127.0.0.1:${port}`);
      const otherBase = await runCli(["mcp"], { DATA_DIR: dir, BASE_URL });
      expect({ code: otherBase.code, said: otherBase.stderr.includes(`this command for ${BASE_URL}:`) }).toEqual({ code: 1, said: true });
      // An MCP host sees the refusal as the answer to its initialize, not only "Connection closed".
      const host = new Client({ name: "host", version: "1" });
      const refusedConnect = await host
        .connect(new StdioClientTransport({ command: process.execPath, args: [join(ROOT, "src/main.ts"), "mcp"], env: { PATH: process.env.PATH ?? "", HOME: process.env.HOME ?? "/tmp", DATA_DIR: dir, BASE_URL }, stderr: "pipe" }))
        .then(() => "connected", (err: Error) => err.message);
      await host.close();
      expect(refusedConnect).toContain(`walletgate: the server signs sessions for BASE_URL http://127.0.0.1:${port}, this command for ${BASE_URL}: set BASE_URL=`);
      // Given the server's (as BASE_URL, or as the same HOST and PORT) it serves, and ends at once here: its stdin is empty.
      expect((await runCli(["mcp"], { DATA_DIR: dir, BASE_URL: `http://127.0.0.1:${port}` })).code).toBe(0);
      expect((await runCli(["mcp"], { DATA_DIR: dir, HOST: "127.0.0.1", PORT: port })).code).toBe(0);
      // Recorded by a server of an earlier version (the key id alone): nothing to compare, as before.
      const db = openServerDatabase(dir);
      db.run("UPDATE jwt_key_in_use SET issuer = NULL");
      db.close();
      expect((await runCli(["mcp"], { DATA_DIR: dir, BASE_URL })).code).toBe(0);
    } finally {
      await server.dispose();
    }
  }, 60_000);

  test("refused at start, it answers the host's first request with the refusal (notifications passed over) and exits 1", async () => {
    const proc = Bun.spawn([process.execPath, join(ROOT, "src/main.ts"), "mcp"], {
      env: { PATH: process.env.PATH ?? "", HOME: process.env.HOME ?? "/tmp", DATA_DIR: dataDir, BASE_URL, NETWORK: "moon" },
      stdin: "pipe",
      stdout: "pipe",
      stderr: "pipe",
      timeout: 30_000,
    });
    proc.stdin.write('{"jsonrpc":"2.0","method":"notifications/initialized"}\nnot json\n{"jsonrpc":"2.0","id":7,"method":"initialize","params":{}}\n');
    await proc.stdin.flush();
    const [stdout, stderr, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
    proc.stdin.end();
    expect(code).toBe(1);
    expect(stderr).toContain("NETWORK");
    const answers = stdout.trim().split("\n").map((line) => JSON.parse(line));
    expect(answers).toEqual([{ jsonrpc: "2.0", id: 7, error: { code: -32000, message: `walletgate: ${stderr.trim().replace(/^walletgate: /, "")}` } }]);
    // No host on stdin (a terminal, or input that ends): it exits at once, as before.
    const alone = await runCli(["mcp"], { DATA_DIR: dataDir, BASE_URL, NETWORK: "moon" });
    expect([alone.code, alone.stdout]).toEqual([1, ""]);
  }, 60_000);
});
