// Edges of running the service (operations.md): every configuration bound and secret file, the client
// address behind proxies, the body limit, shutdown and start-up, the log, the limiter's window, schema
// versions, the MCP session cap with calls in flight, backup and lock files, and the commands' exit codes.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ConfigError, dataDirError, loadConfig, resolveSecrets } from "../src/config.ts";
import { decodeBase64Strict } from "../src/lib/encoding.ts";
import { jsonNestsDeeperThan } from "../src/lib/json.ts";
import { createKeyedLock } from "../src/lib/keyed-lock.ts";
import { parseAmount } from "../src/lib/amounts.ts";
import { parseTrustProxy, resolveClientIp } from "../src/lib/ip.ts";
import { createFilesDurably } from "../src/lib/durable.ts";
import { startLiteSvmRpc } from "./helpers/litesvm-rpc.ts";
import { logged, runCli, startTestServer, type TestServer } from "./helpers/server.ts";
import { until } from "./helpers/until.ts";
import { call, getChallenge, newWallet, signIn } from "./helpers/wallet.ts";
import { createLogger, stdoutSink, type LogWriter } from "../src/log.ts";
import { createRateLimiter } from "../src/auth/rate-limit.ts";
import type { AppError } from "../src/errors.ts";
import { Database } from "bun:sqlite";
import { backupDatabase, BackupTargetError } from "../src/db/backup.ts";
import { readdirSync } from "node:fs";
import { createHash } from "node:crypto";
import { tryLock } from "../src/db/file-lock.ts";
import { migrate, migrateFreshOnly, pendingVersions, SchemaTooNewError } from "../src/db/migrate.ts";
import { ipv6Loopback } from "./helpers/ipv6.ts";

const refusal = (env: Record<string, string>): string | null => {
  try {
    loadConfig(env);
    return null;
  } catch (err) {
    return (err as Error).message;
  }
};

