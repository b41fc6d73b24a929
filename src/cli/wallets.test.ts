// `walletgate wallets export` in-process against a real DATA_DIR: the key on stdout, the warning on stderr.
import { afterAll, describe, expect, spyOn, test } from "bun:test";
import { rmSync } from "node:fs";
import { Keypair } from "@solana/web3.js";
import { tempDir } from "../../test/helpers/server.ts";
import { UsageError, loadConfig, resolveSecrets, type Config } from "../config.ts";
import { openDatabase } from "../db/open.ts";
import { migrate } from "../db/migrate.ts";
import { createDeps } from "../deps.ts";
import { manualClock } from "../lib/clock.ts";
import { decodeBase58 } from "../lib/encoding.ts";
import { cryptoRandom } from "../lib/ids.ts";
import { createLogger } from "../log.ts";
import { createCustodialWallet } from "../wallets/custody.ts";
import { walletsCommand } from "./wallets.ts";

const dirs: string[] = [];
afterAll(() => dirs.forEach((d) => rmSync(d, { recursive: true, force: true })));

function configIn(dir: string, env: Record<string, string> = {}): Config {
  return loadConfig({ DATA_DIR: dir, LOG_LEVEL: "silent", LOG_FORMAT: "json", ...env });
}

/** A DATA_DIR holding one custodial wallet, made through the domain function on the same database file. */
async function dataDirWithWallet(): Promise<{ config: Config; address: string }> {
  const dir = tempDir();
  dirs.push(dir);
  const config = configIn(dir);
  const clock = manualClock();
  const db = openDatabase(config.databasePath);
  try {
    migrate(db.sqlite, clock.now());
    const deps = await createDeps({
      config,
      secrets: resolveSecrets(config),
      baseUrl: "http://walletgate.test",
      db,
      clock,
      random: cryptoRandom,
      log: createLogger("silent", "json", () => {}),
    });
    return { config, address: (await createCustodialWallet(deps)).address };
  } finally {
    db.close();
  }
}

/** Runs the command with stdout and stderr captured. */
async function run(config: Config, args: string[]): Promise<{ code: number; stdout: string; stderr: string; order: string[] }> {
  let stdout = "";
  let stderr = "";
  const order: string[] = [];
  const out = spyOn(process.stdout, "write").mockImplementation((chunk: unknown) => ((stdout += String(chunk)), order.push("stdout"), true));
  const err = spyOn(process.stderr, "write").mockImplementation((chunk: unknown) => ((stderr += String(chunk)), order.push("stderr"), true));
  try {
    const code = await walletsCommand(config, args);
    return { code, stdout, stderr, order };
  } finally {
    out.mockRestore();
    err.mockRestore();
  }
}

describe("walletgate wallets export", () => {
  test("prints the base58 secret key alone on stdout, after a warning on stderr", async () => {
    const { config, address } = await dataDirWithWallet();
    const r = await run(config, ["export", address]);
    expect(r.code).toBe(0);
    expect(r.order).toEqual(["stderr", "stdout"]);
    expect(r.stderr).toContain("PRIVATE KEY");
    expect(r.stderr).toContain("controls the wallet");
    const lines = r.stdout.split("\n");
    expect(lines.length).toBe(2);
    expect(lines[1]).toBe("");
    const secretKey = decodeBase58(lines[0]!)!;
    expect(secretKey.length).toBe(64);
    // fromSecretKey checks that the seed derives the public half.
    expect(Keypair.fromSecretKey(secretKey).publicKey.toBase58()).toBe(address);
    expect(r.stderr).not.toContain(lines[0]!);
  });

  test("--format json prints solana-keygen's array of 64 numbers", async () => {
    const { config, address } = await dataDirWithWallet();
    const r = await run(config, ["export", address, "--format", "json"]);
    expect(r.code).toBe(0);
    expect(r.stderr).toContain("PRIVATE KEY");
    const numbers = JSON.parse(r.stdout) as number[];
    expect(numbers.length).toBe(64);
    expect(numbers.every((n) => Number.isInteger(n) && n >= 0 && n <= 255)).toBe(true);
    expect(Keypair.fromSecretKey(Uint8Array.from(numbers)).publicKey.toBase58()).toBe(address);
    const base58 = await run(config, ["export", "--format=base58", address]);
    expect(Keypair.fromSecretKey(decodeBase58(base58.stdout.trim())!).secretKey).toEqual(Uint8Array.from(numbers));
  });

  test("an address that is not a custodial wallet here exits 1 with nothing on stdout", async () => {
    const { config } = await dataDirWithWallet();
    const unknown = Keypair.generate().publicKey.toBase58();
    const r = await run(config, ["export", unknown]);
    expect(r.code).toBe(1);
    expect(r.stdout).toBe("");
    expect(r.stderr).toContain(`${unknown} is not a custodial wallet`);
    expect(r.stderr).not.toContain("PRIVATE KEY");
  });

  test("under another WALLET_ENCRYPTION_KEY it is refused before anything is opened (main: exit 1, naming the key)", async () => {
    const { config, address } = await dataDirWithWallet();
    const rotated = configIn(config.dataDir, { WALLET_ENCRYPTION_KEY: "11".repeat(32) });
    // The database's sealed data does not open under this key (db/sealed.ts): a ConfigError, which main prints.
    await expect(run(rotated, ["export", address])).rejects.toThrow("encrypted under another wallet encryption key than WALLET_ENCRYPTION_KEY");
  });

  test("bad usage throws UsageError (exit 2 in main) before anything is printed", async () => {
    const { config, address } = await dataDirWithWallet();
    const cases: [string[], RegExp][] = [
      [[], /missing argument/],
      [["export"], /needs the wallet's address/],
      [["frobnicate", address], /unknown wallets command "frobnicate"/],
      [["export", address, "extra"], /unexpected argument "extra"/],
      [["export", "not-an-address"], /not a Solana address/],
      [["export", address, "--format", "hex"], /--format must be base58 or json/],
      [["export", address, "--format"], /--format/],
      [["export", address, "--frobnicate"], /frobnicate/],
    ];
    for (const [args, message] of cases) {
      let stdout = "";
      const out = spyOn(process.stdout, "write").mockImplementation((chunk: unknown) => ((stdout += String(chunk)), true));
      try {
        const attempt = walletsCommand(config, args);
        await expect(attempt).rejects.toBeInstanceOf(UsageError);
        await expect(walletsCommand(config, args)).rejects.toThrow(message);
      } finally {
        out.mockRestore();
      }
      expect(stdout).toBe("");
    }
  });
});
