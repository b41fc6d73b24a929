// The only reader of the environment: variables and flags → one validated, frozen Config.
import { chmodSync, existsSync, readFileSync, statSync } from "node:fs";
import { join, resolve } from "node:path";
import { createFilesDurably, removeAsideLeftovers } from "./lib/durable.ts";
import { isatty } from "node:tty";
import { decodeAddress, NOT_REPEATED } from "./lib/encoding.ts";
import { isListenHost, MAX_TRUSTED_HOPS, namesPrivateHost, parseTrustProxy, type TrustProxy } from "./lib/ip.ts";
import { DAY_MS } from "./lib/clock.ts";

export type Network = "localnet" | "devnet" | "mainnet";
export type LogLevel = "debug" | "info" | "warn" | "error" | "silent";

export type Config = Readonly<{
  port: number;
  host: string;
  /** Public URL; null until the port is known when PORT=0 and BASE_URL is unset. */
  baseUrl: string | null;
  /** Whether BASE_URL was given (else baseUrl comes from HOST and PORT). */
  baseUrlGiven: boolean;
  dataDir: string;
  databasePath: string;
  network: Network;
  jwtSecret: string | null;
  jwtSecretPrevious: string | null;
  walletEncryptionKey: string | null;
  sessionTtlS: number;
  sessionMaxAgeS: number;
  refreshThresholdS: number;
  challengeTtlMs: number;
  purgeIntervalMs: number;
  /**
   * Finished webhook deliveries (succeeded or failed) are deleted this many days after their last attempt,
   * with their attempts and events left without deliveries; 0 keeps them all (paygate.md: any delivery can
   * be resent).
   */
  webhookRetentionDays: number;
  authRateLimit: boolean;
  fingerprintRestore: boolean;
  trustProxy: TrustProxy;
  maxBodyBytes: number;
  /** Seconds a connection may stay silent (between requests, or a request that cannot wait on the ledger). */
  httpIdleTimeoutS: number;
  logLevel: LogLevel;
  logFormat: "json" | "pretty";
  sqliteSynchronous: "FULL" | "NORMAL" | "EXTRA";
  /** Solana JSON-RPC endpoint of devnet/mainnet; null on localnet (the embedded ledger). */
  solanaRpcUrl: string | null;
  serviceToken: Readonly<{ symbol: string; decimals: number; mint: string | null }>;
  /** An MCP session idle this long is dropped from memory (and rebuilt from its record when it comes back). */
  mcpSessionTimeoutMs: number;
  /** MCP sessions held in memory at most; past it the least recently active leaves memory (it can be rebuilt). */
  mcpMaxSessions: number;
  /** `walletgate mcp` (stdio): the session token every call runs with, if given. */
  walletgateToken: string | null;
  /** Default fee payer of payment_create's x402 transactions. */
  x402FeePayer: string | null;
  /** Webhooks and agent endpoints may target private, loopback and link-local addresses (tests, labs). */
  allowPrivateNetworkTargets: boolean;
  /** The marketplace's cut of a released order, in basis points (0–10000), paid to `feeWallet`. */
  marketplace: Readonly<{ feeBps: number; feeWallet: string | null }>;
  /**
   * `serve` stops, as on SIGTERM, once the process that started it has ended (a test runner killed): true
   * for its parent, or the id of the process to outlive no longer (a starter that may end before serve looks).
   */
  exitWithParent: boolean | number;
}>;

/** A variable that cannot be used; the message names it. */
export class ConfigError extends Error {
  override name = "ConfigError";
}

/** A flag that is not one of ours, or one without its value (exit code 2). */
export class UsageError extends ConfigError {
  override name = "UsageError";
  /** The usage shown after the message: the command's own, else the program's. */
  constructor(
    message: string,
    readonly usage?: string,
  ) {
    super(message);
  }
}

