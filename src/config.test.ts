// Configuration: defaults, validation naming the variable, mainnet rules, flags over environment.
import { describe, expect, test } from "bun:test";
import { mkdtempSync, readdirSync, rmSync, utimesSync, writeFileSync } from "node:fs";
import { LEFTOVER_AFTER_MS } from "./lib/leftovers.ts";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ConfigError, UsageError, dataDirError, loadConfig, resolveSecrets } from "./config.ts";

describe("loadConfig", () => {
  test("defaults of operations.md", () => {
    const c = loadConfig({});
    expect(c).toMatchObject({
      port: 3000,
      host: "127.0.0.1",
      baseUrl: "http://127.0.0.1:3000",
      network: "localnet",
      sessionTtlS: 604800,
      sessionMaxAgeS: 2592000,
      refreshThresholdS: 3600,
      challengeTtlMs: 300000,
      purgeIntervalMs: 3600000,
      webhookRetentionDays: 0,
      authRateLimit: true,
      fingerprintRestore: true,
      trustProxy: { kind: "none" },
      maxBodyBytes: 65536,
      logLevel: "info",
      sqliteSynchronous: "FULL",
      marketplace: { feeBps: 0, feeWallet: null },
      mcpSessionTimeoutMs: 3600000,
      serviceToken: { symbol: "wgt", decimals: 6, mint: null },
      x402FeePayer: null,
      allowPrivateNetworkTargets: false,
      solanaRpcUrl: null,
      jwtSecretPrevious: null,
    });
    expect(c.dataDir.endsWith("/data")).toBe(true);
    expect(c.databasePath.endsWith("/data/walletgate.db")).toBe(true);
    expect(Object.isFrozen(c)).toBe(true);
  });

  test("defaults the README's table gives that the test above does not name", () => {
    // config.ts: `int(vars, "HTTP_IDLE_TIMEOUT_S", 10, …)` → 30; `int(vars, "MCP_MAX_SESSIONS", 10000, 1)` → 1000
    const c = loadConfig({});
    expect([c.httpIdleTimeoutS, c.mcpMaxSessions, c.walletgateToken, c.baseUrlGiven]).toEqual([10, 10000, null, false]);
  });

  test("LOG_FORMAT is json when standard output is not a terminal (a pipe, a log collector)", () => {
    // config.ts: `isatty(1) ? "pretty" : "json"` → `"pretty"`; asked in a process whose stdout is a pipe
    const probe = `const { loadConfig } = await import(${JSON.stringify(join(import.meta.dir, "config.ts"))}); console.log(loadConfig({}).logFormat);`;
    const run = Bun.spawnSync([process.execPath, "-e", probe], { stdout: "pipe", stderr: "pipe", env: { PATH: process.env.PATH ?? "", HOME: process.env.HOME ?? "/tmp" } });
    expect([run.exitCode, run.stdout.toString().trim()]).toEqual([0, "json"]);
  });

  test("SQLITE_SYNCHRONOUS takes FULL, EXTRA and NORMAL in any case, and nothing else", () => {
    // config.ts oneOf(): `name === "SQLITE_SYNCHRONOUS" ? raw.toUpperCase() : raw.toLowerCase()` → `raw.toLowerCase()`
    expect(["full", "Extra", "NORMAL"].map((v) => loadConfig({ SQLITE_SYNCHRONOUS: v }).sqliteSynchronous)).toEqual(["FULL", "EXTRA", "NORMAL"]);
    for (const value of ["OFF", "0"]) expect(() => loadConfig({ SQLITE_SYNCHRONOUS: value })).toThrow("SQLITE_SYNCHRONOUS must be one of FULL, NORMAL, EXTRA");
  });

  test("WALLET_ENCRYPTION_KEY in base64 (standard or url-safe) is the same key as in hex", () => {
    // config.ts decodeKey32(): the base64 branch → `if (false)` (a key made with `openssl rand -base64 32` refused)
    const key = Uint8Array.from({ length: 32 }, (_, i) => 250 - i * 7); // bytes that need + and / in base64
    const dir = mkdtempSync(join(tmpdir(), "walletgate-secrets-"));
    try {
      const spelled = [Buffer.from(key).toString("hex"), Buffer.from(key).toString("base64"), Buffer.from(key).toString("base64url")];
      expect(spelled[1]).toMatch(/[+/]/);
      for (const text of spelled) {
        const secrets = resolveSecrets(loadConfig({ DATA_DIR: dir, JWT_SECRET: "s".repeat(32), WALLET_ENCRYPTION_KEY: text }));
        expect([text, Array.from(secrets.walletEncryptionKey)]).toEqual([text, Array.from(key)]);
      }
      expect(() => loadConfig({ WALLET_ENCRYPTION_KEY: Buffer.from(key.subarray(0, 31)).toString("base64") })).toThrow("WALLET_ENCRYPTION_KEY");
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test("EXIT_WITH_PARENT: off by default; on and off in words (0 and 1 among them), or a process id", () => {
    expect(loadConfig({}).exitWithParent).toBe(false);
    expect(["true", "on", "1"].map((v) => loadConfig({ EXIT_WITH_PARENT: v }).exitWithParent)).toEqual([true, true, true]);
    expect(loadConfig({ EXIT_WITH_PARENT: "0" }).exitWithParent).toBe(false);
    expect(loadConfig({ EXIT_WITH_PARENT: " 4321 " }).exitWithParent).toBe(4321);
    expect(() => loadConfig({ EXIT_WITH_PARENT: "99999999" })).toThrow("EXIT_WITH_PARENT must be between 2 and 4194304");
    expect(() => loadConfig({ EXIT_WITH_PARENT: "parent" })).toThrow('EXIT_WITH_PARENT must be on, off or a process id, got "parent"');
  });

  test("PORT=0 leaves BASE_URL to the bound port; BASE_URL wins, loses a trailing slash and is normalised", () => {
    expect(loadConfig({ PORT: "0" }).baseUrl).toBeNull();
    expect(loadConfig({ BASE_URL: "https://auth.example.com/" }).baseUrl).toBe("https://auth.example.com");
    // Written as the URL parser reads it, so challenges, the token issuer and links name it alike.
    expect(loadConfig({ BASE_URL: "HTTPS://Wallet.Example.COM:443/" }).baseUrl).toBe("https://wallet.example.com");
    expect(loadConfig({ BASE_URL: "http:example.com" }).baseUrl).toBe("http://example.com");
    expect(loadConfig({ BASE_URL: "https://example.com:8443//?#" }).baseUrl).toBe("https://example.com:8443");
    expect(loadConfig({ HOST: "LocalHost", PORT: "80" }).baseUrl).toBe("http://localhost");
    expect(loadConfig({ HOST: "0:0:0:0:0:0:0:1", PORT: "8080" }).baseUrl).toBe("http://[::1]:8080");
  });

  test.each([
    ["PORT", "abc"],
    ["PORT", "70000"],
    ["NETWORK", "testnet"],
    ["BASE_URL", "ftp://x"],
    ["BASE_URL", "not a url"],
    ["BASE_URL", "https://user:pw@example.com"],
    ["BASE_URL", "https://example.com/?a=1"],
    ["BASE_URL", "https://example.com/#x"],
    // The pages use root paths: walletgate under a proxy's path would serve pages whose scripts all miss.
    ["BASE_URL", "https://example.com/gate"],
    ["BASE_URL", "https://example.com:8443/gate/"],
    ["BASE_URL", "http://example.com/%2F"],
    ["SESSION_TTL_S", "-1"],
    ["CHALLENGE_TTL_MS", "1.5"],
    ["AUTH_RATE_LIMIT", "maybe"],
    ["TRUST_PROXY", "10.0.0.0/33"],
    ["JWT_SECRET", "short"],
    ["JWT_SECRET_PREVIOUS", "short"],
    ["WALLET_ENCRYPTION_KEY", "abcd"],
    ["MAX_BODY_BYTES", "10"],
    ["LOG_LEVEL", "loud"],
    ["WEBHOOK_RETENTION_DAYS", "-1"],
    ["WEBHOOK_RETENTION_DAYS", "7.5"],
    ["WEBHOOK_RETENTION_DAYS", "36501"],
    ["DATABASE_URL", "postgres://localhost/x"],
    // Longer than a timer can wait (it would fire at once, every time), or dates past what ISO strings show.
    ["PURGE_INTERVAL_MS", "2147483648"],
    ["MCP_SESSION_TIMEOUT_MS", "2592000000"],
    ["CHALLENGE_TTL_MS", "86400001"],
    ["CHALLENGE_TTL_MS", "9000000000000000"],
    ["SESSION_TTL_S", "315360001"],
    ["SESSION_MAX_AGE_S", "9000000000000000"],
    ["REFRESH_THRESHOLD_S", "315360001"],
    // Not an address nor a hostname: refused before anything is created in DATA_DIR.
    ["HOST", "not_a_host!"],
    ["HOST", "999.1.1.1"],
    ["HOST", "[::1]"],
    ["HOST", "fe80::1%eth0"],
    ["HOST", "a..example"],
    ["HOST", "-a.example"],
    ["HOST", "http://example.com"],
    ["HOST", "example.com:80"],
  ])("%s=%s is refused with a message naming it", (name, value) => {
    expect(() => loadConfig({ [name]: value })).toThrow(ConfigError);
    expect(() => loadConfig({ [name]: value })).toThrow(name);
  });

  test("HOST is an IPv4 or IPv6 address or a hostname (whether it is this machine's is learnt by listening)", () => {
    for (const host of ["127.0.0.1", "0.0.0.0", "::", "::1", "2001:db8::1", "localhost", "gateway-1.internal", "localhostx"]) {
      expect(loadConfig({ HOST: host }).host).toBe(host);
    }
    expect(loadConfig({ HOST: " ::1 " }).baseUrl).toBe("http://[::1]:3000");
    // Listening everywhere: the default BASE_URL is loopback, as README's table says.
    expect(loadConfig({ HOST: "0.0.0.0" }).baseUrl).toBe("http://127.0.0.1:3000");
    for (const host of ["::", "::0", "0:0:0:0:0:0:0:0"]) expect(loadConfig({ HOST: host }).baseUrl).toBe("http://[::1]:3000");
    expect(loadConfig({ HOST: "2001:db8::1" }).baseUrl).toBe("http://[2001:db8::1]:3000");
  });

  test("mainnet requires its secrets, refuses AUTH_RATE_LIMIT=off, and turns fingerprint restore off", () => {
    const secrets = { JWT_SECRET: "x".repeat(32), WALLET_ENCRYPTION_KEY: "ab".repeat(32), SOLANA_RPC_URL: "https://rpc.example/?api-key=k" };
    expect(() => loadConfig({ NETWORK: "mainnet" })).toThrow("JWT_SECRET");
    expect(() => loadConfig({ NETWORK: "mainnet", ...secrets, SOLANA_RPC_URL: "" })).toThrow("SOLANA_RPC_URL is required on mainnet");
    expect(() => loadConfig({ NETWORK: "mainnet", JWT_SECRET: "x".repeat(32) })).toThrow("WALLET_ENCRYPTION_KEY");
    expect(() => loadConfig({ NETWORK: "mainnet", ...secrets, AUTH_RATE_LIMIT: "off" })).toThrow("AUTH_RATE_LIMIT");
    const c = loadConfig({ NETWORK: "mainnet", ...secrets });
    expect(c.fingerprintRestore).toBe(false);
    expect(c.authRateLimit).toBe(true);
    expect(loadConfig({ NETWORK: "mainnet", ...secrets, FINGERPRINT_RESTORE: "on" }).fingerprintRestore).toBe(true);
  });

  test("mainnet speaks to its RPC over https, in the clear only to this machine or a private address", () => {
    const secrets = { NETWORK: "mainnet", JWT_SECRET: "x".repeat(32), WALLET_ENCRYPTION_KEY: "ab".repeat(32) };
    for (const url of ["http://rpc.example/?api-key=SECRET123", "http://93.184.216.34:8899", "http://[2606:4700::1111]:8899"]) {
      let message = "";
      try {
        loadConfig({ ...secrets, SOLANA_RPC_URL: url });
      } catch (err) {
        message = (err as Error).message;
      }
      expect([url, message]).toEqual([url, "SOLANA_RPC_URL must be an https URL on mainnet (plain http only to localhost or a private network address)"]);
    }
    for (const url of ["https://rpc.example/?api-key=k", "http://127.0.0.1:8899", "http://localhost:8899", "http://10.0.0.5:8899", "http://[::1]:8899"]) {
      expect(loadConfig({ ...secrets, SOLANA_RPC_URL: url }).solanaRpcUrl).toBe(url);
    }
    expect(loadConfig({ NETWORK: "devnet", SOLANA_RPC_URL: "http://rpc.example" }).solanaRpcUrl).toBe("http://rpc.example"); // devnet: test money
  });

  test("ledger settings: RPC URL per network, service token symbol, mint and decimals", () => {
    expect(loadConfig({}).solanaRpcUrl).toBeNull();
    expect(loadConfig({ SOLANA_RPC_URL: "http://127.0.0.1:8899" }).solanaRpcUrl).toBeNull(); // localnet: the embedded ledger
    expect(loadConfig({ NETWORK: "devnet" }).solanaRpcUrl).toBe("https://api.devnet.solana.com");
    expect(loadConfig({ NETWORK: "devnet", SOLANA_RPC_URL: "http://127.0.0.1:8899" }).solanaRpcUrl).toBe("http://127.0.0.1:8899");
    expect(() => loadConfig({ NETWORK: "devnet", SOLANA_RPC_URL: "ftp://x" })).toThrow("SOLANA_RPC_URL");
    // URLs fetch could not use: refused at start, not one "connection failed" per call afterwards.
    for (const url of ["http://[zz/?api-key=SECRET123", "https://rpc.example:99999/?api-key=SECRET123", "http://:8899/", "https://rpc example/"]) {
      const refusal = (() => {
        try {
          loadConfig({ NETWORK: "devnet", SOLANA_RPC_URL: url });
          return null;
        } catch (err) {
          return (err as Error).message;
        }
      })();
      expect([url, refusal]).toEqual([url, "SOLANA_RPC_URL must be an http(s) URL"]);
    }
    let message = "";
    try {
      loadConfig({ NETWORK: "devnet", SOLANA_RPC_URL: "wss://rpc.example/?api-key=SECRET123" });
    } catch (err) {
      message = (err as Error).message;
    }
    expect(message).toContain("SOLANA_RPC_URL");
    expect(message).not.toContain("SECRET123"); // provider keys live in the URL
    expect(loadConfig({}).serviceToken).toEqual({ symbol: "wgt", decimals: 6, mint: null });
    const mint = "4zMMC9srt5Ri5X14GAgXhaHii3GnPAEERYPJgZJDncDU";
    expect(loadConfig({ SERVICE_TOKEN_SYMBOL: "ABC", SERVICE_TOKEN_DECIMALS: "9", SERVICE_TOKEN_MINT: mint }).serviceToken).toEqual({
      symbol: "abc",
      decimals: 9,
      mint,
    });
    for (const symbol of ["sol", "usdc", "1abc", "a-b", "x".repeat(17)]) {
      expect(() => loadConfig({ SERVICE_TOKEN_SYMBOL: symbol })).toThrow("SERVICE_TOKEN_SYMBOL");
    }
    expect(() => loadConfig({ SERVICE_TOKEN_MINT: "not-an-address" })).toThrow("SERVICE_TOKEN_MINT");
    expect(() => loadConfig({ SERVICE_TOKEN_DECIMALS: "10" })).toThrow("SERVICE_TOKEN_DECIMALS");
  });

  test("flags override the environment, in both spellings; unknown and repeated flags are usage errors", () => {
    const c = loadConfig({ PORT: "1" }, ["--port", "2", "--log-level=debug", "--data-dir", "/tmp/x"]);
    expect([c.port, c.logLevel, c.dataDir]).toEqual([2, "debug", "/tmp/x"]);
    expect(() => loadConfig({}, ["--frobnicate", "1"])).toThrow(UsageError);
    expect(() => loadConfig({}, ["--port"])).toThrow(UsageError);
    expect(() => loadConfig({}, ["--port", "2", "--port=3"])).toThrow("option --port is given twice");
  });

  test("variables holding an address do not repeat a wrong value: a secret key pasted there would reach the logs", () => {
    const secretKey = "4".repeat(88);
    for (const name of ["X402_FEE_PAYER", "MARKETPLACE_FEE_WALLET", "SERVICE_TOKEN_MINT"]) {
      let message = "";
      try {
        loadConfig({ [name]: secretKey });
      } catch (err) {
        message = (err as Error).message;
      }
      expect([name, message.startsWith(`${name} must be a base58 address`), message.includes(secretKey)]).toEqual([name, true, false]);
    }
  });

  test("secrets are not taken as flags (ps shows every process's arguments), and the refusal does not repeat them", () => {
    for (const [flag, name] of [["--jwt-secret", "JWT_SECRET"], ["--jwt-secret-previous", "JWT_SECRET_PREVIOUS"], ["--wallet-encryption-key", "WALLET_ENCRYPTION_KEY"], ["--walletgate-token", "WALLETGATE_TOKEN"]] as const) {
      for (const flags of [[flag, "SECRET-VALUE-1234567890123456789012"], [`${flag}=SECRET-VALUE-1234567890123456789012`]]) {
        let error: unknown = null;
        try {
          loadConfig({}, flags);
        } catch (err) {
          error = err;
        }
        expect(error).toBeInstanceOf(UsageError);
        expect((error as Error).message).toContain(`set ${name} in the environment or .env`);
        expect((error as Error).message).not.toContain("SECRET-VALUE");
      }
    }
  });
});

describe("dataDirError", () => {
  const config = loadConfig({ DATA_DIR: "/srv/wg" });
  const fail = (code: string, path?: string) => Object.assign(new Error("low-level text"), { code, path });

  test("failures of DATA_DIR's files name DATA_DIR and say what is wrong", () => {
    const cases: [Error, string][] = [
      [fail("EEXIST", "/srv/wg"), "DATA_DIR /srv/wg is not a directory"],
      [fail("ENOTDIR", "/srv/wg/walletgate.db"), "DATA_DIR /srv/wg is not a directory (/srv/wg/walletgate.db)"],
      [fail("EACCES", "/srv/wg/.jwt-secret.tmp"), "DATA_DIR /srv/wg cannot be written by this user: permission denied (/srv/wg/.jwt-secret.tmp)"],
      [fail("SQLITE_READONLY_DIRECTORY"), "DATA_DIR /srv/wg: its database cannot be written (read-only file or directory)"],
      [fail("SQLITE_READONLY"), "DATA_DIR /srv/wg: its database cannot be written (read-only file or directory)"],
      [fail("ENOSPC", "/srv/wg/walletgate.db"), "DATA_DIR /srv/wg: no space left on the disk (/srv/wg/walletgate.db)"],
      [fail("SQLITE_CANTOPEN"), "DATA_DIR /srv/wg: the database /srv/wg/walletgate.db cannot be opened"],
      [fail("SQLITE_NOTADB"), "DATA_DIR /srv/wg: /srv/wg/walletgate.db is not a SQLite database: move it away, or put a backup in its place with `walletgate restore <file>`"],
      [fail("SQLITE_CORRUPT_INDEX"), "DATA_DIR /srv/wg: the database /srv/wg/walletgate.db is damaged (SQLITE_CORRUPT_INDEX): put a backup in its place with `walletgate restore <file>`"],
      [fail("EISDIR", "/srv/wg/jwt-secret"), "DATA_DIR /srv/wg: /srv/wg/jwt-secret is a directory, not a file"],
      [fail("ENOENT", "/mnt/vol/wg.db"), "DATA_DIR /srv/wg: /mnt/vol/wg.db cannot be made: its folder does not exist (a link to a volume that is not mounted?)"],
    ];
    for (const [err, message] of cases) {
      const mapped = dataDirError(config, err);
      expect([mapped instanceof ConfigError, mapped?.message]).toEqual([true, message]);
    }
  });

  test("any other error is left as it is", () => {
    expect(dataDirError(config, fail("ECONNRESET"))).toBeNull();
    expect(dataDirError(config, new ConfigError("WALLET_ENCRYPTION_KEY …"))).toBeNull();
    expect(dataDirError(config, new Error("no code"))).toBeNull();
  });
});

describe("resolveSecrets", () => {
  test("a jwt-secret file shorter than 32 bytes is refused, naming the file, as JWT_SECRET would be", () => {
    const dir = mkdtempSync(join(tmpdir(), "walletgate-secrets-"));
    try {
      writeFileSync(join(dir, "jwt-secret"), "short\n", { mode: 0o600 });
      expect(() => resolveSecrets(loadConfig({ DATA_DIR: dir }))).toThrow(`${join(dir, "jwt-secret")} holds fewer than 32 bytes`);
      writeFileSync(join(dir, "jwt-secret"), `${"s".repeat(32)}\n`, { mode: 0o600 });
      expect(new TextDecoder().decode(resolveSecrets(loadConfig({ DATA_DIR: dir })).jwtSecret)).toBe("s".repeat(32));
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test("copies of the secrets a first start killed mid-way left under hidden names are removed once stale", () => {
    const dir = mkdtempSync(join(tmpdir(), "walletgate-secrets-"));
    try {
      const stale = [".jwt-secret.6b1f0c52-0d5e-4a43-9a43-0f1d0b1e2a11.tmp", ".wallet-encryption-key.0c1c4e2e-8d6b-4b39-a8a8-2d3f4e5a6b7c.tmp"];
      const fresh = ".wallet-encryption-key.9e8d7c6b-5a4f-4e3d-8c2b-1a0f9e8d7c6b.tmp"; // another process starting now
      const other = ".jwt-secret.keep"; // not ours
      for (const name of [...stale, fresh, other]) writeFileSync(join(dir, name), "x".repeat(64), { mode: 0o600 });
      const old = new Date(Date.now() - LEFTOVER_AFTER_MS - 1000);
      for (const name of [...stale, other]) utimesSync(join(dir, name), old, old);
      // The wallet key from the environment now: its file's stale copies go all the same.
      resolveSecrets(loadConfig({ DATA_DIR: dir, WALLET_ENCRYPTION_KEY: "ab".repeat(32) }));
      expect(readdirSync(dir).filter((n) => n.startsWith(".")).sort()).toEqual([other, fresh].sort());
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