const withDir = <T>(work: (dir: string) => T): T => {
  const dir = mkdtempSync(join(tmpdir(), "walletgate-ops-"));
  try {
    return work(dir);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
};

const withDirAsync = async <T>(work: (dir: string) => Promise<T>): Promise<T> => {
  const dir = mkdtempSync(join(tmpdir(), "walletgate-ops-"));
  try {
    return await work(dir);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
};

describe("config: every documented bound, at both edges (README's configuration table)", () => {
  // [variable, lowest accepted, highest accepted]
  const bounds: [string, number, number][] = [
    ["PORT", 0, 65535],
    ["SESSION_TTL_S", 1, 10 * 365 * 86_400],
    ["SESSION_MAX_AGE_S", 1, 10 * 365 * 86_400],
    ["REFRESH_THRESHOLD_S", 0, 10 * 365 * 86_400],
    ["CHALLENGE_TTL_MS", 1, 86_400_000],
    ["PURGE_INTERVAL_MS", 10, 2_147_483_647],
    ["WEBHOOK_RETENTION_DAYS", 0, 36_500],
    ["MAX_BODY_BYTES", 1024, 67_108_864],
    ["HTTP_IDLE_TIMEOUT_S", 1, 255],
    ["MCP_SESSION_TIMEOUT_MS", 100, 2_147_483_647],
    ["SERVICE_TOKEN_DECIMALS", 0, 9],
    ["MARKETPLACE_FEE_BPS", 0, 10_000],
  ];
  const wallet = "11111111111111111111111111111112";

  test.each(bounds)("%s: %d and %d are taken, one past either is refused naming it", (name, min, max) => {
    const extra: Record<string, string> = name === "MARKETPLACE_FEE_BPS" ? { MARKETPLACE_FEE_WALLET: wallet } : {};
    expect(refusal({ ...extra, [name]: String(min) })).toBeNull();
    expect(refusal({ ...extra, [name]: String(max) })).toBeNull();
    // config.ts int(): `value < min` → `value < min - 1`, `value > max` → `value > max + 1`
    if (min > 0) expect(refusal({ ...extra, [name]: String(min - 1) })).toContain(name);
    expect(refusal({ ...extra, [name]: String(max + 1) })).toContain(name);
  });

  test("MCP_MAX_SESSIONS is at least 1 (0 would refuse every MCP session)", () => {
    expect(loadConfig({ MCP_MAX_SESSIONS: "1" }).mcpMaxSessions).toBe(1);
    expect(refusal({ MCP_MAX_SESSIONS: "0" })).toContain("MCP_MAX_SESSIONS");
  });

  test("a variable set to nothing (`PORT=` in .env) takes its default", () => {
    // config.ts int(): `raw === undefined || raw === ""` → `raw === undefined`
    const c = loadConfig({ PORT: "", SESSION_TTL_S: " ", MAX_BODY_BYTES: "" });
    expect([c.port, c.sessionTtlS, c.maxBodyBytes]).toEqual([3000, 604800, 65536]);
  });

  test("MARKETPLACE_FEE_BPS above 0 needs MARKETPLACE_FEE_WALLET", () => {
    // config.ts: `if (feeBps > 0 && feeWallet === null)` → `if (false)`
    expect(refusal({ MARKETPLACE_FEE_BPS: "250" })).toContain("MARKETPLACE_FEE_WALLET");
    expect(loadConfig({ MARKETPLACE_FEE_BPS: "250", MARKETPLACE_FEE_WALLET: wallet }).marketplace).toEqual({ feeBps: 250, feeWallet: wallet });
    expect(loadConfig({ MARKETPLACE_FEE_BPS: "0" }).marketplace).toEqual({ feeBps: 0, feeWallet: null });
  });

  test("ALLOW_PRIVATE_NETWORK_TARGETS is off unless asked for (the outbound guard is on by default)", () => {
    // config.ts: onOff(…, "ALLOW_PRIVATE_NETWORK_TARGETS", false) → true
    expect(loadConfig({}).allowPrivateNetworkTargets).toBe(false);
    expect(loadConfig({ ALLOW_PRIVATE_NETWORK_TARGETS: "true" }).allowPrivateNetworkTargets).toBe(true);
  });

  test("JWT_SECRET: 32 bytes at least, counted in bytes (31 refused; 16 two-byte characters taken)", () => {
    // config.ts secret(): `< 32` → `< 31`; `Buffer.byteLength(raw)` → `raw.length`
    expect(refusal({ JWT_SECRET: "x".repeat(31) })).toContain("JWT_SECRET must be at least 32 bytes");
    expect(refusal({ JWT_SECRET: "x".repeat(32) })).toBeNull();
    expect(refusal({ JWT_SECRET: "é".repeat(16) })).toBeNull();
    expect(refusal({ JWT_SECRET_PREVIOUS: "x".repeat(31) })).toContain("JWT_SECRET_PREVIOUS");
  });

  test("WALLET_ENCRYPTION_KEY of 63 hex digits is refused (it is not 32 bytes)", () => {
    // config.ts decodeKey32(): /^[0-9a-fA-F]{64}$/ → {63,64}
    expect(refusal({ WALLET_ENCRYPTION_KEY: "a".repeat(63) })).toContain("WALLET_ENCRYPTION_KEY");
    expect(refusal({ WALLET_ENCRYPTION_KEY: "a".repeat(64) })).toBeNull();
  });

  test("BASE_URL with a password but no user name is refused too", () => {
    // config.ts: `url.username || url.password || …` → `url.username || …`
    expect(refusal({ BASE_URL: "https://:secret@auth.example.com" })).toBe("BASE_URL must not carry credentials, a query or a fragment");
  });

  test("BASE_URL with a path is refused, saying what to give instead (the pages use root paths)", () => {
    // config.ts: the pathname test → accepting `${url.origin}${url.pathname}`
    expect(refusal({ BASE_URL: "https://example.com/wallet" })).toBe(
      'BASE_URL must be an origin without a path (scheme, host and port, e.g. https://wallet.example.com), got "https://example.com/wallet": ' +
        "walletgate is served at the root of its host, so behind a proxy give it a host name of its own",
    );
    expect(refusal({ BASE_URL: "https://example.com//" })).toBeNull();
  });

  test("a BASE_URL refused for its form is not echoed with its credentials", () => {
    // config.ts: the refusals quote `shown`, the URL with its user part hidden → `rawBase`
    for (const value of ["https://u:SEKRET3@example.com:99999/", "ftp://u:SEKRET4@example.com/", "https://u:pa/SEKRET5@example.com:99999/", "https://u:p#SEKRET6@example.com:99999/", "admin:SEKRET7@example.com"]) {
      const said = refusal({ BASE_URL: value })!;
      expect({ value, said }).toEqual({ value, said: expect.stringContaining("BASE_URL must be an absolute http(s) URL") });
      expect(said).not.toContain("SEKRET");
    }
    expect(refusal({ BASE_URL: "not a url" })).toBe('BASE_URL must be an absolute http(s) URL, got "not a url"');
  });
});

describe("config: the secrets of DATA_DIR", () => {
  test("a command that signs no session (this-run-only) writes no jwt-secret file; its wallet key is still kept", () => {
    // config.ts: `config.jwtSecret === null && !jwtThisRunOnly ? [jwt-secret]` → without `&& !jwtThisRunOnly`
    withDir((dir) => {
      const secrets = resolveSecrets(loadConfig({ DATA_DIR: dir }), { jwtSecretIfMissing: "this-run-only" });
      expect(secrets.jwtSecret.length).toBeGreaterThanOrEqual(32);
      expect(existsSync(join(dir, "jwt-secret"))).toBe(false);
      expect(existsSync(join(dir, "wallet-encryption-key"))).toBe(true);
    });
  });

  test("a missing jwt-secret while another signs (the server's JWT_SECRET) is refused before any file is written", () => {
    // config.ts: `if (signer !== null) {` → `if (false) {`
    withDir((dir) => {
      const config = loadConfig({ DATA_DIR: dir, WALLET_ENCRYPTION_KEY: "ab".repeat(32) });
      expect(() => resolveSecrets(config, { signedByAnother: () => "the server signs with key id k1" })).toThrow("jwt-secret is missing");
      expect(existsSync(join(dir, "jwt-secret"))).toBe(false);
    });
  });

  test("a jwt-secret file that exists is used, whoever else signs: it is not 'missing'", () => {
    // config.ts: `config.jwtSecret === null && !existsSync(jwtFile)` → `config.jwtSecret === null`
    withDir((dir) => {
      writeFileSync(join(dir, "jwt-secret"), `${"s".repeat(40)}\n`, { mode: 0o600 });
      const config = loadConfig({ DATA_DIR: dir, WALLET_ENCRYPTION_KEY: "ab".repeat(32) });
      const secrets = resolveSecrets(config, { signedByAnother: () => "the server signs with key id k1" });
      expect(new TextDecoder().decode(secrets.jwtSecret)).toBe("s".repeat(40));
    });
  });

  test("without JWT_SECRET_PREVIOUS there is no previous key (not one made of the text \"null\")", () => {
    // config.ts: `config.jwtSecretPrevious === null ? null : encode(…)` → `encode(…)`
    withDir((dir) => {
      expect(resolveSecrets(loadConfig({ DATA_DIR: dir })).jwtSecretPrevious).toBeNull();
      const previous = resolveSecrets(loadConfig({ DATA_DIR: dir, JWT_SECRET_PREVIOUS: "p".repeat(32) })).jwtSecretPrevious;
      expect(new TextDecoder().decode(previous!)).toBe("p".repeat(32));
    });
  });

  test("a secret's file others may read (copied in by hand) is made the owner's alone", () => {
    // config.ts generatedSecrets: `if ((stat.mode & 0o077) !== 0) chmodSync(path, 0o600)` → `if (false)`
    withDir((dir) => {
      writeFileSync(join(dir, "jwt-secret"), `${"s".repeat(40)}\n`, { mode: 0o644 });
      chmodSync(join(dir, "jwt-secret"), 0o644);
      resolveSecrets(loadConfig({ DATA_DIR: dir, WALLET_ENCRYPTION_KEY: "ab".repeat(32) }));
      expect((statSync(join(dir, "jwt-secret")).mode & 0o777).toString(8)).toBe("600");
    });
  });

  test("an empty secret file is refused, naming it and saying to delete it (not as a short or malformed key)", () => {
    // config.ts generatedSecrets(): `if (value === "") throw …is empty…` removed
    withDir((dir) => {
      writeFileSync(join(dir, "jwt-secret"), "\n", { mode: 0o600 });
      expect(() => resolveSecrets(loadConfig({ DATA_DIR: dir, WALLET_ENCRYPTION_KEY: "ab".repeat(32) }))).toThrow(`${join(dir, "jwt-secret")} is empty; delete it to generate a new secret`);
      writeFileSync(join(dir, "wallet-encryption-key"), "", { mode: 0o600 });
      expect(() => resolveSecrets(loadConfig({ DATA_DIR: dir, JWT_SECRET: "s".repeat(32) }))).toThrow(`${join(dir, "wallet-encryption-key")} is empty; delete it to generate a new secret`);
    });
  });

  test("a wallet-encryption-key file that holds no 32-byte key is refused, naming it", () => {
    // config.ts: `if (walletKeyBytes === null) throw` → `if (false) throw`
    withDir((dir) => {
      writeFileSync(join(dir, "wallet-encryption-key"), "not a key\n", { mode: 0o600 });
      expect(() => resolveSecrets(loadConfig({ DATA_DIR: dir, JWT_SECRET: "s".repeat(32) }))).toThrow(`${join(dir, "wallet-encryption-key")} does not hold a 32-byte key`);
    });
  });
});

describe("config: dataDirError, the codes its table lacked", () => {
  test("a read-only filesystem and a full SQLite database name DATA_DIR", () => {
    // config.ts dataDirError: `case "EROFS":` and `case "SQLITE_FULL":` removed
    const config = loadConfig({ DATA_DIR: "/srv/wg" });
    const fail = (code: string) => Object.assign(new Error("low-level text"), { code });
    const said = (code: string) => {
      const mapped = dataDirError(config, fail(code));
      return [mapped instanceof ConfigError, mapped?.message];
    };
    expect(said("EROFS")).toEqual([true, "DATA_DIR /srv/wg: its database cannot be written (read-only file or directory)"]);
    expect(said("SQLITE_FULL")).toEqual([true, "DATA_DIR /srv/wg: no space left on the disk"]);
    expect(said("EDQUOT")).toEqual([true, "DATA_DIR /srv/wg: no space left on the disk"]);
  });
});

describe("lib", () => {
  test("decodeBase64Strict takes standard padded base64 only, in its one spelling", () => {
    // encoding.ts: the round trip `toString("base64") === text ? bytes : null` → `bytes`
    expect(decodeBase64Strict("AAE=")).toEqual(new Uint8Array([0, 1]));
    expect(decodeBase64Strict("")).toEqual(new Uint8Array([]));
    for (const text of ["AAF=", "AB==", "AAE", "AA-_", "AA E=", "AAE=\n", "AAE==="]) expect([text, decodeBase64Strict(text)]).toEqual([text, null]);
  });

  test("jsonNestsDeeperThan counts depth, not brackets: many siblings are shallow", () => {
    // json.ts: `depth--` removed
    expect(jsonNestsDeeperThan("[" + "{},".repeat(100) + "{}]", 2)).toBe(false);
    expect(jsonNestsDeeperThan(`{${Array.from({ length: 40 }, (_, i) => `"k${i}":[1]`).join(",")}}`, 2)).toBe(false);
  });

  test("keyed lock: a third piece of work for a key waits for the second, not only the first", async () => {
    // keyed-lock.ts: `if (tails.get(key) === tail) tails.delete(key)` → `tails.delete(key)`
    const lock = createKeyedLock();
    const log: string[] = [];
    const step = (name: string, ms: number) => async () => {
      log.push(`${name} start`);
      await Bun.sleep(ms);
      log.push(`${name} end`);
    };
    const first = lock.run("a", step("a1", 10));
    const second = lock.run("a", step("a2", 40));
    await first;
    await Bun.sleep(5); // a2 is running now
    await Promise.all([second, lock.run("a", step("a3", 1))]);
    expect(log).toEqual(["a1 start", "a1 end", "a2 start", "a2 end", "a3 start", "a3 end"]);
  });

  test("a JSON number of exactly 10^15 base units is refused (it may have been rounded); one less is taken", () => {
    // amounts.ts: `value > MAX_EXACT_NUMBER_UNITS` → `value > MAX_EXACT_NUMBER_UNITS + 1n`
    expect(parseAmount(1_000_000_000, 6)).toEqual({ error: expect.stringContaining("must be sent as a decimal string") });
    expect(parseAmount(999_999_999, 6)).toEqual({ value: 999_999_999_000_000n });
    expect(parseAmount("1000000000", 6)).toEqual({ value: 1_000_000_000_000_000n });
  });
});

describe("lib/ip: the client address", () => {
  test("an IPv4 client on a dual-stack socket (::ffff:a.b.c.d) is that IPv4 address, with or without TRUST_PROXY", () => {
    // ip.ts resolveClientIp: `normalizeIp(socketIp) ?? socketIp` → `socketIp` (every IPv4 client would share one IPv6 /64 key)
    expect(resolveClientIp("::ffff:203.0.113.7", null, { kind: "none" })).toBe("203.0.113.7");
    expect(resolveClientIp("::ffff:203.0.113.7", "198.51.100.1", { kind: "none" })).toBe("203.0.113.7");
  });

  test("hops: the address taken from X-Forwarded-For is normalised, and a garbled one is not taken", () => {
    // ip.ts: `return normalizeIp(chain[i]!) ?? peer` → `return chain[i]!`
    const one = parseTrustProxy("1")!;
    expect(resolveClientIp("10.0.0.1", "::ffff:1.2.3.4", one)).toBe("1.2.3.4");
    expect(resolveClientIp("10.0.0.1", "2001:0db8:0000::1", one)).toBe("2001:db8::1");
    expect(resolveClientIp("10.0.0.1", "not-an-address", one)).toBe("10.0.0.1");
  });

  test("hops: empty entries in X-Forwarded-For are not hops", () => {
    // ip.ts: `.filter((s) => s !== "")` removed
    expect(resolveClientIp("10.0.0.1", "1.2.3.4, ", parseTrustProxy("1")!)).toBe("1.2.3.4");
  });

  test("CIDRs of both families: a peer of one family is compared with the other family's ranges without failing", () => {
    // ip.ts isTrusted: `addr.kind() === range.kind() && addr.match(…)` → `addr.match(…)` (throws on a kind mismatch)
    const trust = parseTrustProxy("::1, 10.0.0.0/8")!;
    expect(resolveClientIp("10.0.0.1", "1.2.3.4", trust)).toBe("1.2.3.4");
    expect(resolveClientIp("::1", "1.2.3.4", trust)).toBe("1.2.3.4");
    expect(resolveClientIp("192.0.2.9", "1.2.3.4", trust)).toBe("192.0.2.9");
  });

  test("CIDRs: a garbled entry left of a trusted proxy stops the walk at that proxy", () => {
    // ip.ts: `if (next === null) break;` removed (the walk then ends on the socket's peer)
    expect(resolveClientIp("127.0.0.1", "garbage, 10.0.0.7", parseTrustProxy("10.0.0.0/8, 127.0.0.1")!)).toBe("10.0.0.7");
  });
});

describe("lib/durable", () => {
  test("a name another process created first is left as it is: both agree on the first file", () => {
    // durable.ts: `if (code !== "EEXIST") throw err;` → `throw err;`
    withDir((root) => {
      const dir = join(root, "data");
      expect(createFilesDurably(dir, [{ name: "jwt-secret", data: "first\n", mode: 0o600 }])).toEqual(["jwt-secret"]);
      expect(createFilesDurably(dir, [{ name: "jwt-secret", data: "second\n", mode: 0o600 }])).toEqual([]);
      expect(readFileSync(join(dir, "jwt-secret"), "utf8")).toBe("first\n");
    });
  });

  test("directories it makes (DATA_DIR on a first start) are the owner's alone", () => {
    // durable.ts makeDirDurably: `mode: 0o700` → 0o755
    withDir((root) => {
      const dir = join(root, "a", "data");
      createFilesDurably(dir, [{ name: "wallet-encryption-key", data: "k\n", mode: 0o600 }]);
      expect([statSync(join(root, "a")).mode & 0o077, statSync(dir).mode & 0o077]).toEqual([0, 0]);
    });
  });
});

describe("server: MAX_BODY_BYTES is the largest body taken, with or without Content-Length (real server over HTTP)", () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer({ AUTH_RATE_LIMIT: "off", MAX_BODY_BYTES: "1024" });
  });
  afterAll(async () => {
    await server.dispose();
  });

  /** A JSON body of exactly `bytes` bytes that /auth/verify refuses for its address (400), not its size. */
  const bodyOf = (bytes: number) => {
    const shell = JSON.stringify({ walletAddress: "", nonce: "n", signature: "s" });
    const text = JSON.stringify({ walletAddress: "x".repeat(bytes - shell.length), nonce: "n", signature: "s" });
    expect(Buffer.byteLength(text)).toBe(bytes);
    return text;
  };
  const verify = async (body: string, chunked: boolean) => {
    const bytes = new TextEncoder().encode(body);
    const res = await fetch(`${server.url}/auth/verify`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      // A stream is sent chunked, without Content-Length: the server counts it as it reads.
      body: chunked
        ? new ReadableStream({
            start(c) {
              for (let i = 0; i < bytes.length; i += 100) c.enqueue(bytes.slice(i, i + 100));
              c.close();
            },
          })
        : body,
    });
    return [res.status, ((await res.json()) as { code: string }).code];
  };

  test("declared: 1024 bytes are read, 1025 are 413", async () => {
    // server.ts: `length > config.maxBodyBytes` → `length > config.maxBodyBytes + 1`
    expect(await verify(bodyOf(1024), false)).toEqual([400, "INVALID_ADDRESS"]);
    expect(await verify(bodyOf(1025), false)).toEqual([413, "PAYLOAD_TOO_LARGE"]);
  });

  test("chunked: 1024 bytes are read, 1025 are 413", async () => {
    // server.ts readCapped: `size > max` → `size > max + 1`
    expect(await verify(bodyOf(1024), true)).toEqual([400, "INVALID_ADDRESS"]);
    expect(await verify(bodyOf(1025), true)).toEqual([413, "PAYLOAD_TOO_LARGE"]);
  });

  test("in an MCP session the 413 is a JSON-RPC error, as /mcp answers any body it cannot take there; outside one, the catalogue's", async () => {
    const post = async (headers: Record<string, string>) => {
      const res = await fetch(`${server.url}/mcp`, {
        method: "POST",
        headers: { "content-type": "application/json", accept: "application/json, text/event-stream", ...headers },
        body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "ping", params: { pad: "x".repeat(2000) } }),
      });
      return [res.status, await res.json()];
    };
    expect(await post({ "mcp-session-id": "any" })).toEqual([413, { jsonrpc: "2.0", error: { code: -32600, message: "Invalid Request: request body is larger than 1024 bytes" }, id: null }]);
    expect(await post({})).toEqual([413, { error: "request body is larger than 1024 bytes", code: "PAYLOAD_TOO_LARGE" }]);
  });
});