/** Every variable this version reads, with its flag spelling (`--data-dir` for DATA_DIR). */
export const CONFIG_VARIABLES = [
  "PORT", "HOST", "BASE_URL", "DATA_DIR", "DATABASE_URL", "NETWORK", "JWT_SECRET", "JWT_SECRET_PREVIOUS",
  "WALLET_ENCRYPTION_KEY", "SESSION_TTL_S", "SESSION_MAX_AGE_S", "REFRESH_THRESHOLD_S", "CHALLENGE_TTL_MS",
  "PURGE_INTERVAL_MS", "AUTH_RATE_LIMIT", "FINGERPRINT_RESTORE", "TRUST_PROXY", "MAX_BODY_BYTES", "HTTP_IDLE_TIMEOUT_S", "LOG_LEVEL",
  "LOG_FORMAT", "SQLITE_SYNCHRONOUS", "SOLANA_RPC_URL", "SERVICE_TOKEN_SYMBOL", "SERVICE_TOKEN_MINT",
  "SERVICE_TOKEN_DECIMALS", "MCP_SESSION_TIMEOUT_MS", "MCP_MAX_SESSIONS", "WALLETGATE_TOKEN", "X402_FEE_PAYER",
  "ALLOW_PRIVATE_NETWORK_TARGETS", "MARKETPLACE_FEE_BPS", "MARKETPLACE_FEE_WALLET", "WEBHOOK_RETENTION_DAYS",
  "EXIT_WITH_PARENT",
] as const;

/** A variable's flag, without its dashes: `data-dir` for DATA_DIR (flagsToVars reads it back). */
export const flagName = (name: string): string => name.toLowerCase().replaceAll("_", "-");

/**
 * One line per variable for `walletgate --help` (the binary carries no README): its default and what it is.
 * The README's configuration table says more; a test keeps both naming every variable.
 */
export const CONFIG_HELP: Readonly<Record<(typeof CONFIG_VARIABLES)[number], string>> = {
  PORT: "3000; 0 picks a free port",
  HOST: "127.0.0.1; the address to listen on (0.0.0.0: every one, then set BASE_URL)",
  BASE_URL: "http://{HOST}:{PORT}; the public origin (no path): challenges, token issuer, links",
  DATA_DIR: "./data; the database and generated secrets",
  DATABASE_URL: "unset (SQLite in DATA_DIR); PostgreSQL is a later release",
  NETWORK: "localnet (embedded ledger), devnet or mainnet",
  JWT_SECRET: "generated into DATA_DIR off mainnet; 32+ bytes",
  JWT_SECRET_PREVIOUS: "none; the secret before a rotation",
  WALLET_ENCRYPTION_KEY: "generated into DATA_DIR off mainnet; 32 bytes, hex or base64",
  SESSION_TTL_S: "604800 (7 days); token lifetime",
  SESSION_MAX_AGE_S: "2592000 (30 days); how long a session may be refreshed",
  REFRESH_THRESHOLD_S: "3600; session_restore refreshes a token with less left",
  CHALLENGE_TTL_MS: "300000 (5 minutes); challenge lifetime",
  PURGE_INTERVAL_MS: "3600000; how often expired rows are deleted",
  AUTH_RATE_LIMIT: "on; off only off mainnet (tests, benchmarks)",
  FINGERPRINT_RESTORE: "on off mainnet, off on mainnet; MCP restore by IP and User-Agent",
  TRUST_PROXY: "none; proxy hops or addresses/CIDRs whose X-Forwarded-For is believed",
  MAX_BODY_BYTES: "65536; request body limit",
  HTTP_IDLE_TIMEOUT_S: "10; an idle connection is closed after this (1-255)",
  LOG_LEVEL: "info; debug, info, warn, error or silent",
  LOG_FORMAT: "pretty on a terminal, else json",
  SQLITE_SYNCHRONOUS: "FULL; EXTRA, or NORMAL to trade crash safety for speed",
  SOLANA_RPC_URL: "devnet's public node on devnet; required on mainnet (with an API key in it, give it in the environment: not as a flag)",
  SERVICE_TOKEN_SYMBOL: "wgt; the service token's name in balances and transfers",
  SERVICE_TOKEN_MINT: "none; its SPL mint on devnet/mainnet",
  SERVICE_TOKEN_DECIMALS: "6; its decimals (0-9)",
  MCP_SESSION_TIMEOUT_MS: "3600000; an idle MCP session leaves memory after this",
  MCP_MAX_SESSIONS: "10000; MCP sessions held in memory",
  WALLETGATE_TOKEN: "none; walletgate mcp: the session token calls run with",
  X402_FEE_PAYER: "none; payment_create's default fee payer",
  ALLOW_PRIVATE_NETWORK_TARGETS: "false; let webhooks and agents reach private addresses",
  MARKETPLACE_FEE_BPS: "0; the marketplace's cut of a released order (basis points)",
  MARKETPLACE_FEE_WALLET: "none; the wallet that receives it",
  WEBHOOK_RETENTION_DAYS: "0 (keep); delete finished webhook deliveries this many days old",
  EXIT_WITH_PARENT: "false; true or a process id: serve stops when its parent (or that process) ends (test suites)",
};

