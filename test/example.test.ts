// Keeps the README's scripts true: each runs against a real server as written (only its address changed).
import { afterAll, beforeAll, expect, test } from "bun:test";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Keypair } from "@solana/web3.js";
import { startTestServer, type TestServer } from "./helpers/server.ts";
import { call } from "./helpers/wallet.ts";

let server: TestServer;
beforeAll(async () => {
  server = await startTestServer();
});
afterAll(() => server.dispose());

test("examples/sign-in.ts signs in", async () => {
  const proc = Bun.spawn([process.execPath, join(import.meta.dir, "../examples/sign-in.ts"), server.url], { stdout: "pipe" });
  const out = JSON.parse(await new Response(proc.stdout).text());
  expect(await proc.exited).toBe(0);
  expect(out.isNewSession).toBe(true);
  expect((await call(server.url, "/auth/session", { token: out.sessionToken })).status).toBe(200);
});

test("examples/sign-in-keypair.ts signs in as the wallet of a Solana CLI keypair file; a file of another form is refused", async () => {
  const dir = mkdtempSync(join(tmpdir(), "walletgate-keypair-"));
  try {
    const keypair = Keypair.generate();
    const file = join(dir, "id.json");
    writeFileSync(file, JSON.stringify(Array.from(keypair.secretKey)), { mode: 0o600 }); // as solana-keygen writes it
    const run = async (path: string, url = server.url) => {
      const proc = Bun.spawn([process.execPath, join(import.meta.dir, "../examples/sign-in-keypair.ts"), path, url], { stdout: "pipe", stderr: "pipe" });
      const [code, out, err] = await Promise.all([proc.exited, new Response(proc.stdout).text(), new Response(proc.stderr).text()]);
      return { code, out, err };
    };
    const signedIn = await run(file);
    expect(signedIn.code).toBe(0);
    const out = JSON.parse(signedIn.out);
    expect(out.walletAddress).toBe(keypair.publicKey.toBase58());
    expect((await call(server.url, "/auth/session", { token: out.sessionToken })).body).toMatchObject({ walletAddress: keypair.publicKey.toBase58() });
    // A refusal is exit 1 with the answer on stderr, nothing on stdout (a script's TOKEN=$(…) stays empty).
    const refusedByServer = await run(file, `${server.url}/nowhere`);
    expect({ code: refusedByServer.code, out: refusedByServer.out }).toEqual({ code: 1, out: "" });
    expect(refusedByServer.err).toStartWith("404: {");
    writeFileSync(file, JSON.stringify(Array.from(keypair.secretKey.subarray(0, 32))));
    const refused = await run(file);
    expect(refused.code).not.toBe(0);
    expect(refused.err).toContain("is not a Solana keypair file (a JSON array of 64 bytes)");
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("examples/testing/: an app's bun test suite starts walletgate, signs in, sells, pays headless and verifies its webhooks", async () => {
  // As an app runs it: from its own directory (no bunfig of this checkout), walletgate named by WALLETGATE_BIN.
  const proc = Bun.spawn([process.execPath, "test", "./shop.test.ts"], {
    cwd: join(import.meta.dir, "../examples/testing"),
    env: { PATH: process.env.PATH ?? "", HOME: process.env.HOME ?? "/tmp", WALLETGATE_BIN: join(import.meta.dir, "../src/main.ts") },
    stdout: "pipe",
    stderr: "pipe",
  });
  const [code, out, err] = await Promise.all([proc.exited, new Response(proc.stdout).text(), new Response(proc.stderr).text()]);
  expect({ code, summary: (out + err).match(/^ *\d+ (pass|fail)$/gm)?.map((l) => l.trim()) }).toEqual({ code: 0, summary: ["2 pass", "0 fail"] });
}, 60_000);

/** The README's first ```ts block after `heading`, with the server's address in place of the default one. */
function readmeBlock(heading: string): string {
  const readme = readFileSync(join(import.meta.dir, "../README.md"), "utf8");
  const from = readme.indexOf(heading);
  expect(from).toBeGreaterThan(-1);
  const block = /```ts\n([\s\S]*?)```/.exec(readme.slice(from))![1]!;
  return block.replaceAll("http://127.0.0.1:3000", server.url);
}

test("the README's MCP SDK client prints the balances and exits, with a token and without one", async () => {
  const dir = mkdtempSync(join(import.meta.dir, "..", ".readme-example-"));
  try {
    const script = join(dir, "client.ts"); // inside the checkout, so that it finds the SDK in node_modules
    writeFileSync(script, readmeBlock("**Over HTTP (Streamable HTTP at `/mcp`)**"));
    const created = await call(server.url, "/mcp", { method: "POST", body: { tool: "wallet_create", params: {} } });
    const token = created.body.data.sessionToken as string;
    const liveSessions = async () => Number(/^walletgate_mcp_sessions_live (\d+)$/m.exec(await (await fetch(`${server.url}/metrics`)).text())![1]);
    for (const env of [{ WALLETGATE_TOKEN: token }, {}]) {
      const before = await liveSessions();
      const proc = Bun.spawn([process.execPath, script], { stdout: "pipe", stderr: "pipe", env: { PATH: process.env.PATH ?? "", ...env } });
      const timer = setTimeout(() => proc.kill(9), 15_000); // it hung until this before it closed its client
      const [code, out] = await Promise.all([proc.exited, new Response(proc.stdout).text()]);
      clearTimeout(timer);
      expect(code).toBe(0);
      // With a token: that wallet's balances. Without: no "Bearer undefined" refused as TOKEN_INVALID (this
      // client may still be bound by fingerprint restore, as it shares the wallet_create's IP and User-Agent).
      expect(out).toContain("success:");
      expect(out).not.toContain("TOKEN_INVALID");
      if (env.WALLETGATE_TOKEN !== undefined) expect(out).toContain(created.body.data.address);
      expect(await liveSessions()).toBe(before); // it ended its MCP session (DELETE /mcp), not left it to time out
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}, 60_000);