describe("server: shutdown (real process, signals)", () => {
  test("SIGINT then SIGTERM: one shutdown, not two; exit 0", async () => {
    // server.ts stop(): `stopping ??= (async () => …` → `stopping = (async () => …` (a second signal runs it again)
    const server = await startTestServer({ AUTH_RATE_LIMIT: "off" });
    try {
      expect((await call(server.url, "/healthz")).status).toBe(200);
      process.kill(server.pid, "SIGINT");
      expect(await server.stop("SIGTERM")).toBe(0);
      const msgs = server
        .output()
        .split("\n")
        .filter((l) => l.startsWith("{"))
        .map((l) => (JSON.parse(l) as { msg: string }).msg);
      expect(msgs.filter((m) => m === "stopped")).toEqual(["stopped"]);
    } finally {
      await server.dispose();
    }
  }, 30_000);
});

describe("server: what every start does (real process)", () => {
  test("the purge runs once at start-up, not only after PURGE_INTERVAL_MS (README: 'how often (and once at start-up)')", async () => {
    // server.ts: startRepeating(purge, …, true) → false
    const first = await startTestServer({ CHALLENGE_TTL_MS: "100", AUTH_RATE_LIMIT: "off" });
    let server = first;
    try {
      const wallet = newWallet();
      const ch = await getChallenge(server.url, wallet);
      await Bun.sleep(300); // expired, and past the purge's margin (min(60 s, CHALLENGE_TTL_MS))
      server = await first.restart(); // PURGE_INTERVAL_MS is an hour: only the start-up round can purge it
      const verify = () => call(server.url, "/auth/verify", { body: { walletAddress: wallet.address, nonce: ch.nonce, signature: wallet.sign(ch.message) } });
      expect(await until(async () => ((await verify()).body.code === "NONCE_NOT_FOUND" ? "purged" : undefined), 5_000)).toBe("purged");
    } finally {
      await server.dispose();
    }
  }, 30_000);

  test("ALLOW_PRIVATE_NETWORK_TARGETS=true is warned about at every start", async () => {
    // server.ts: `if (config.allowPrivateNetworkTargets) {` → `if (false) {`
    const server = await startTestServer({ ALLOW_PRIVATE_NETWORK_TARGETS: "true" });
    try {
      const lines = await logged(server, (ls) => ls.some((l) => l.level === "warn"));
      expect(lines.filter((l) => l.level === "warn").map((l) => l.msg)).toEqual([
        "ALLOW_PRIVATE_NETWORK_TARGETS=true: webhooks and agent endpoints may reach private, loopback and link-local addresses",
      ]);
    } finally {
      await server.dispose();
    }
  });

  test("HOST=0.0.0.0 without BASE_URL is warned about at start (other machines reach it, what it signs names loopback); with BASE_URL it is not", async () => {
    // server.ts: `listensEverywhere(config.host) && !config.baseUrlGiven` → `false`
    const warnings = async (env: Record<string, string>) => {
      const server = await startTestServer({ HOST: "0.0.0.0", ...env });
      try {
        const lines = await logged(server, (ls) => ls.some((l) => l.msg === "listening"));
        return { port: new URL(server.url).port, warned: lines.filter((l) => l.level === "warn").map((l) => [l.msg, (l as { baseUrl?: string }).baseUrl]) };
      } finally {
        await server.dispose();
      }
    };
    const { port, warned } = await warnings({});
    expect(warned).toEqual([
      [
        `HOST=0.0.0.0 without BASE_URL: challenges, tokens, links and the Origin /mcp and the pages accept name http://127.0.0.1:${port}, which other machines cannot use; set BASE_URL to the address clients reach this server at`,
        `http://127.0.0.1:${port}`,
      ],
    ]);
    expect((await warnings({ BASE_URL: "http://walletgate.test" })).warned).toEqual([]);
  });

  test("a DATA_DIR other users may write is warned about at start; one only its owner may write is not", async () => {
    const open = await withDirAsync(async (dir) => {
      chmodSync(dir, 0o777);
      const server = await startTestServer({}, dir);
      try {
        const lines = await logged(server, (ls) => ls.some((l) => l.msg === "listening"));
        return lines.filter((l) => l.level === "warn").map((l) => [l.msg, (l as { mode?: string }).mode]);
      } finally {
        await server.stop();
      }
    });
    expect(open).toEqual([["DATA_DIR can be written by other users of this machine: they could replace its files (secrets included); chmod 700 it", "777"]]);
    const server = await startTestServer();
    try {
      const lines = await logged(server, (ls) => ls.some((l) => l.msg === "listening"));
      expect(lines.filter((l) => l.level === "warn")).toEqual([]);
    } finally {
      await server.dispose();
    }
  });

  test.if(ipv6Loopback)("HOST=::1: the listening line names a URL a client can use ([::1] in brackets)", async () => {
    // server.ts: the `listening` url → `http://${config.host}:${port}` (no brackets)
    const server = await startTestServer({ HOST: "::1" });
    try {
      expect(server.url).toMatch(/^http:\/\/\[::1\]:\d+$/);
      expect((await call(server.url, "/healthz")).status).toBe(200);
    } finally {
      await server.dispose();
    }
  });
});