/**
 * The configuration part of `walletgate --help`: each variable as its flag with its default and meaning,
 * then the secrets, which are variables only.
 */
export function configHelp(): string {
  const line = (shown: string, name: (typeof CONFIG_VARIABLES)[number]) => `  ${shown.padEnd(33)}${CONFIG_HELP[name]}`;
  const isSecret = (name: string) => SECRET_VARIABLES.includes(name);
  return [
    ...CONFIG_VARIABLES.filter((name) => !isSecret(name)).map((name) => line(`--${flagName(name)}`, name)),
    "",
    "Secrets, in the environment or .env only (never flags: every local user can read a process's arguments):",
    ...CONFIG_VARIABLES.filter(isSecret).map((name) => line(name, name)),
  ].join("\n");
}

const DEVNET_RPC_URL = "https://api.devnet.solana.com";

type Vars = Partial<Record<(typeof CONFIG_VARIABLES)[number], string>>;

/**
 * Variables that are secrets themselves: never flags, since a process's arguments are readable by every
 * local user (`ps`). They come from the environment, `.env` or DATA_DIR's files.
 */
const SECRET_VARIABLES: readonly string[] = ["JWT_SECRET", "JWT_SECRET_PREVIOUS", "WALLET_ENCRYPTION_KEY", "WALLETGATE_TOKEN"];

/** Turns `--data-dir x` / `--data-dir=x` flags into variables; unknown flags are a ConfigError. */
export function flagsToVars(flags: string[]): Vars {
  const vars: Vars = {};
  for (let i = 0; i < flags.length; i++) {
    const flag = flags[i]!;
    const match = /^--([a-z0-9-]+)(?:=(.*))?$/.exec(flag);
    const name = match?.[1]?.toUpperCase().replaceAll("-", "_");
    if (!match || !name || !(CONFIG_VARIABLES as readonly string[]).includes(name)) {
      throw new UsageError(`unknown option ${flag}`);
    }
    if (SECRET_VARIABLES.includes(name)) {
      throw new UsageError(`option --${match[1]} is not taken: a secret on the command line is visible to every local user (ps); set ${name} in the environment or .env`);
    }
    let value = match[2];
    if (value === undefined) {
      value = flags[++i];
      if (value === undefined) throw new UsageError(`option ${flag} needs a value`);
    }
    // Given twice, one of them would be dropped without a word: which was meant is not ours to guess.
    if (name in vars) throw new UsageError(`option --${match[1]} is given twice`);
    vars[name as keyof Vars] = value;
  }
  return vars;
}

/** The longest delay a timer takes (2^31 - 1 ms, ~24.8 days): a longer one fires at once, every time. */
const MAX_TIMER_MS = 2_147_483_647;
/** The longest lifetime a token or session may be given (dates stay well inside what ISO strings show). */
const TEN_YEARS_S = 10 * 365 * 86_400;

function int(vars: Vars, name: keyof Vars, fallback: number, min: number, max = Number.MAX_SAFE_INTEGER): number {
  const raw = vars[name]?.trim();
  if (raw === undefined || raw === "") return fallback;
  if (!/^\d+$/.test(raw)) throw new ConfigError(`${name} must be a whole number, got "${raw}"`);
  const value = Number(raw);
  if (value < min || value > max) throw new ConfigError(`${name} must be between ${min} and ${max}, got ${raw}`);
  return value;
}

/** EXIT_WITH_PARENT: on or off (0 and 1 among the words), or a process id (2 and up; Linux's largest is 4194304). */
function exitWithParent(vars: Vars): boolean | number {
  const raw = vars.EXIT_WITH_PARENT?.trim() ?? "";
  if (/^\d+$/.test(raw) && raw !== "0" && raw !== "1") return int(vars, "EXIT_WITH_PARENT", 0, 2, 4194304);
  try {
    return onOff(vars, "EXIT_WITH_PARENT", false);
  } catch {
    throw new ConfigError(`EXIT_WITH_PARENT must be on, off or a process id, got "${vars.EXIT_WITH_PARENT}"`);
  }
}

