// The CLI as a user runs it: help, version, exit codes, migrate, refusing bad configuration.
import { afterAll, describe, expect, test } from "bun:test";
import { chmodSync, chownSync, existsSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { Database } from "bun:sqlite";
import { join } from "node:path";
import { randomBytes } from "node:crypto";
import { openServerDatabase, runCli, startTestServer, tempDir } from "../test/helpers/server.ts";
import { call, newWallet } from "../test/helpers/wallet.ts";
import { MIGRATIONS } from "./db/migrations.ts";
import { latestOf } from "./db/migrate.ts";
import { CONFIG_HELP, CONFIG_VARIABLES, flagName, flagsToVars } from "./config.ts";
import pkg from "../package.json" with { type: "json" };

const dirs: string[] = [];
/** Files a test made immutable: released here too, should the test end before its own `finally` ran. */
const immutable: string[] = [];
afterAll(() => {
  for (const file of immutable) Bun.spawnSync(["chattr", "-i", file]);
  dirs.forEach((d) => rmSync(d, { recursive: true, force: true }));
});
const dataDir = () => {
  const d = tempDir();
  dirs.push(d);
  return d;
};

describe("walletgate CLI", () => {
  test("--version and --help exit 0", async () => {
    const v = await runCli(["--version"]);
    // From source there is no build commit; the executable's line is checked by scripts/smoke.ts.
    expect([v.code, v.stdout.trim()]).toEqual([0, `${pkg.version} (schema ${latestOf()}, run from source)`]);
    const h = await runCli(["--help"]);
    expect(h.code).toBe(0);
    expect(h.stdout).toContain("serve");
    expect(h.stdout).toContain("migrate");
    // A command's --help is that command's usage, not the whole program's.
    const keys = await runCli(["keys", "--help"]);
    expect(keys.code).toBe(0);
    expect(keys.stdout).toStartWith("Usage: walletgate keys create --owner <wallet> --label <text> | list --owner <wallet> | revoke <keyId> [--json]\n");
    expect(keys.stdout).not.toContain("restore");
    expect((await runCli(["restore", "-h"])).stdout).toStartWith("Usage: walletgate restore <file> [--json]\n");
    // A command of several forms shows each.
    const ledger = (await runCli(["ledger", "--help"])).stdout;
    expect(ledger).toStartWith("Usage: walletgate ledger airdrop --to <address>");
    expect(ledger).toContain("\n   or: walletgate ledger tokens [--json]\n");
  });

  test("--help names every variable with its default: the others as flags it takes, the secrets as variables only; the README's table names each too", async () => {
    const help = (await runCli(["--help"])).stdout;
    const secrets = ["JWT_SECRET", "JWT_SECRET_PREVIOUS", "WALLET_ENCRYPTION_KEY", "WALLETGATE_TOKEN"];
    const [options, secretPart] = help.split("\nSecrets, in the environment or .env only");
    for (const name of CONFIG_VARIABLES) {
      const flag = `--${flagName(name)}`;
      if (secrets.includes(name)) {
        expect({ name, line: secretPart!.includes(`\n  ${name.padEnd(33)}${CONFIG_HELP[name]}`) }).toEqual({ name, line: true });
        expect(options).not.toContain(flag);
      } else {
        expect({ name, line: options!.includes(`\n  ${flag.padEnd(33)}${CONFIG_HELP[name]}`) }).toEqual({ name, line: true });
        expect(() => flagsToVars([flag, "x"])).not.toThrow(); // a flag --help shows is one walletgate takes
      }
    }
    const readme = readFileSync(join(import.meta.dir, "../README.md"), "utf8");
    const table = readme.slice(readme.indexOf("| variable | default | meaning |"), readme.indexOf("\n\n", readme.indexOf("| variable | default | meaning |")));
    const named = new Set([...table.matchAll(/^\| ([^|]+) \|/gm)].flatMap((m) => [...m[1]!.matchAll(/`([A-Z0-9_]+)`/g)].map((n) => n[1]!)));
    expect(CONFIG_VARIABLES.filter((name) => !named.has(name))).toEqual([]);
  });

  test("an unknown command or option exits 2 with usage", async () => {
    const r = await runCli(["frobnicate"]);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('unknown command "frobnicate"');
    const o = await runCli(["serve", "--frobnicate", "1"]);
    expect(o.code).toBe(2);
    expect(o.stderr).toContain("walletgate: unknown option '--frobnicate'"); // in lower case, as every other message
  });

  test("a command's wrong arguments exit 2 with that command's usage, once", async () => {
    const cases: [string[], string, string][] = [
      [["keys", "frob"], 'unknown keys command "frob"', "Usage: walletgate keys create"],
      [["keys"], "missing argument", "Usage: walletgate keys create"],
      [["owners"], "missing argument", "Usage: walletgate owners list"],
      [["backup"], "missing argument", "Usage: walletgate backup <file>"],
      [["orders", "resolve", "ord_x"], "exactly one of --release and --refund", "Usage: walletgate orders resolve"],
      [["keys", "create", "--owner", "bad", "--label", "x"], "--owner: not a Solana address (not repeated here: it may be a secret key)", "Usage: walletgate keys create"],
      [["ledger", "airdrop", "--to", "bad", "--sol", "1"], "--to: not a Solana address", "Usage: walletgate ledger airdrop"],
      [["wallets", "export", "x"], "the address given is not a Solana address (not repeated here", "Usage: walletgate wallets export"],
      [["wallets", "export", "11111111111111111111111111111112", "--format", "hex"], "--format must be base58 or json", "Usage: walletgate wallets export"],
      // An option given twice: which value was meant is not guessed (the last one used to win silently).
      [["keys", "create", "--owner", "11111111111111111111111111111112", "--owner", "11111111111111111111111111111113", "--label", "x"], "option --owner is given twice", "Usage: walletgate keys create"],
      [["ledger", "airdrop", "--to", "11111111111111111111111111111112", "--to=11111111111111111111111111111113", "--sol", "1"], "option --to is given twice", "Usage: walletgate ledger airdrop"],
    ];
    for (const [args, message, usage] of cases) {
      const r = await runCli(args, { DATA_DIR: dataDir() });
      expect({ args, code: r.code, message: r.stderr.includes(message), usage: r.stderr.split("Usage:").length - 1 }).toEqual({ args, code: 2, message: true, usage: 1 });
      expect(r.stderr).toContain(usage);
      expect(r.stderr).not.toContain("in one executable"); // not the program's usage as well
    }
    // An amount out of the airdrop's bounds is a usage error too, as in keys (judged by the ledger: a database is needed).
    const ledgerDir = dataDir();
    expect((await runCli(["migrate"], { DATA_DIR: ledgerDir })).code).toBe(0);
    const airdrop = await runCli(["ledger", "airdrop", "--to", "11111111111111111111111111111112", "--sol", "3"], { DATA_DIR: ledgerDir });
    expect([airdrop.code, airdrop.stderr.trim()]).toEqual([2, "walletgate: a SOL airdrop is at most 2 SOL"]);
  });

  test("a bad variable exits 1 naming it", async () => {
    const r = await runCli(["serve"], { PORT: "eighty", DATA_DIR: dataDir() });
    expect(r.code).toBe(1);
    expect(r.stderr).toContain("PORT");
  });

  test("a HOST or PORT that cannot be listened on exits 1 naming them, before anything is written to DATA_DIR", async () => {
    const taken = Bun.serve({ port: 0, hostname: "127.0.0.1", fetch: () => new Response("taken") });
    try {
      const cases = [
        { env: { HOST: "127.0.0.1", PORT: String(taken.port) }, says: "the port is in use" },
        { env: { HOST: "192.0.2.1", PORT: "0" }, says: "HOST is not an address of this machine" }, // TEST-NET-1
        { env: { HOST: "not_a_host!", PORT: "0" }, says: "HOST must be" },
      ];
      for (const { env, says } of cases) {
        const dir = join(dataDir(), "data"); // not there yet: start-up would create it
        const r = await runCli(["serve"], { ...env, DATA_DIR: dir });
        expect({ code: r.code, host: r.stderr.includes("HOST"), says: r.stderr.includes(says) }).toEqual({ code: 1, host: true, says: true });
        if (env.PORT !== "0") expect(r.stderr).toContain(`PORT=${env.PORT}`);
        expect(existsSync(dir)).toBe(false); // no secrets generated, no database created
      }
    } finally {
      await taken.stop(true);
    }
  });

  test("a DATA_DIR that cannot hold the database exits 1 naming DATA_DIR, for the server and the commands", async () => {
    const file = join(dataDir(), "a-file");
    writeFileSync(file, "not a directory");
    const cases = [file, join(file, "data")]; // a file; a directory under a file
    if (process.getuid?.() !== 0) {
      const readOnly = dataDir(); // root writes anywhere: only another user sees the mode
      chmodSync(readOnly, 0o555);
      cases.push(readOnly);
    }
    // A sound backup, for restore to get as far as DATA_DIR.
    const source = dataDir();
    expect((await runCli(["migrate"], { DATA_DIR: source })).code).toBe(0);
    const copy = join(dataDir(), "copy.db");
    expect((await runCli(["backup", copy], { DATA_DIR: source })).code).toBe(0);
    for (const dir of cases) {
      for (const args of [["serve"], ["keys", "list", "--owner", newWallet().address], ["migrate"], ["backup", join(dataDir(), "b.db")], ["restore", copy]]) {
        const r = await runCli(args, { PORT: "0", DATA_DIR: dir });
        expect({ args, dir, code: r.code, named: r.stderr.includes(`DATA_DIR ${dir}`) }).toEqual({ args, dir, code: 1, named: true });
      }
    }
    // A backup into a directory that is not there says so, naming it.
    const missing = join(dataDir(), "nodir");
    const r = await runCli(["backup", join(missing, "x.db")], { DATA_DIR: source });
    expect([r.code, r.stderr.trim().split("\n").at(-1)]).toEqual([1, `walletgate: backup failed: ${missing} is not a directory that exists: make it first, or back up elsewhere`]);
  });

  test("a database that is not one, and a secret's file that is a directory, are refused naming them", async () => {
    const dir = dataDir();
    writeFileSync(join(dir, "walletgate.db"), "not a database, but a text file of some length ".repeat(100));
    for (const args of [["serve"], ["migrate"], ["owners", "list"]]) {
      const r = await runCli(args, { PORT: "0", DATA_DIR: dir });
      expect({ args, code: r.code, says: r.stderr.includes(`DATA_DIR ${dir}: ${join(dir, "walletgate.db")} is not a SQLite database`) }).toEqual({ args, code: 1, says: true });
    }
    // A start that cannot use the database generates no secrets beside it (nor does one of a newer version).
    expect(readdirSync(dir).filter((name) => !name.startsWith("walletgate.db"))).toEqual([]);
    const newer = dataDir();
    expect((await runCli(["migrate"], { DATA_DIR: newer })).code).toBe(0);
    const bumped = new Database(join(newer, "walletgate.db"));
    bumped.run("INSERT INTO schema_migrations (version, name, applied_at) VALUES (9999, 'from a newer version', 0)");
    bumped.close();
    const refusedNewer = await runCli(["serve"], { PORT: "0", DATA_DIR: newer });
    expect([refusedNewer.code, refusedNewer.stderr]).toEqual([1, expect.stringContaining("run a newer walletgate")]);
    expect(readdirSync(newer).filter((name) => !name.startsWith("walletgate.db"))).toEqual([]);
    // A damaged one: the root page of a table its start-up reads overwritten.
    const damaged = dataDir();
    expect((await runCli(["migrate"], { DATA_DIR: damaged })).code).toBe(0);
    const file = join(damaged, "walletgate.db");
    const db = new Database(file);
    const { root, size } = db.query("SELECT rootpage AS root, (SELECT page_size FROM pragma_page_size) AS size FROM sqlite_master WHERE name = 'schema_migrations'").get() as {
      root: number;
      size: number;
    };
    db.close();
    const bytes = readFileSync(file);
    bytes.fill(0xff, (root - 1) * size, root * size);
    writeFileSync(file, bytes);
    for (const args of [["serve"], ["migrate"], ["owners", "list"]]) {
      const r = await runCli(args, { PORT: "0", DATA_DIR: damaged });
      expect({ args, code: r.code, says: r.stderr.includes(`DATA_DIR ${damaged}: the database ${file} is damaged`) }).toEqual({ args, code: 1, says: true });
    }
    const other = dataDir();
    mkdirSync(join(other, "jwt-secret"), { mode: 0o755 });
    const r = await runCli(["serve"], { PORT: "0", DATA_DIR: other });
    expect([r.code, r.stderr.includes(`${join(other, "jwt-secret")} is not a file`)]).toEqual([1, true]);
    expect(statSync(join(other, "jwt-secret")).mode & 0o777).toBe(0o755); // left as it was
  });

  test("a database file this user cannot write is refused at start, naming it, by the server and the commands", async () => {
    const dir = dataDir();
    expect((await runCli(["migrate"], { DATA_DIR: dir })).code).toBe(0);
    const file = join(dir, "walletgate.db");
    // Root writes whatever the mode says: for root the file is made immutable instead (ext4 and most Linux
    // filesystems; where that is not possible, as in some containers, there is nothing to refuse).
    const asRoot = process.getuid?.() === 0;
    if (asRoot) {
      if (Bun.spawnSync(["chattr", "+i", file]).exitCode !== 0) return;
      immutable.push(file);
    } else {
      chmodSync(file, 0o444);
    }
    try {
      for (const args of [["serve"], ["keys", "list", "--owner", newWallet().address], ["migrate"]]) {
        const r = await runCli(args, { PORT: "0", DATA_DIR: dir });
        expect({ args, code: r.code, says: r.stderr.includes(`DATA_DIR ${dir} cannot be written by this user: permission denied (${file})`) }).toEqual({
          args,
          code: 1,
          says: true,
        });
      }
    } finally {
      if (asRoot) Bun.spawnSync(["chattr", "-i", file]);
      else chmodSync(file, 0o600);
    }
  });

  test("backup only reads: it copies a database this user cannot write while the server runs", async () => {
    if (process.getuid?.() !== 0) return; // the file is made immutable, which takes root (another user would need a group that reads)
    const server = await startTestServer();
    const file = join(server.dataDir, "walletgate.db");
    try {
      if (Bun.spawnSync(["chattr", "+i", file]).exitCode !== 0) return; // a filesystem without the attribute
      immutable.push(file);
      const copy = join(dataDir(), "copy.db");
      const r = await runCli(["backup", copy], { DATA_DIR: server.dataDir });
      expect(r.code).toBe(0);
      expect(existsSync(copy)).toBe(true);
      expect((await runCli(["owners", "list"], { DATA_DIR: server.dataDir })).code).toBe(1); // a command that writes is refused
    } finally {
      Bun.spawnSync(["chattr", "-i", file]);
      await server.dispose();
    }
  }, 60_000);

  test("SERVICE_TOKEN_DECIMALS other than the embedded ledger's service token was made with: serve and the commands exit 1 naming it", async () => {
    const dir = dataDir();
    expect((await runCli(["migrate"], { DATA_DIR: dir })).code).toBe(0);
    const made = await runCli(["ledger", "airdrop", "--to", newWallet().address, "--token", "1"], { DATA_DIR: dir }); // genesis, 6 decimals
    expect(made.code).toBe(0);
    for (const args of [["serve"], ["owners", "list"]]) {
      const r = await runCli(args, { DATA_DIR: dir, PORT: "0", SERVICE_TOKEN_DECIMALS: "0" });
      expect({ args, code: r.code }).toEqual({ args, code: 1 });
      expect(r.stderr).toContain("SERVICE_TOKEN_DECIMALS is 0, but this database's embedded ledger made its service token with 6 decimals");
    }
    expect((await runCli(["owners", "list"], { DATA_DIR: dir, SERVICE_TOKEN_DECIMALS: "6" })).code).toBe(0);
  });

  test("a database is served on one NETWORK: serve records it, and serve and the commands under another exit 1 naming both", async () => {
    const dir = dataDir();
    const devnet = { DATA_DIR: dir, PORT: "0", NETWORK: "devnet", SOLANA_RPC_URL: "http://127.0.0.1:9/" };
    expect((await runCli(["migrate"], { DATA_DIR: dir })).code).toBe(0);
    const recorded = () => {
      const sqlite = new Database(join(dir, "walletgate.db"));
      try {
        return sqlite.query("SELECT network FROM network_in_use").all();
      } finally {
        sqlite.close();
      }
    };
    // A command records nothing (an operator's shell may lack the server's NETWORK), nor refuses without evidence.
    expect((await runCli(["owners", "list"], devnet)).code).toBe(0);
    expect(recorded()).toEqual([]);
    const server = await startTestServer({}, dir); // localnet
    await server.stop();
    expect(recorded()).toEqual([{ network: "localnet" }]);
    for (const args of [["serve"], ["owners", "list"]]) {
      const r = await runCli(args, devnet);
      expect({ args, code: r.code }).toEqual({ args, code: 1 });
      expect(r.stderr).toContain("this database is served on NETWORK=localnet, not devnet");
      expect(r.stderr).toContain("DATA_DIR=./data-devnet");
    }
    expect(recorded()).toEqual([{ network: "localnet" }]);
    expect((await runCli(["owners", "list"], { DATA_DIR: dir })).code).toBe(0);
  });

  test("a shell without the server's settings (its NETWORK and its key in the environment) is told the network, not that the key is lost", async () => {
    const dir = dataDir();
    const key = randomBytes(32).toString("hex");
    const server = await startTestServer({ NETWORK: "devnet", SOLANA_RPC_URL: "http://127.0.0.1:9/", WALLET_ENCRYPTION_KEY: key }, dir);
    await server.stop();
    expect(existsSync(join(dir, "wallet-encryption-key"))).toBe(false); // the key lives in the service's environment
    for (const args of [["serve"], ["owners", "list"]]) {
      const r = await runCli(args, { DATA_DIR: dir, PORT: "0" });
      expect({ args, code: r.code }).toEqual({ args, code: 1 });
      expect(r.stderr).toContain("this database is served on NETWORK=devnet, not localnet");
      expect(r.stderr).not.toContain("wallet-encryption-key");
    }
    // With the network but not the key, the key is what is missing.
    const keyless = await runCli(["owners", "list"], { DATA_DIR: dir, NETWORK: "devnet", SOLANA_RPC_URL: "http://127.0.0.1:9/" });
    expect([keyless.code, keyless.stderr]).toEqual([1, expect.stringContaining("wallet-encryption-key is missing")]);
    expect(existsSync(join(dir, "wallet-encryption-key"))).toBe(false); // and none was made
    // The same after an upgrade, with the last migration still to apply (the network's record is older).
    const sqlite = new Database(join(dir, "walletgate.db"));
    sqlite.run("DROP INDEX checkouts_wallet_idempotency_key");
    sqlite.run("ALTER TABLE checkouts DROP COLUMN idempotency_key");
    sqlite.run("DELETE FROM schema_migrations WHERE version = 45");
    sqlite.close();
    const upgraded = await runCli(["serve"], { DATA_DIR: dir, PORT: "0" });
    expect([upgraded.code, upgraded.stderr]).toEqual([1, expect.stringContaining("this database is served on NETWORK=devnet, not localnet")]);
  });

  test("npm start stops on a SIGTERM sent to npm (a service manager stops the process it started): the server shuts down", async () => {
    const dir = dataDir();
    const npm = Bun.spawn(["npm", "start", "--silent"], {
      cwd: join(import.meta.dir, ".."),
      env: { PATH: process.env.PATH ?? "", HOME: process.env.HOME ?? "/tmp", PORT: "0", HOST: "127.0.0.1", DATA_DIR: dir, LOG_FORMAT: "json" },
      stdout: "pipe",
      stderr: "pipe",
    });
    let out = "";
    const reader = npm.stdout.getReader();
    const readUntil = async (text: string, ms: number) => {
      const until = Date.now() + ms;
      while (!out.includes(text) && Date.now() < until) {
        const chunk = await Promise.race([reader.read(), Bun.sleep(until - Date.now()).then(() => null)]);
        if (chunk === null || chunk.done) break;
        out += new TextDecoder().decode(chunk.value);
      }
      return out.includes(text);
    };
    const server = () =>
      readdirSync("/proc")
        .filter((pid) => /^\d+$/.test(pid))
        .filter((pid) => {
          try {
            return readFileSync(`/proc/${pid}/cmdline`, "utf8").includes("src/main.ts") && readFileSync(`/proc/${pid}/environ`, "utf8").includes(`DATA_DIR=${dir}\0`);
          } catch {
            return false;
          }
        });
    try {
      expect(await readUntil('"msg":"listening"', 30_000)).toBe(true);
      npm.kill("SIGTERM");
      await npm.exited;
      expect(await readUntil('"msg":"stopped"', 10_000)).toBe(true);
      expect(out).toContain('"signal":"SIGTERM"');
      expect(server()).toEqual([]);
    } finally {
      for (const pid of server()) process.kill(Number(pid), "SIGKILL");
      npm.kill("SIGKILL");
    }
  }, 60_000);

  test("migrate creates the schema, then has nothing to do", async () => {
    const dir = dataDir();
    const first = await runCli(["migrate"], { DATA_DIR: dir });
    expect(first.code).toBe(0);
    expect(first.stdout).toContain("applied 1");
    expect(first.stderr).toStartWith("applying migrations 1, 2, 3"); // said before the work, which may take long
    const second = await runCli(["migrate", "--data-dir", dir]);
    expect(second.code).toBe(0);
    expect(second.stdout).toContain("nothing to apply");
    expect(second.stderr).toBe("");
  });

  test.skipIf(process.getuid?.() !== 0)("run by root in a DATA_DIR another user owns, migrate and serve make every file that user's (its server must open them)", async () => {
    const ownersOf = (dir: string) => readdirSync(dir).sort().map((f): [string, number, number] => [f, statSync(join(dir, f)).uid, statSync(join(dir, f)).gid]);
    const migrated = dataDir();
    chownSync(migrated, 65534, 65534);
    expect((await runCli(["migrate"], { DATA_DIR: migrated })).code).toBe(0);
    expect(ownersOf(migrated)).toEqual([["walletgate.db", 65534, 65534], ["walletgate.db.locks", 65534, 65534]]);
    const served = dataDir();
    chownSync(served, 65534, 65534);
    const server = await startTestServer({}, served);
    expect(await server.stop()).toBe(0);
    const files = ownersOf(served);
    expect(files.map(([f]) => f)).toEqual(expect.arrayContaining(["jwt-secret", "wallet-encryption-key", "walletgate.db"]));
    expect(files).toEqual(files.map(([f]) => [f, 65534, 65534]));
  });

  test("serve refuses a database newer than the program", async () => {
    const dir = dataDir();
    expect((await runCli(["migrate"], { DATA_DIR: dir })).code).toBe(0);
    const db = new Database(join(dir, "walletgate.db"));
    db.run("INSERT INTO schema_migrations (version, name, applied_at) VALUES (999, 'future', 0)");
    db.close();
    const r = await runCli(["serve"], { DATA_DIR: dir, PORT: "0" });
    expect(r.code).toBe(1);
    expect(r.stderr).toContain("newer walletgate");
  });

  test("a one-shot command never migrates a database that lacks migrations (a server of an older version may use it)", async () => {
    const dir = dataDir();
    expect((await runCli(["migrate"], { DATA_DIR: dir })).code).toBe(0);
    const latest = MIGRATIONS.at(-1)!.version;
    const db = new Database(join(dir, "walletgate.db"));
    db.run("DELETE FROM schema_migrations WHERE version = ?", [latest]); // as an older walletgate left it
    db.close();
    const refused = await runCli(["owners", "list"], { DATA_DIR: dir });
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain(`lacks migration ${latest}`);
    expect(refused.stderr).toContain("walletgate migrate");
    const version = () => {
      const d = new Database(join(dir, "walletgate.db"));
      const v = (d.query("SELECT MAX(version) AS v FROM schema_migrations").get() as { v: number }).v;
      d.close();
      return v;
    };
    expect(version()).toBe(latest - 1); // untouched
    // (The migration's own statements are not re-run here: this test only removed its record.)
    // A database never migrated (an empty file) is migrated by any command: no server can be using it.
    const fresh = dataDir();
    writeFileSync(join(fresh, "walletgate.db"), "");
    expect((await runCli(["owners", "list"], { DATA_DIR: fresh })).code).toBe(0);
    expect(new Database(join(fresh, "walletgate.db")).query("SELECT MAX(version) AS v FROM schema_migrations").get()).toEqual({ v: latest });
  });

  test("a one-shot command on a DATA_DIR without a database (run from the wrong directory) exits 1 naming it, and creates nothing", async () => {
    const dir = dataDir();
    for (const args of [["owners", "set-tier", newWallet().address, "unlimited"], ["keys", "list", "--owner", newWallet().address], ["ledger", "airdrop", "--to", newWallet().address, "--sol", "1"]]) {
      const r = await runCli(args, { DATA_DIR: dir });
      expect({ args, code: r.code, stdout: r.stdout }).toEqual({ args, code: 1, stdout: "" });
      expect(r.stderr).toContain(`DATA_DIR ${dir} holds no database`);
    }
    expect(readdirSync(dir)).toEqual([]); // no database, no secrets
  });

  test("a database holding sealed data never gets a new wallet encryption key beside it (a backup restored without its key)", async () => {
    const server = await startTestServer();
    const created = await call(server.url, "/mcp", { body: { tool: "wallet_create", params: { airdropSol: 0 } } });
    expect(created.body.success).toBe(true);
    await server.stop();
    const keyFile = join(server.dataDir, "wallet-encryption-key");
    const key = readFileSync(keyFile, "utf8").trim();
    rmSync(keyFile);
    for (const args of [["owners", "list"], ["serve"]]) {
      const refused = await runCli(args, { DATA_DIR: server.dataDir, PORT: "0" });
      expect([args[0], refused.code]).toEqual([args[0], 1]);
      expect(refused.stderr).toContain("wallet-encryption-key is missing");
    }
    expect(existsSync(keyFile)).toBe(false); // nothing generated
    expect((await runCli(["owners", "list"], { DATA_DIR: server.dataDir, WALLET_ENCRYPTION_KEY: key })).code).toBe(0);
    await server.dispose();
  }, 60_000);

  test("a server keyed by the environment: a command run without that key is refused and writes no secret file", async () => {
    const env = { WALLET_ENCRYPTION_KEY: "cd".repeat(32), JWT_SECRET: "s".repeat(40) };
    const server = await startTestServer(env); // nothing sealed yet: the database has recorded only the key's check
    await server.stop();
    const before = readdirSync(server.dataDir).sort();
    expect(before).not.toContain("wallet-encryption-key");
    const refused = await runCli(["owners", "list"], { DATA_DIR: server.dataDir });
    expect([refused.code, refused.stderr.includes("wallet-encryption-key is missing, but the database is bound to a wallet encryption key")]).toEqual([1, true]);
    expect(readdirSync(server.dataDir).sort()).toEqual(before); // no jwt-secret or wallet-encryption-key left behind
    expect((await runCli(["owners", "list"], { DATA_DIR: server.dataDir, ...env })).code).toBe(0);
    await server.dispose();
  }, 60_000);

  test("a database is opened only under the key its data was sealed with (a backup restored beside another key)", async () => {
    const first = await startTestServer();
    expect((await call(first.url, "/mcp", { body: { tool: "wallet_create", params: { airdropSol: 0 } } })).body.success).toBe(true);
    const backup = join(dataDir(), "first.db");
    expect((await runCli(["backup", backup], { DATA_DIR: first.dataDir })).code).toBe(0);
    await first.stop();
    // Another DATA_DIR that made a key of its own on its first start, then given the first one's backup.
    const second = await startTestServer();
    await second.stop();
    expect((await runCli(["restore", backup], { DATA_DIR: second.dataDir })).code).toBe(0);
    const keyFile = join(second.dataDir, "wallet-encryption-key");
    for (const args of [["owners", "list"], ["serve"]]) {
      const refused = await runCli(args, { DATA_DIR: second.dataDir, PORT: "0" });
      expect([args[0], refused.code, refused.stderr.includes(`encrypted under another wallet encryption key than ${keyFile}`)]).toEqual([args[0], 1, true]);
    }
    const wrong = "ab".repeat(32);
    const byEnv = await runCli(["owners", "list"], { DATA_DIR: second.dataDir, WALLET_ENCRYPTION_KEY: wrong });
    expect([byEnv.code, byEnv.stderr.includes("than WALLET_ENCRYPTION_KEY")]).toEqual([1, true]);
    // A database from before the check was kept (no check value yet): the key must open what is sealed
    // in it, or it would be recorded and the right key refused ever after.
    const forget = () => {
      const raw = openServerDatabase(second.dataDir);
      raw.run("DELETE FROM sealing_key_check");
      raw.close();
    };
    forget();
    expect((await runCli(["owners", "list"], { DATA_DIR: second.dataDir, PORT: "0" })).code).toBe(1);
    // The backup's own key opens it (and is then recorded).
    const own = readFileSync(join(first.dataDir, "wallet-encryption-key"), "utf8").trim();
    expect((await runCli(["owners", "list"], { DATA_DIR: second.dataDir, WALLET_ENCRYPTION_KEY: own })).code).toBe(0);
    expect((await runCli(["owners", "list"], { DATA_DIR: second.dataDir })).code).toBe(1);
    await first.dispose();
    await second.dispose();
  }, 60_000);

  // schema-watch.ts: `if (version <= known) return` → `version <= known + 1` (mutation review): a database one
  // version ahead, the usual upgrade, would go on being written by this older process.
  for (const [ahead, version] of [["far newer", () => 999], ["the very next (the next release's one migration)", () => latestOf() + 1]] as const) {
    test(`a running server stops writing once a newer walletgate migrated its database: ${ahead}`, async () => {
      const server = await startTestServer();
      try {
        expect((await fetch(`${server.url}/readyz`)).status).toBe(200);
        const db = openServerDatabase(server.dataDir); // the server may be in a write (its start-up purge)
        db.run("INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, 'future', 0)", [version()]);
        db.close();
        let status = 200;
        for (let i = 0; i < 100 && status === 200; i++) {
          await Bun.sleep(100);
          status = (await fetch(`${server.url}/readyz`)).status;
        }
        expect(status).toBe(503);
        const challenge = await fetch(`${server.url}/auth/challenge?wallet=${newWallet().address}`); // a write
        expect(challenge.status).toBe(500);
        expect(server.output()).toContain("database migrated by a newer walletgate");
      } finally {
        await server.dispose();
      }
    }, 60_000);
  }
});