describe("log", () => {
  test("LOG_LEVEL=silent writes nothing, errors and request lines included", () => {
    // log.ts: RANK silent: 100 → 40 (the error level)
    const lines: string[] = [];
    const log = createLogger("silent", "json", (line) => lines.push(line));
    log.error("boom", { a: 1 });
    log.request({ requestId: "r", method: "GET", path: "/", status: 500, ms: 1 });
    expect(lines).toEqual([]);
  });

  test("each line carries the time it was written (the cached ISO time follows the clock)", () => {
    // log.ts timeNow: `if (ms !== lastMs)` → never after the first line
    let now = Date.UTC(2026, 0, 1, 0, 0, 0, 0);
    const lines: string[] = [];
    const log = createLogger("info", "json", (line) => lines.push(line), () => now);
    log.info("a");
    now += 1500;
    log.info("b");
    log.request({ requestId: "r", method: "GET", path: "/", status: 200, ms: 1 });
    expect(lines.map((l) => (JSON.parse(l) as { time: string }).time)).toEqual(["2026-01-01T00:00:00.000Z", "2026-01-01T00:00:01.500Z", "2026-01-01T00:00:01.500Z"]);
  });

  test("a log that could not be written says, once it can again, how many lines were lost", async () => {
    // log.ts flush(): `dropped += lines` removed
    let failing = true;
    const out: string[] = [];
    const writer: LogWriter = {
      write: (text) => {
        if (failing) throw new Error("ENOSPC: no space left on device");
        out.push(text);
      },
      flush: () => 0,
    };
    const reports: string[] = [];
    const sink = stdoutSink((text) => reports.push(text), writer);
    sink.write("a\n");
    sink.write("b\n");
    await sink.flush();
    sink.write("c\n");
    await sink.flush();
    failing = false;
    sink.write("d\n");
    await sink.flush();
    expect(out).toEqual(["d\n"]);
    expect(reports).toEqual([
      "walletgate: the log cannot be written (ENOSPC: no space left on device); its lines are dropped until it can\n",
      "walletgate: the log can be written again; 3 lines were dropped\n",
    ]);
  });
});