function oneOf<T extends string>(vars: Vars, name: keyof Vars, allowed: readonly T[], fallback: T): T {
  const raw = vars[name]?.trim();
  if (raw === undefined || raw === "") return fallback;
  const value = (name === "SQLITE_SYNCHRONOUS" ? raw.toUpperCase() : raw.toLowerCase()) as T;
  if (!allowed.includes(value)) throw new ConfigError(`${name} must be one of ${allowed.join(", ")}, got "${raw}"`);
  return value;
}

function onOff(vars: Vars, name: keyof Vars, fallback: boolean): boolean {
  const raw = vars[name]?.trim().toLowerCase();
  if (raw === undefined || raw === "") return fallback;
  if (["on", "true", "1", "yes"].includes(raw)) return true;
  if (["off", "false", "0", "no"].includes(raw)) return false;
  throw new ConfigError(`${name} must be on or off, got "${vars[name]}"`);
}

/** A URL's host as `new URL` writes it ("" when it does not parse). */
function hostOf(url: string): string {
  try {
    return new URL(url).hostname;
  } catch {
    return "";
  }
}

function secret(vars: Vars, name: keyof Vars): string | null {
  const raw = vars[name];
  if (raw === undefined || raw === "") return null;
  if (Buffer.byteLength(raw) < 32) throw new ConfigError(`${name} must be at least 32 bytes long`);
  return raw;
}

/** The process environment (Bun has already merged the working directory's `.env` files into it: README, Configuration). */
export function processEnv(): Record<string, string | undefined> {
  return process.env;
}

