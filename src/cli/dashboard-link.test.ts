// `walletgate dashboard-link` as an operator runs it: a real process on a temp DATA_DIR, its output and
// exit codes, and the printed link redeemed against that same database.
import { afterAll, describe, expect, test } from "bun:test";
import { rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { Keypair } from "@solana/web3.js";
import { runCli, startTestServer, tempDir } from "../../test/helpers/server.ts";
import { ISO_MS } from "../../test/helpers/time.ts";
import { authenticateToken } from "../auth/sessions.ts";
import { loadConfig, resolveSecrets } from "../config.ts";
import { redeemDashboardLink } from "../dashboard/links.ts";
import { freshDatabaseImage } from "../db/fresh.ts";
import { openDatabase } from "../db/open.ts";
import { createDeps } from "../deps.ts";
import { systemClock } from "../lib/clock.ts";
import { encodeBase58 } from "../lib/encoding.ts";
import { cryptoRandom } from "../lib/ids.ts";
import { createLogger } from "../log.ts";

const BASE_URL = "https://gate.example.test";
const dirs: string[] = [];
afterAll(() => dirs.forEach((d) => rmSync(d, { recursive: true, force: true })));

/** A fresh DATA_DIR holding a new database (as a first `serve` leaves it), and a helper to write files (keypairs) in it. */
function dataDir(): { dir: string; env: Record<string, string>; file(name: string, text: string): string } {
  const dir = tempDir();
  dirs.push(dir);
  writeFileSync(join(dir, "walletgate.db"), freshDatabaseImage(), { mode: 0o600 });
  return {
    dir,
    env: { DATA_DIR: dir, BASE_URL },
    file(name, text) {
      const path = join(dir, name);
      writeFileSync(path, text, { mode: 0o600 });
      return path;
    },
  };
}

const keypairText = (secretKey: Uint8Array) => JSON.stringify(Array.from(secretKey));

/** Neither the JSON array nor the base58 spelling of the secret key appears in `text`. */
function expectNoSecret(text: string, secretKey: Uint8Array): void {
  expect(text.includes(keypairText(secretKey))).toBe(false);
  expect(text.includes(Array.from(secretKey.subarray(0, 8)).join(","))).toBe(false);
  expect(text.includes(encodeBase58(secretKey))).toBe(false);
  expect(text.includes(encodeBase58(secretKey.subarray(0, 32)))).toBe(false);
}

describe("walletgate dashboard-link", () => {
  test("--json prints {url, walletAddress, expiresAt}; the link signs the wallet in against the same DATA_DIR", async () => {
    const d = dataDir();
    const keypair = Keypair.generate();
    const before = Date.now();
    const r = await runCli(["dashboard-link", "--keypair", d.file("id.json", keypairText(keypair.secretKey)), "--json"], d.env);
    expect(r.stderr).toBe("");
    expect(r.code).toBe(0);
    expect(r.stdout.endsWith("}\n")).toBe(true);
    const out = JSON.parse(r.stdout) as { url: string; walletAddress: string; expiresAt: string };
    expect(Object.keys(out).sort()).toEqual(["expiresAt", "url", "walletAddress"]);
    expect(out.walletAddress).toBe(keypair.publicKey.toBase58());
    expect(out.url).toMatch(/^https:\/\/gate\.example\.test\/dashboard#link=[1-9A-HJ-NP-Za-km-z]{32,44}$/);
    expect(out.expiresAt).toMatch(ISO_MS);
    const expiresAt = Date.parse(out.expiresAt);
    expect(expiresAt).toBeGreaterThanOrEqual(before + 600_000);
    expect(expiresAt).toBeLessThanOrEqual(Date.now() + 600_000);
    expectNoSecret(r.stdout + r.stderr, keypair.secretKey);

    // The printed code is redeemable once, by a server on the same database and secrets.
    const config = loadConfig({ DATA_DIR: d.dir, BASE_URL, LOG_LEVEL: "silent" });
    const db = openDatabase(config.databasePath);
    try {
      const deps = await createDeps({
        config,
        secrets: resolveSecrets(config),
        baseUrl: BASE_URL,
        db,
        clock: systemClock,
        random: cryptoRandom,
        log: createLogger("silent", "json", () => {}),
      });
      const code = out.url.split("#link=")[1]!;
      const client = { ip: "198.51.100.1", userAgent: "browser" };
      const session = await redeemDashboardLink(deps, code, client);
      expect((await authenticateToken(deps, session.token)).walletAddress).toBe(out.walletAddress);
      await expect(redeemDashboardLink(deps, code, client)).rejects.toMatchObject({ code: "NONCE_USED" });
      await deps.ledger.stop();
    } finally {
      db.close();
    }
  });

  test("without --json, the URL alone on stdout", async () => {
    const d = dataDir();
    const keypair = Keypair.generate();
    const r = await runCli(["dashboard-link", `--keypair=${d.file("id.json", keypairText(keypair.secretKey))}`], d.env);
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/^https:\/\/gate\.example\.test\/dashboard#link=[1-9A-HJ-NP-Za-km-z]{32,44}\n$/);
    expect(r.stderr).toBe("");
  });

  test("without BASE_URL, the link names the address the server recorded it serves at (PORT=0 included), not HOST and PORT's default", async () => {
    const d = dataDir();
    const server = await startTestServer({}, d.dir); // PORT=0: its address is known only once it listens
    try {
      const keypair = Keypair.generate();
      const r = await runCli(["dashboard-link", "--keypair", d.file("id.json", keypairText(keypair.secretKey))], { DATA_DIR: d.dir });
      expect([r.code, r.stdout]).toEqual([0, expect.stringMatching(/#link=/)]);
      expect(r.stdout).toStartWith(`${server.url}/dashboard#link=`);
      // BASE_URL, when given, is the link's address still.
      const given = await runCli(["dashboard-link", "--keypair", join(d.dir, "id.json")], d.env);
      expect(given.stdout).toStartWith(`${BASE_URL}/dashboard#link=`);
    } finally {
      await server.dispose();
    }
  });

  test("a keypair file whose public half is another wallet's exits 1, printing no link and no secret", async () => {
    const d = dataDir();
    const secretKey = Keypair.generate().secretKey;
    const forged = Uint8Array.from(secretKey);
    forged.set(Keypair.generate().publicKey.toBytes(), 32);
    const r = await runCli(["dashboard-link", "--keypair", d.file("forged.json", keypairText(forged)), "--json"], d.env);
    expect(r.code).toBe(1);
    expect(r.stdout).toBe("");
    expect(r.stderr).toContain("its public key is not the one of its secret key");
    expectNoSecret(r.stderr, forged);
  });

  test("a keypair file that cannot be read exits 1", async () => {
    const d = dataDir();
    const r = await runCli(["dashboard-link", "--keypair", join(d.dir, "missing.json")], d.env);
    expect(r.code).toBe(1);
    expect(r.stdout).toBe("");
    expect(r.stderr).toContain("cannot read keypair file");
    expect(r.stderr).toContain("no such file");
  });

  test("usage mistakes and files of another shape exit 2, quoting nothing of the file", async () => {
    const d = dataDir();
    const secretKey = Keypair.generate().secretKey;
    const good = d.file("id.json", keypairText(secretKey));
    const cases: [string[], string][] = [
      [["dashboard-link"], "--keypair <file> is required"],
      [["dashboard-link", "--keypair"], "--keypair"],
      [["dashboard-link", "--keypair", good, "extra"], 'unexpected argument "extra"'],
      [["dashboard-link", "--keypair", good, "--frobnicate"], "frobnicate"],
      [["dashboard-link", "--keypair", d.file("b58.txt", encodeBase58(secretKey))], "is not a Solana keypair file"],
      [["dashboard-link", "--keypair", d.file("short.json", JSON.stringify(Array.from(secretKey.subarray(0, 63))))], "is not a Solana keypair file"],
      [["dashboard-link", "--keypair", d.file("range.json", JSON.stringify([...Array.from(secretKey.subarray(0, 63)), 256]))], "is not a Solana keypair file"],
      [["dashboard-link", "--keypair", d.file("float.json", JSON.stringify([...Array.from(secretKey.subarray(0, 63)), 1.5]))], "is not a Solana keypair file"],
      [["dashboard-link", "--keypair", d.file("object.json", JSON.stringify({ secretKey: Array.from(secretKey) }))], "is not a Solana keypair file"],
      [["dashboard-link", "--keypair", d.file("broken.json", keypairText(secretKey).slice(0, -1))], "is not a Solana keypair file"],
    ];
    for (const [args, message] of cases) {
      const r = await runCli(args, d.env);
      expect({ args, code: r.code, stdout: r.stdout }).toEqual({ args, code: 2, stdout: "" });
      expect(r.stderr).toContain(message);
      expectNoSecret(r.stderr, secretKey);
    }
  });
});