describe("auth/rate-limit: the sliding window", () => {
  const retryAfterOf = (work: () => void): number | null => {
    try {
      work();
      return null;
    } catch (err) {
      return (err as AppError).extra.retryAfter as number;
    }
  };

  test("Retry-After is rounded up: never a moment before the hit leaves", () => {
    // rate-limit.ts: `Math.ceil(retryAfterMs / 1000)` → `Math.floor(…)`
    const rl = createRateLimiter();
    const limit = { name: "t", max: 1, windowMs: 60_000 };
    rl.consume([[limit, "k"]], 0);
    expect(retryAfterOf(() => rl.consume([[limit, "k"]], 500))).toBe(60);
    expect(retryAfterOf(() => rl.consume([[limit, "k"]], 58_500))).toBe(2);
  });

  test("past the key cap the least recently HIT key is forgotten, not the first one made", () => {
    // rate-limit.ts consume: `windows.delete(key)` before the re-insert removed (Map order = first insertion)
    const rl = createRateLimiter({ maxKeys: 2 });
    const limit = { name: "t", max: 2, windowMs: 60_000 };
    rl.consume([[limit, "a"]], 0);
    rl.consume([[limit, "b"]], 1);
    rl.consume([[limit, "a"]], 2); // a is full now, and the most recently hit
    rl.consume([[limit, "c"]], 3); // one key must go: b
    expect(retryAfterOf(() => rl.consume([[limit, "a"]], 4))).toBe(60);
    expect(retryAfterOf(() => rl.consume([[limit, "b"]], 4))).toBeNull();
  });

  test("the sweep keeps a window while its newest hit is live, though its oldest has left", () => {
    // rate-limit.ts purge: `entry.hits[entry.hits.length - 1]!` → `entry.hits[0]!`
    const rl = createRateLimiter();
    const limit = { name: "t", max: 2, windowMs: 1_000 };
    rl.consume([[limit, "k"]], 0);
    rl.consume([[limit, "k"]], 900);
    expect(rl.purge(1_200)).toBe(0);
    rl.consume([[limit, "k"]], 1_200); // the hit at 900 and this one: full
    expect(retryAfterOf(() => rl.consume([[limit, "k"]], 1_200))).toBe(1);
  });
});