/** Reads the environment (and flags, which win) once. Throws ConfigError naming the bad variable. */
export function loadConfig(env: Record<string, string | undefined>, flags: string[] = []): Config {
  const vars: Vars = {};
  for (const name of CONFIG_VARIABLES) if (env[name] !== undefined) vars[name] = env[name];
  Object.assign(vars, flagsToVars(flags));

  const network = oneOf(vars, "NETWORK", ["localnet", "devnet", "mainnet"] as const, "localnet");
  const mainnet = network === "mainnet";
  const port = int(vars, "PORT", 3000, 0, 65535);
  const host = vars.HOST?.trim() || "127.0.0.1";
  if (!isListenHost(host)) {
    throw new ConfigError(`HOST must be an IPv4 address, an IPv6 address (without brackets) or a hostname, got "${host}"`);
  }

  let baseUrl: string | null = null;
  const rawBase = vars.BASE_URL?.trim();
  if (rawBase) {
    let url: URL;
    // Not echoed when it may carry a password (refused below, but a refusal must not print it): any "@".
    const shown = rawBase.includes("@") ? "(not repeated: it holds an @, which may be a password's)" : `"${rawBase}"`;
    try {
      url = new URL(rawBase);
    } catch {
      throw new ConfigError(`BASE_URL must be an absolute http(s) URL, got ${shown}`);
    }
    if (url.protocol !== "http:" && url.protocol !== "https:") {
      throw new ConfigError(`BASE_URL must be an absolute http(s) URL, got ${shown}`);
    }
    // It is signed into every challenge and token: nothing there but scheme, host and port.
    if (url.username || url.password || url.search || url.hash) {
      throw new ConfigError("BASE_URL must not carry credentials, a query or a fragment");
    }
    // The pages load their scripts and call the API at root paths (`/chunk-….js`, `/dashboard/api/…`), so
    // behind a proxy that serves walletgate under a path they would all miss: it has a host name of its own.
    if (!/^\/*$/.test(url.pathname)) {
      throw new ConfigError(
        `BASE_URL must be an origin without a path (scheme, host and port, e.g. https://wallet.example.com), got ${shown}: ` +
          "walletgate is served at the root of its host, so behind a proxy give it a host name of its own",
      );
    }
    // As the URL parser reads it (scheme and host in lower case, a default port dropped, `http:host` given its
    // slashes), so every place that names it (challenges, the token issuer, links) says the same thing.
    baseUrl = url.origin;
  } else if (port !== 0) {
    baseUrl = defaultBaseUrl(host, port);
  }

  const databaseUrl = vars.DATABASE_URL?.trim();
  if (databaseUrl) {
    throw new ConfigError("DATABASE_URL: PostgreSQL is not supported by this version yet; unset it to use SQLite in DATA_DIR");
  }
  const dataDir = resolve(vars.DATA_DIR?.trim() || "./data");

  const jwtSecret = secret(vars, "JWT_SECRET");
  const walletEncryptionKey = vars.WALLET_ENCRYPTION_KEY?.trim() || null;
  if (walletEncryptionKey !== null && decodeKey32(walletEncryptionKey) === null) {
    throw new ConfigError("WALLET_ENCRYPTION_KEY must be 32 bytes as 64 hex characters or base64");
  }
  if (mainnet && jwtSecret === null) throw new ConfigError("JWT_SECRET is required on mainnet (32+ bytes)");
  if (mainnet && walletEncryptionKey === null) {
    throw new ConfigError("WALLET_ENCRYPTION_KEY is required on mainnet (32 bytes, hex or base64)");
  }

  const rawRpc = vars.SOLANA_RPC_URL?.trim() || null;
  /** An http(s) URL as fetch will read it: it parses, names a host, and carries no whitespace. */
  const isHttpUrl = (value: string) => {
    if (!/^https?:\/\/[^\s]+$/i.test(value) || !URL.canParse(value)) return false;
    return new URL(value).hostname !== "";
  };
  if (mainnet && rawRpc === null) throw new ConfigError("SOLANA_RPC_URL is required on mainnet");
  if (rawRpc !== null && !isHttpUrl(rawRpc)) {
    // Not echoed: RPC providers put their API key in the URL.
    throw new ConfigError("SOLANA_RPC_URL must be an http(s) URL");
  }
  // On mainnet the node's answers decide which payments count: over plain http anyone on the path could
  // forge them. A node on this machine or a private network address may be spoken to in the clear.
  if (mainnet && rawRpc !== null && /^http:/i.test(rawRpc) && !namesPrivateHost(hostOf(rawRpc))) {
    throw new ConfigError("SOLANA_RPC_URL must be an https URL on mainnet (plain http only to localhost or a private network address)");
  }
  const solanaRpcUrl = network === "localnet" ? null : (rawRpc ?? DEVNET_RPC_URL);

  const symbol = (vars.SERVICE_TOKEN_SYMBOL?.trim() || "wgt").toLowerCase();
  if (!/^[a-z][a-z0-9]{0,15}$/.test(symbol) || symbol === "sol" || symbol === "usdc") {
    throw new ConfigError(`SERVICE_TOKEN_SYMBOL must be 1-16 letters or digits starting with a letter, not sol or usdc, got "${symbol}"`);
  }
  const serviceMint = vars.SERVICE_TOKEN_MINT?.trim() || null;
  if (serviceMint !== null && decodeAddress(serviceMint) === null) {
    throw new ConfigError(`SERVICE_TOKEN_MINT must be a base58 address of 32 bytes ${NOT_REPEATED}`);
  }
  const serviceToken = Object.freeze({ symbol, decimals: int(vars, "SERVICE_TOKEN_DECIMALS", 6, 0, 9), mint: serviceMint });

  const feeBps = int(vars, "MARKETPLACE_FEE_BPS", 0, 0, 10_000);
  const feeWallet = vars.MARKETPLACE_FEE_WALLET?.trim() || null;
  if (feeWallet !== null && decodeAddress(feeWallet) === null) {
    throw new ConfigError(`MARKETPLACE_FEE_WALLET must be a base58 address of 32 bytes ${NOT_REPEATED}`);
  }
  if (feeBps > 0 && feeWallet === null) throw new ConfigError("MARKETPLACE_FEE_BPS is set: MARKETPLACE_FEE_WALLET must name the wallet that receives the fee");

  const x402FeePayer = vars.X402_FEE_PAYER?.trim() || null;
  if (x402FeePayer !== null && decodeAddress(x402FeePayer) === null) {
    throw new ConfigError(`X402_FEE_PAYER must be a base58 address of 32 bytes ${NOT_REPEATED}`);
  }

  const authRateLimit = onOff(vars, "AUTH_RATE_LIMIT", true);
  if (mainnet && !authRateLimit) throw new ConfigError("AUTH_RATE_LIMIT=off is not allowed on mainnet");

  const trustProxy = parseTrustProxy(vars.TRUST_PROXY);
  if (trustProxy === null) {
    throw new ConfigError(
      `TRUST_PROXY must be a number of hops (at most ${MAX_TRUSTED_HOPS}) or a comma-separated list of addresses or CIDRs (IPv4 in four decimal parts, IPv6), got "${vars.TRUST_PROXY}"`,
    );
  }

  const sessionTtlS = int(vars, "SESSION_TTL_S", 604800, 1, TEN_YEARS_S);
  const config: Config = {
    port,
    host,
    baseUrl,
    baseUrlGiven: Boolean(rawBase),
    dataDir,
    databasePath: join(dataDir, "walletgate.db"),
    network,
    jwtSecret,
    jwtSecretPrevious: secret(vars, "JWT_SECRET_PREVIOUS"),
    walletEncryptionKey,
    sessionTtlS,
    sessionMaxAgeS: int(vars, "SESSION_MAX_AGE_S", 2592000, 1, TEN_YEARS_S),
    refreshThresholdS: int(vars, "REFRESH_THRESHOLD_S", 3600, 0, TEN_YEARS_S),
    challengeTtlMs: int(vars, "CHALLENGE_TTL_MS", 300000, 1, DAY_MS),
    purgeIntervalMs: int(vars, "PURGE_INTERVAL_MS", 3600000, 10, MAX_TIMER_MS),
    webhookRetentionDays: int(vars, "WEBHOOK_RETENTION_DAYS", 0, 0, 36500),
    authRateLimit,
    fingerprintRestore: onOff(vars, "FINGERPRINT_RESTORE", !mainnet),
    trustProxy,
    maxBodyBytes: int(vars, "MAX_BODY_BYTES", 65536, 1024, 64 * 1024 * 1024),
    httpIdleTimeoutS: int(vars, "HTTP_IDLE_TIMEOUT_S", 10, 1, 255),
    logLevel: oneOf(vars, "LOG_LEVEL", ["debug", "info", "warn", "error", "silent"] as const, "info"),
    logFormat: oneOf(vars, "LOG_FORMAT", ["json", "pretty"] as const, isatty(1) ? "pretty" : "json"),
    sqliteSynchronous: oneOf(vars, "SQLITE_SYNCHRONOUS", ["FULL", "NORMAL", "EXTRA"] as const, "FULL"),
    solanaRpcUrl,
    serviceToken,
    mcpSessionTimeoutMs: int(vars, "MCP_SESSION_TIMEOUT_MS", 3600000, 100, MAX_TIMER_MS),
    mcpMaxSessions: int(vars, "MCP_MAX_SESSIONS", 10000, 1),
    walletgateToken: vars.WALLETGATE_TOKEN?.trim() || null,
    x402FeePayer,
    allowPrivateNetworkTargets: onOff(vars, "ALLOW_PRIVATE_NETWORK_TARGETS", false),
    marketplace: Object.freeze({ feeBps, feeWallet }),
    exitWithParent: exitWithParent(vars),
  };
  return Object.freeze(config);
}

/** Whether HOST listens on every address (0.0.0.0, or :: in any spelling): not an address a client can use. */
export function listensEverywhere(host: string): boolean {
  return host === "0.0.0.0" || (host.includes(":") && new URL(`http://[${host}]`).hostname === "[::]");
}

export function defaultBaseUrl(host: string, port: number): string {
  // Listening everywhere is not an address a client can use: loopback is.
  const shown = listensEverywhere(host) ? (host.includes(":") ? "[::1]" : "127.0.0.1") : host.includes(":") ? `[${host}]` : host;
  // As a URL parser reads it, like a given BASE_URL: `LocalHost` is `localhost`, port 80 is dropped.
  return new URL(`http://${shown}:${port}`).origin;
}

/** Decodes a 32-byte key given as hex or base64; null when it is neither. */
export function decodeKey32(text: string): Uint8Array | null {
  if (/^[0-9a-fA-F]{64}$/.test(text)) return new Uint8Array(Buffer.from(text, "hex"));
  if (/^[A-Za-z0-9+/_-]{43}=?$/.test(text)) {
    const bytes = Buffer.from(text.replaceAll("-", "+").replaceAll("_", "/"), "base64");
    return bytes.length === 32 ? new Uint8Array(bytes) : null;
  }
  return null;
}

export type Secrets = Readonly<{
  jwtSecret: Uint8Array;
  jwtSecretPrevious: Uint8Array | null;
  walletEncryptionKey: Uint8Array;
}>;

/** The file a generated wallet encryption key is kept in. */
const walletKeyFile = (config: Config) => join(config.dataDir, "wallet-encryption-key");

/** Where the wallet encryption key comes from, as messages name it. */
export function walletKeySource(config: Config): string {
  return config.walletEncryptionKey !== null ? "WALLET_ENCRYPTION_KEY" : walletKeyFile(config);
}

/**
 * The secrets the server signs and encrypts with: from the environment, or — off mainnet — generated
 * once into DATA_DIR with mode 0600 and reused on every start. Except a wallet encryption key while
 * `holdsSealedData()` (the database already holds values sealed under one: a backup restored without its
 * key file): a new key would open none of them and seal new ones beside them. And except a JWT secret while
 * `signedByAnother()` says who signs instead (a command beside a server whose JWT_SECRET is in its environment: the command's
 * tokens and the server's would not be valid in each other; the server itself passes nothing, a secret of
 * its own ends sessions as rotating JWT_SECRET does). A command that signs nothing asks for `this-run-only`:
 * a missing JWT secret is then made for this run and written nowhere.
 */
export function resolveSecrets(
  config: Config,
  options: { holdsSealedData?: () => boolean; signedByAnother?: () => string | null; jwtSecretIfMissing?: "generate" | "this-run-only" } = {},
): Secrets {
  const keyFile = walletKeyFile(config);
  const jwtFile = join(config.dataDir, "jwt-secret");
  // A command that signs no session (all but serve and mcp) writes no JWT secret: one of its own in DATA_DIR
  // would be taken for the server's by the next command (a server whose JWT_SECRET is in its environment).
  const jwtMissing = config.jwtSecret === null && !existsSync(jwtFile);
  const jwtThisRunOnly = jwtMissing && options.jwtSecretIfMissing === "this-run-only";
  const signer = jwtMissing && !jwtThisRunOnly ? (options.signedByAnother?.() ?? null) : null;
  if (signer !== null) {
    throw new ConfigError(
      `${jwtFile} is missing, but this database's sessions are signed with a JWT secret this command does not have (${signer}; the server's JWT_SECRET?): give it the same JWT_SECRET as the server; a secret of its own would sign tokens the server refuses, and refuse the server's`,
    );
  }
  if (config.walletEncryptionKey === null && !existsSync(keyFile) && options.holdsSealedData?.() === true) {
    throw new ConfigError(
      `${keyFile} is missing, but the database is bound to a wallet encryption key (it holds data sealed under it — custodial wallets, feature tokens, webhook secrets — or recorded it when first opened): put that key back in the file or in WALLET_ENCRYPTION_KEY; a new key could not open them`,
    );
  }
  // Copies a first start killed while creating the secret files left, also of a secret since moved into
  // the environment: a hidden second name for a key must not outlive the key's file.
  removeAsideLeftovers(config.dataDir, ["jwt-secret", "wallet-encryption-key"]);
  const generated = generatedSecrets(config.dataDir, [
    ...(config.jwtSecret === null && !jwtThisRunOnly ? [{ name: "jwt-secret", generate: () => randomText(48) }] : []),
    ...(config.walletEncryptionKey === null ? [{ name: "wallet-encryption-key", generate: () => randomText(32, "hex") }] : []),
  ]);
  const jwt = config.jwtSecret ?? (jwtThisRunOnly ? randomText(48) : generated.get("jwt-secret")!);
  // The file is held to JWT_SECRET's rule: a hand-edited short key would sign tokens anyone could forge.
  if (config.jwtSecret === null && Buffer.byteLength(jwt) < 32) {
    throw new ConfigError(`${jwtFile} holds fewer than 32 bytes: put a longer secret there, or delete it to generate one (sessions signed with it end)`);
  }
  const walletKey = config.walletEncryptionKey ?? generated.get("wallet-encryption-key")!;
  const walletKeyBytes = decodeKey32(walletKey);
  if (walletKeyBytes === null) throw new ConfigError(`${keyFile} does not hold a 32-byte key`);
  return Object.freeze({
    jwtSecret: new TextEncoder().encode(jwt),
    jwtSecretPrevious: config.jwtSecretPrevious === null ? null : new TextEncoder().encode(config.jwtSecretPrevious),
    walletEncryptionKey: walletKeyBytes,
  });
}

/**
 * What a failure to create, write or open DATA_DIR's files means, as a ConfigError naming DATA_DIR (a
 * directory that is a file, not writable, read-only or full); null for any other error. Without it the
 * operator read only "EEXIST: file already exists, mkdir …" or "attempt to write a readonly database".
 */
export function dataDirError(config: Config, err: unknown): ConfigError | null {
  if (err instanceof ConfigError) return null;
  const raw = (err as { code?: unknown } | null)?.code;
  // SQLite's extended codes name the primary one first: SQLITE_READONLY_DIRECTORY is a SQLITE_READONLY.
  const code = typeof raw === "string" ? (/^SQLITE_(READONLY|CANTOPEN|FULL|CORRUPT)/.exec(raw)?.[0] ?? raw) : raw;
  const path = (err as { path?: unknown } | null)?.path;
  const at = typeof path === "string" && path !== config.dataDir ? ` (${path})` : "";
  const where = `DATA_DIR ${config.dataDir}`;
  switch (code) {
    case "EEXIST":
    case "ENOTDIR":
      return new ConfigError(`${where} is not a directory${at}`);
    case "EACCES":
    case "EPERM":
      return new ConfigError(`${where} cannot be written by this user: permission denied${at}`);
    case "EROFS":
    case "SQLITE_READONLY":
      return new ConfigError(`${where}: its database cannot be written (read-only file or directory)${at}`);
    case "ENOSPC":
    case "EDQUOT":
    case "SQLITE_FULL":
      return new ConfigError(`${where}: no space left on the disk${at}`);
    case "SQLITE_CANTOPEN":
      return new ConfigError(`${where}: the database ${config.databasePath} cannot be opened`);
    case "SQLITE_NOTADB":
      return new ConfigError(`${where}: ${config.databasePath} is not a SQLite database: move it away, or put a backup in its place with \`walletgate restore <file>\``);
    case "SQLITE_CORRUPT":
      return new ConfigError(`${where}: the database ${config.databasePath} is damaged (${String(raw)}): put a backup in its place with \`walletgate restore <file>\``);
    case "EISDIR":
      return new ConfigError(`${where}: ${typeof path === "string" ? path : "a file it needs"} is a directory, not a file`);
    case "ENOENT":
      // DATA_DIR itself is made; a file's folder can be missing only behind a link (a volume not mounted).
      return new ConfigError(`${where}: ${typeof path === "string" ? path : "a file it needs"} cannot be made: its folder does not exist (a link to a volume that is not mounted?)`);
    default:
      return null;
  }
}

/** Runs DATA_DIR's set-up (secrets, database) for the server or a command; its files' failures name DATA_DIR. */
export function inDataDir<T>(config: Config, setUp: () => T): T {
  try {
    return setUp();
  } catch (err) {
    throw dataDirError(config, err) ?? err;
  }
}

function randomText(byteCount: number, encoding: "hex" | "base64url" = "base64url"): string {
  return Buffer.from(crypto.getRandomValues(new Uint8Array(byteCount))).toString(encoding);
}

/**
 * The secrets of DATA_DIR by name, those missing generated first. They are created whole and flushed,
 * names included, before anything is encrypted or signed with them (lib/durable.ts): after a power cut
 * the database may hold wallets sealed under the key, which must then still be there. Two processes
 * starting at once agree on one value.
 */
function generatedSecrets(dataDir: string, secrets: { name: string; generate: () => string }[]): Map<string, string> {
  if (secrets.length === 0) return new Map();
  const missing = secrets.filter((s) => !existsSync(join(dataDir, s.name)));
  if (missing.length > 0) createFilesDurably(dataDir, missing.map((s) => ({ name: s.name, data: s.generate() + "\n", mode: 0o600 })));
  return new Map(
    secrets.map(({ name }) => {
      const path = join(dataDir, name);
      const stat = statSync(path);
      if (!stat.isFile()) throw new ConfigError(`${path} is not a file: put the secret's file there, or move it away to have a new secret generated`);
      if ((stat.mode & 0o077) !== 0) chmodSync(path, 0o600);
      const value = readFileSync(path, "utf8").trim();
      if (value === "") throw new ConfigError(`${path} is empty; delete it to generate a new secret`);
      return [name, value];
    }),
  );
}
