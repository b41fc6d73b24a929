// The embedded ledger under kill -9 and from the CLI: no acknowledged transfer is lost, every account
// stays consistent (held + fees burned = genesis; token accounts sum to each mint's supply).
import { afterAll, describe, expect, test } from "bun:test";
import { Database } from "bun:sqlite";
import { Keypair } from "@solana/web3.js";
import { rmSync } from "node:fs";
import { join } from "node:path";
import { migrate } from "../src/db/migrate.ts";
import { openDatabase } from "../src/db/open.ts";
import { manualClock } from "../src/lib/clock.ts";
import { cryptoRandom } from "../src/lib/ids.ts";
import { inlineVerifier } from "../src/lib/verifier.ts";
import { createEmbeddedLedger, embeddedLedgerTotals } from "../src/ledger/embedded/ledger.ts";
import { runCli, startTestServer, tempDir } from "./helpers/server.ts";

const dirs: string[] = [];
afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

async function openLedger(dataDir: string) {
  const db = openDatabase(join(dataDir, "walletgate.db"));
  migrate(db.sqlite, Date.now());
  const ledger = await createEmbeddedLedger({
    config: { serviceToken: { symbol: "wgt", decimals: 6, mint: null } },
    db,
    clock: manualClock(Date.now()),
    random: cryptoRandom,
    verifier: inlineVerifier,
  });
  return { db, ledger };
}

describe("embedded ledger durability", () => {
  test("kill -9 during a burst of transfers: consistent accounts, every acknowledged transfer kept", async () => {
    const dataDir = tempDir();
    dirs.push(dataDir);
    const proc = Bun.spawn([process.execPath, join(import.meta.dir, "helpers/transfer-burst.ts"), dataDir], { stdout: "pipe", stderr: "pipe" });
    const acked: string[] = [];
    let out = "";
    const decoder = new TextDecoder();
    const reader = (proc.stdout as ReadableStream<Uint8Array>).getReader();
    try {
      while (acked.length < 300) {
        const { value, done } = await reader.read();
        if (done) throw new Error(`burst process ended early:\n${out}\n${await new Response(proc.stderr as ReadableStream).text()}`);
        out += decoder.decode(value);
        const lines = out.split("\n");
        out = lines.pop()!;
        for (const line of lines) if (line.startsWith("ack ")) acked.push(line.slice(4));
      }
    } finally {
      proc.kill(9);
      await proc.exited;
    }
    expect(proc.signalCode).toBe("SIGKILL");

    const raw = new Database(join(dataDir, "walletgate.db"));
    expect(raw.query("PRAGMA integrity_check").get()).toEqual({ integrity_check: "ok" });
    raw.close();
    const { db, ledger } = await openLedger(dataDir);
    try {
      const totals = await embeddedLedgerTotals(db);
      expect(totals.lamports + totals.fees).toBe(totals.genesisLamports);
      for (const [mint, supply] of totals.supplies) expect(totals.tokenAmounts.get(mint)).toBe(supply);
      for (const signature of acked) expect((await ledger.getTransaction(signature))?.status).toBe("confirmed");
    } finally {
      db.close();
    }
  }, 60_000);

  test("walletgate ledger airdrop and ledger tokens, also beside a running server on the same DATA_DIR", async () => {
    const server = await startTestServer();
    dirs.push(server.dataDir);
    try {
      const to = Keypair.generate().publicKey.toBase58();
      const env = { DATA_DIR: server.dataDir };
      const plain = await runCli(["ledger", "airdrop", "--to", to, "--sol", "1.5", "--usdc", "20"], env);
      expect(plain.code).toBe(0);
      expect(plain.stdout.trim().split("\n")).toHaveLength(2);
      const json = await runCli(["ledger", "airdrop", "--to", to, "--token", "3", "--json"], env);
      expect(json.code).toBe(0);
      expect(JSON.parse(json.stdout)).toEqual({ to, signatures: [expect.any(String)] });

      expect((await runCli(["ledger", "airdrop", "--to", to], env)).code).toBe(2); // no amount
      expect((await runCli(["ledger", "airdrop", "--sol", "1"], env)).code).toBe(2); // no --to
      expect((await runCli(["ledger", "drain", "--to", to], env)).code).toBe(2);
      expect((await runCli(["ledger", "airdrop", "--to", to, "--sol", "1.0000000001"], env)).code).toBe(2);
      const tooMuch = await runCli(["ledger", "airdrop", "--to", to, "--sol", "3"], env);
      expect([tooMuch.code, tooMuch.stderr]).toEqual([2, expect.stringContaining("at most 2 SOL")]); // a bad amount, as 1.0000000001 above
      const badAddress = await runCli(["ledger", "airdrop", "--to", "not-base58!", "--sol", "1"], env);
      expect([badAddress.code, badAddress.stderr]).toEqual([2, expect.stringContaining("base58")]);
      const devnet = await runCli(["ledger", "airdrop", "--to", to, "--sol", "1"], { ...env, NETWORK: "devnet" });
      expect([devnet.code, devnet.stderr]).toEqual([1, expect.stringContaining("localnet")]);

      // The mints the genesis made, as `ledger tokens` tells them, plain and as JSON.
      const tokensJson = await runCli(["ledger", "tokens", "--json"], env);
      expect(tokensJson.code).toBe(0);
      const listed = JSON.parse(tokensJson.stdout) as { network: string; tokens: { token: string; kind: string; decimals: number; mint: string | null }[] };
      expect(listed).toEqual({
        network: "localnet",
        tokens: [
          { token: "sol", kind: "native", decimals: 9, mint: null },
          { token: "usdc", kind: "spl", decimals: 6, mint: expect.any(String) },
          { token: "wgt", kind: "spl", decimals: 6, mint: expect.any(String) },
        ],
      });
      const tokensPlain = await runCli(["ledger", "tokens"], env);
      expect(tokensPlain.code).toBe(0);
      expect(tokensPlain.stdout.split("\n").filter(Boolean).map((line) => line.split(/\s+/))).toEqual(
        listed.tokens.map((t) => [t.token, String(t.decimals), t.mint ?? "-"]),
      );
      const tokensMisused = await runCli(["ledger", "tokens", "--usdc", "1"], env);
      expect([tokensMisused.code, tokensMisused.stderr]).toEqual([2, expect.stringContaining("--usdc belongs to airdrop")]);

      const ready = await fetch(`${server.url}/readyz`);
      expect(await ready.json()).toEqual({ status: "ready", checks: { database: "ok", ledger: "ok" } });
      await server.stop();
      const { db, ledger } = await openLedger(server.dataDir);
      try {
        expect(await ledger.getBalances(to)).toEqual({ sol: 1_500_000_000n, usdc: 20_000_000n, wgt: 3_000_000n });
        expect((await ledger.tokens()).map((t) => t.mint)).toEqual(listed.tokens.map((t) => t.mint));
      } finally {
        db.close();
      }
    } finally {
      await server.dispose();
    }
  }, 60_000);
});