describe("db/migrate: a database one version newer than the program is refused (operations.md: 'a database newer than the program is refused')", () => {
  const a = { version: 1, name: "a", sql: "CREATE TABLE a (x INTEGER) STRICT" };
  const b = { version: 2, name: "b", sql: "CREATE TABLE b (x INTEGER) STRICT" };
  const newer = () => {
    const sqlite = new Database(":memory:");
    migrate(sqlite, 1, [a, b]);
    sqlite.query("INSERT INTO schema_migrations (version, name, applied_at) VALUES (3, 'next', 1)").run();
    return sqlite;
  };

  test("by serve's check and by migrate", () => {
    // migrate.ts refuseNewer: `version > latest` → `version > latest + 1`
    const sqlite = newer();
    expect(() => pendingVersions(sqlite, [a, b])).toThrow(SchemaTooNewError);
    expect(() => migrate(sqlite, 2, [a, b])).toThrow("the database schema is version 3 but this program knows only up to 2");
    sqlite.close();
  });

  test("by a one-shot command", () => {
    // migrate.ts migrateFreshOnly: its `refuseNewer(…)` removed (the newer database has every migration of ours)
    const sqlite = newer();
    expect(() => migrateFreshOnly(sqlite, 2, [a, b])).toThrow(SchemaTooNewError);
    sqlite.close();
  });
});

describe("mcp/http: the session cap and calls in flight (real server over HTTP, a ledger node held back)", () => {
  const PROTOCOL = "2025-06-18";
  const headers = { "content-type": "application/json", accept: "application/json, text/event-stream" };
  const initialize = (server: TestServer) =>
    fetch(`${server.url}/mcp`, {
      method: "POST",
      headers,
      body: JSON.stringify({ jsonrpc: "2.0", id: 0, method: "initialize", params: { protocolVersion: PROTOCOL, capabilities: {}, clientInfo: { name: "raw", version: "1" } } }),
    });
  const post = (server: TestServer, sessionId: string, body: unknown, init: { bearer?: string; signal?: AbortSignal } = {}) =>
    fetch(`${server.url}/mcp`, {
      method: "POST",
      signal: init.signal,
      headers: { ...headers, "mcp-session-id": sessionId, "mcp-protocol-version": PROTOCOL, ...(init.bearer ? { authorization: `Bearer ${init.bearer}` } : {}) },
      body: JSON.stringify(body),
    });

  const openSession = async (server: TestServer) => {
    const res = await initialize(server);
    expect(res.status).toBe(200);
    const id = res.headers.get("mcp-session-id")!;
    expect((await post(server, id, { jsonrpc: "2.0", method: "notifications/initialized" })).status).toBe(202);
    return id;
  };
  const listTools = async (server: TestServer, id: string) => (await post(server, id, { jsonrpc: "2.0", id: 7, method: "tools/list" })).status;

  test("at MCP_MAX_SESSIONS, a GET for an unknown session is 404, as for any request (405 is only for a known one out of memory)", async () => {
    // http.ts streamOfSessionOutOfMemory(): its `row === null || row.endedAt !== null` → 404 removed
    const server = await startTestServer({ AUTH_RATE_LIMIT: "off", MCP_MAX_SESSIONS: "1" });
    try {
      const held = await openSession(server); // the one place is taken
      const get = (id: string) => fetch(`${server.url}/mcp`, { headers: { accept: "text/event-stream", "mcp-session-id": id, "mcp-protocol-version": PROTOCOL } });
      const unknown = await get("00000000-0000-4000-8000-000000000000");
      expect([unknown.status, ((await unknown.json()) as { error: { code: number } }).error.code]).toEqual([404, -32001]);
      expect((await fetch(`${server.url}/mcp`, { method: "DELETE", headers: { "mcp-session-id": held, "mcp-protocol-version": PROTOCOL } })).status).toBe(200);
      await openSession(server); // the place is taken again, by another
      const ended = await get(held);
      expect(ended.status).toBe(404);
      await ended.body?.cancel();
    } finally {
      await server.dispose();
    }
  });

  test("past MCP_MAX_SESSIONS the least recently active session leaves memory, not the most recent one", async () => {
    // http.ts takeRoom(): `live.lastActivity < oldest.lastActivity` → `>`
    const server = await startTestServer({ AUTH_RATE_LIMIT: "off", MCP_MAX_SESSIONS: "2", LOG_LEVEL: "debug" });
    try {
      const older = await openSession(server);
      await Bun.sleep(20);
      const newer = await openSession(server);
      await Bun.sleep(20);
      expect(await listTools(server, newer)).toBe(200); // the most recently active
      await openSession(server); // a third: one of the two leaves memory
      const keyOf = (id: string) => createHash("sha256").update(id).digest("hex").slice(0, 12);
      const rebuilt = () =>
        server
          .output()
          .split("\n")
          .filter((l) => l.includes('"mcp session rebuilt"'))
          .map((l) => (JSON.parse(l) as { mcpSessionKey: string }).mcpSessionKey);
      expect(await listTools(server, newer)).toBe(200);
      await logged(server, (ls) => ls.some((l) => l.method === "POST" && l.status === 200), 500);
      expect(rebuilt()).not.toContain(keyOf(newer)); // still in memory
      expect(await listTools(server, older)).toBe(200);
      await logged(server, (ls) => ls.some((l) => l.msg === "mcp session rebuilt"), 2_000);
      expect(rebuilt()).toContain(keyOf(older)); // it was the one evicted, and is rebuilt now
    } finally {
      await server.dispose();
    }
  });

  test("a session with a call in flight longer than MCP_SESSION_TIMEOUT_MS is not swept: the call is answered, the session stays in memory", async () => {
    // http.ts sweep(): `!busy(live) && now - live.lastActivity > …` → `now - live.lastActivity > …`
    const rpc = await startLiteSvmRpc();
    const gate = Promise.withResolvers<void>();
    const reached = Promise.withResolvers<number>(); // when the held call reached the node
    let held = false;
    const proxy = Bun.serve({
      port: 0,
      hostname: "127.0.0.1",
      async fetch(request) {
        const body = await request.text();
        if (held) {
          reached.resolve(Date.now());
          await gate.promise;
        }
        return fetch(rpc.url, { method: "POST", headers: { "content-type": "application/json" }, body });
      },
    });
    const server = await startTestServer({ NETWORK: "devnet", SOLANA_RPC_URL: `http://127.0.0.1:${proxy.port}/`, AUTH_RATE_LIMIT: "off", MCP_SESSION_TIMEOUT_MS: "300", LOG_LEVEL: "debug" });
    try {
      const bearer = (await signIn(server.url, newWallet())).sessionToken as string;
      const id = await openSession(server);
      held = true;
      const answer = post(server, id, { jsonrpc: "2.0", id: 1, method: "tools/call", params: { name: "wallet_get_balance", arguments: {} } }, { bearer });
      const inFlightFrom = await reached.promise;
      await Bun.sleep(1_500); // five timeouts, and as many sweeps
      held = false;
      gate.resolve();
      const res = await answer;
      expect(res.status).toBe(200);
      expect(((await res.json()) as { result: { structuredContent: { success: boolean } } }).result.structuredContent.success).toBe(true);
      // No sweep while the call was in flight (one before it, on a machine slow to send it, is no matter).
      const sweeps = server
        .output()
        .split("\n")
        .filter((line) => line.includes('"mcp sessions swept"'))
        .map((line) => Date.parse((JSON.parse(line) as { time: string }).time));
      expect(sweeps.filter((at) => at >= inFlightFrom)).toEqual([]);
    } finally {
      gate.resolve();
      await server.dispose();
      await proxy.stop(true);
      await rpc.stop();
    }
  }, 60_000);

  test("at MCP_MAX_SESSIONS, a session with a call in flight is not evicted (503 Retry-After: 1); once its client has left, it is", async () => {
    // http.ts busy(): `live.initializing || live.exchanges.size > 0` → `live.initializing` (503 expected, the newcomer evicts it);
    // http.ts settleAbandoned(): `if (!exchange.request.signal.aborted) continue;` → `continue;` (200 expected after the client left)
    const rpc = await startLiteSvmRpc();
    const gate = Promise.withResolvers<void>();
    const reached = Promise.withResolvers<number>(); // when the held call reached the node
    let held = false;
    const proxy = Bun.serve({
      port: 0,
      hostname: "127.0.0.1",
      async fetch(request) {
        const body = await request.text();
        if (held) {
          reached.resolve(Date.now());
          await gate.promise;
        }
        return fetch(rpc.url, { method: "POST", headers: { "content-type": "application/json" }, body });
      },
    });
    const server = await startTestServer({ NETWORK: "devnet", SOLANA_RPC_URL: `http://127.0.0.1:${proxy.port}/`, AUTH_RATE_LIMIT: "off", MCP_MAX_SESSIONS: "1" });
    try {
      const bearer = (await signIn(server.url, newWallet())).sessionToken as string;
      const opened = await initialize(server);
      expect(opened.status).toBe(200);
      const sessionId = opened.headers.get("mcp-session-id")!;
      expect((await post(server, sessionId, { jsonrpc: "2.0", method: "notifications/initialized" })).status).toBe(202);

      held = true;
      const leave = new AbortController();
      const inFlight = post(server, sessionId, { jsonrpc: "2.0", id: 1, method: "tools/call", params: { name: "wallet_get_balance", arguments: {} } }, { bearer, signal: leave.signal }).catch(
        (err: Error) => err.name,
      );
      await reached.promise; // the call waits on the node

      const refused = await initialize(server);
      expect([refused.status, refused.headers.get("retry-after")]).toEqual([503, "1"]);
      expect(((await refused.json()) as { error: { message: string } }).error.message).toContain("every MCP session is busy");

      leave.abort(); // its client leaves: the session may leave memory now
      expect(await inFlight).toBe("AbortError");
      await Bun.sleep(50);
      expect((await initialize(server)).status).toBe(200);
    } finally {
      gate.resolve();
      await server.dispose();
      await proxy.stop(true);
      await rpc.stop();
    }
  }, 60_000);
});

describe("db/backup", () => {
  const source = (dir: string) => {
    const sqlite = new Database(join(dir, "live.db"));
    sqlite.run("CREATE TABLE t (x INTEGER)");
    sqlite.run("INSERT INTO t VALUES (1)");
    return sqlite;
  };

  test("leaves nothing beside the copy: no hidden partial copy of the database", () => {
    // backup.ts: the `finally { rmSync(partial) }` removed (a second full copy, every token row and sealed secret, left hidden)
    withDir((dir) => {
      const sqlite = source(dir);
      mkdirSync(join(dir, "out"));
      backupDatabase(sqlite, join(dir, "out", "b.db"));
      sqlite.close();
      expect(readdirSync(join(dir, "out"))).toEqual(["b.db"]);
    });
  });

  test("an existing target is refused in the command's own words, and left as it was", () => {
    // backup.ts: `if (code === "EEXIST") throw targetExists(target);` removed (the raw EEXIST of link(2) instead)
    withDir((dir) => {
      const sqlite = source(dir);
      writeFileSync(join(dir, "b.db"), "mine");
      expect(() => backupDatabase(sqlite, join(dir, "b.db"))).toThrow(new BackupTargetError(`${join(dir, "b.db")} exists; back up to a new file`));
      sqlite.close();
      expect(readFileSync(join(dir, "b.db"), "utf8")).toBe("mine");
      expect(readdirSync(dir).sort()).toEqual(["b.db", "live.db"]);
    });
  });
});

describe("db/file-lock", () => {
  test("a directory where the lock file goes is refused as a directory (DATA_DIR's message says so), not as 'no access'", () => {
    // file-lock.ts lockFileError(): `return isDirectory ? …EISDIR… : …EACCES…` → always EACCES
    withDir((dir) => {
      const path = join(dir, "walletgate.db.locks");
      mkdirSync(path);
      let error: unknown = null;
      try {
        tryLock(path, "shared");
      } catch (err) {
        error = err;
      }
      expect(error).toMatchObject({ code: "EISDIR", path, message: `${path} is a directory, not a file` });
      const said = dataDirError(loadConfig({ DATA_DIR: dir }), error);
      expect(said?.message).toBe(`DATA_DIR ${dir}: ${path} is a directory, not a file`);
    });
  });
});

describe("cli: what scripts rely on (operations.md: exit 2 for usage; --json gives a JSON object)", () => {
  const WALLET = "11111111111111111111111111111112";

  test("extra or missing arguments, and a value the command refuses, exit 2", async () => {
    await withDirAsync(async (dir) => {
      expect((await runCli(["migrate"], { DATA_DIR: dir })).code).toBe(0);
      const cases: [string[], string][] = [
        [["restore", join(dir, "a.db"), join(dir, "b.db")], 'unexpected argument'], // restore.ts: { min: 1, max: 1 } → max: 2
        [["owners", "list", "extra"], "owners list: wrong arguments"], // owners.ts: `sub === "list" && positionals.length === 1` → `sub === "list"`
        [["owners", "set-tier", WALLET, "pro", "extra"], 'unexpected argument "extra"'], // owners.ts: { max: 3 } → { max: 4 }
        [["owners", "set-tier", "not-an-address", "pro"], "the owner must be a base58 wallet address"], // owners.ts: INVALID_ADDRESS → exit 1
        [["keys", "create", "extra", "--owner", WALLET, "--label", "x"], "keys create: wrong arguments"], // keys.ts: `sub === "create" && keyId === undefined` → `sub === "create"`
        [["keys", "list", "extra", "--owner", WALLET], "keys list: wrong arguments"], // keys.ts: the same for list
        [["keys", "create", "--owner", WALLET], "--label <text> is required"], // keys.ts: `if (values.label === undefined) throw` → `if (false) throw`
        [["keys", "create", "--owner", WALLET, "--label", "x".repeat(101)], "label"], // keys.ts: VALIDATION_ERROR → exit 1
        [["keys", "revoke"], "keys revoke: wrong arguments"], // keys.ts: `sub === "revoke" && keyId !== undefined` → `sub === "revoke"`
        [["keys", "revoke", "key_x", "extra"], 'unexpected argument "extra"'], // keys.ts: { max: 2 } → { max: 3 }
        [["orders", "frob", "ord_x", "--release"], 'unknown orders command "frob"'], // orders.ts: `if (sub !== "resolve") throw` → `if (false) throw`
      ];
      for (const [args, said] of cases) {
        const r = await runCli(args, { DATA_DIR: dir });
        expect({ args, code: r.code, said: r.stderr.includes(said) }).toEqual({ args, code: 2, said: true });
      }
    });
  }, 60_000);

  test("keys list (text) says which keys are revoked", async () => {
    // keys.ts: `k.revokedAt === null ? "active" : "revoked"` → `"active"`
    await withDirAsync(async (dir) => {
      expect((await runCli(["migrate"], { DATA_DIR: dir })).code).toBe(0);
      const created = JSON.parse((await runCli(["keys", "create", "--owner", WALLET, "--label", "gone", "--json"], { DATA_DIR: dir })).stdout) as { keyId: string };
      expect((await runCli(["keys", "create", "--owner", WALLET, "--label", "kept"], { DATA_DIR: dir })).code).toBe(0);
      expect((await runCli(["keys", "revoke", created.keyId], { DATA_DIR: dir })).code).toBe(0);
      const listed = await runCli(["keys", "list", "--owner", WALLET], { DATA_DIR: dir });
      const status = Object.fromEntries(listed.stdout.trim().split("\n").map((line) => { const f = line.split("\t"); return [f[2], f[3]]; }));
      expect(status).toEqual({ gone: "revoked", kept: "active" });
    });
  }, 30_000);

  test("owners set-tier --json prints the owner as JSON", async () => {
    // owners.ts: `values.json ? JSON.stringify(owner) : …` → the text line always
    await withDirAsync(async (dir) => {
      expect((await runCli(["migrate"], { DATA_DIR: dir })).code).toBe(0);
      const r = await runCli(["owners", "set-tier", WALLET, "pro", "--json"], { DATA_DIR: dir });
      expect(r.code).toBe(0);
      expect(JSON.parse(r.stdout)).toMatchObject({ walletAddress: WALLET, tier: "pro" });
    });
  }, 30_000);

  test("a config flag in its `--name=value` spelling takes no argument after it (the command's own `--json` stays the command's)", async () => {
    // cli/args.ts splitArgs(): `match[2] === undefined && i + 1 < argv.length` → `i + 1 < argv.length`
    await withDirAsync(async (dir) => {
      expect((await runCli(["migrate"], { DATA_DIR: dir })).code).toBe(0);
      const r = await runCli(["owners", "list", `--data-dir=${dir}`, "--json"]);
      expect({ code: r.code, stderr: r.stderr }).toEqual({ code: 0, stderr: "" });
      expect(JSON.parse(r.stdout)).toEqual({ owners: [] });
    });
  }, 30_000);

  test("ledger airdrop: 0 of one token means none of it (spec README: 'airdrop amounts alone accept 0, meaning none'); the service token goes by SERVICE_TOKEN_SYMBOL", async () => {
    // cli/ledger.ts: `{ allowZero: true }` → `{ allowZero: false }`; `amount("token", config.serviceToken.symbol)` → `amount("token", "wgt")`
    await withDirAsync(async (dir) => {
      expect((await runCli(["migrate"], { DATA_DIR: dir, SERVICE_TOKEN_SYMBOL: "abc" })).code).toBe(0);
      const zeroSol = await runCli(["ledger", "airdrop", "--to", WALLET, "--sol", "0", "--usdc", "1", "--json"], { DATA_DIR: dir, SERVICE_TOKEN_SYMBOL: "abc" });
      expect({ code: zeroSol.code, stderr: zeroSol.stderr }).toEqual({ code: 0, stderr: "" });
      expect(JSON.parse(zeroSol.stdout).signatures).toHaveLength(1); // USDC alone
      const token = await runCli(["ledger", "airdrop", "--to", WALLET, "--token", "5", "--json"], { DATA_DIR: dir, SERVICE_TOKEN_SYMBOL: "abc" });
      expect({ code: token.code, stderr: token.stderr }).toEqual({ code: 0, stderr: "" });
      expect(JSON.parse(token.stdout).signatures).toHaveLength(1);
    });
  }, 30_000);

  test("ledger airdrop off localnet is refused before any ledger is asked (operations.md: `walletgate ledger airdrop` (localnet))", async () => {
    // cli/ledger.ts: `if (config.network !== "localnet")` → `if (false)` (the devnet node's faucet asked instead)
    await withDirAsync(async (dir) => {
      expect((await runCli(["migrate"], { DATA_DIR: dir, NETWORK: "devnet" })).code).toBe(0);
      const r = await runCli(["ledger", "airdrop", "--to", WALLET, "--sol", "1"], { DATA_DIR: dir, NETWORK: "devnet", SOLANA_RPC_URL: "http://127.0.0.1:9" });
      expect({ code: r.code, stdout: r.stdout, stderr: r.stderr }).toEqual({
        code: 1,
        stdout: "",
        stderr: "walletgate: airdrops come from the embedded ledger: NETWORK=localnet only (this is devnet)\n",
      });
    });
  }, 30_000);

  test("restore over a database says where the one it replaced went, and what it carried over", async () => {
    // restore.ts: the `movedAside` line and the carried-over line removed
    await withDirAsync(async (dir) => {
      expect((await runCli(["migrate"], { DATA_DIR: dir })).code).toBe(0);
      const copy = join(dir, "..", `${dir.split("/").pop()}-backup.db`);
      try {
        expect((await runCli(["backup", copy], { DATA_DIR: dir })).code).toBe(0);
        const r = await runCli(["restore", copy], { DATA_DIR: dir });
        expect(r.code).toBe(0);
        expect(r.stderr).toMatch(/the database it replaced, with its log, is now \S+/);
        expect(r.stderr).toContain("revocations made after the backup, carried over: 0 session tokens, 0 revoke-alls, 0 API keys");
      } finally {
        rmSync(copy, { force: true });
      }
    });
  }, 60_000);
});
