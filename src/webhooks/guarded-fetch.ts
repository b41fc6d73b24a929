// The one guarded outbound HTTP client: every request to an owner's or agent's URL goes through it.
//
// How it stops server-side request forgery (paygate.md "Webhooks"):
// - only http(s) URLs without credentials;
// - the host is resolved once (all addresses) and refused if ANY address is not public unicast, unless
//   allowPrivate (ALLOW_PRIVATE_NETWORK_TARGETS=true) — a mixed answer would otherwise be a coin toss;
// - the connection goes to the very address that was checked: the URL handed to fetch carries the IP,
//   the original host travels in the `Host` header, and for https Bun's `tls.serverName` sends it as SNI
//   and verifies the certificate against it (checked again explicitly below). No second DNS lookup
//   happens, so DNS rebinding between check and connect cannot slip through;
// - no proxy from the environment (a proxy would resolve the name itself), redirects are never
//   followed, one timeout covers DNS, connect and body, and the body is read only up to a cap.
import type { PeerCertificate } from "node:tls";
import ipaddr from "ipaddr.js";
import { isPublicAddress } from "../lib/ip.ts";

export type GuardedFetchReason =
  /** not an http(s) URL, credentials in it, or no host */
  | "bad_url"
  /**
   * The address check refused the host: it is a non-public address (private, loopback, link-local,
   * metadata, …), or a name that resolves to one or does not resolve at all. The two cases of a name read
   * the same, so that the answer does not tell an owner which names exist on the server's network.
   */
  | "private_address"
  /** the name did not resolve (only without the address check: ALLOW_PRIVATE_NETWORK_TARGETS=true) */
  | "dns"
  | "timeout"
  /** connection refused or reset, TLS failure, malformed answer */
  | "network"
  /** the caller's signal aborted the request (shutdown) */
  | "aborted";

/** A request that was refused or got no HTTP answer. The message never holds the URL's path or query. */
export class GuardedFetchError extends Error {
  override name = "GuardedFetchError";
  readonly reason: GuardedFetchReason;
  constructor(reason: GuardedFetchReason, message: string) {
    super(message);
    this.reason = reason;
  }
}

export type ResolvedAddress = { address: string; family: number };

export type GuardedFetchOptions = {
  /** ALLOW_PRIVATE_NETWORK_TARGETS: skip the address check (tests, private deployments). */
  allowPrivate: boolean;
  /** Whole request: DNS, connect, send, and reading the body. Default 15 s. */
  timeoutMs?: number;
  /** Bytes of the response body kept and returned; reading stops there. Default 1 KiB. */
  maxResponseBytes?: number;
  /** Name resolution; the system resolver (getaddrinfo) unless a test hands in its own. */
  lookup?: (hostname: string) => Promise<ResolvedAddress[]>;
  /** Extra certificate authorities for https targets (tests with a self-signed receiver, private CAs). */
  ca?: string | string[];
};

export type GuardedRequest = {
  method?: string;
  headers?: Record<string, string>;
  body?: string;
  /** Aborts the request from outside (e.g. shutdown); reported as reason "aborted". */
  signal?: AbortSignal;
};

export type GuardedResponse = { status: number; body: string; durationMs: number };

export const DEFAULT_TIMEOUT_MS = 15_000;
export const DEFAULT_MAX_RESPONSE_BYTES = 1024;

// node:dns and node:tls load with the first delivery, not with the server (start-up time).
const systemLookup = async (hostname: string): Promise<ResolvedAddress[]> =>
  (await import("node:dns/promises")).lookup(hostname, { all: true, verbatim: true });

/** The first `maxBytes` of a UTF-8 byte string, never ending inside a character. */
export function utf8Prefix(bytes: Uint8Array, maxBytes: number): string {
  let end = Math.min(bytes.length, maxBytes);
  if (end < bytes.length) {
    // Step back over continuation bytes (10xxxxxx) to the lead byte of a cut character, and drop it.
    let i = end;
    while (i > 0 && (bytes[i]! & 0xc0) === 0x80) i--;
    end = i;
  }
  return new TextDecoder().decode(bytes.subarray(0, end));
}

function parseTarget(raw: string): URL {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new GuardedFetchError("bad_url", "not an absolute URL");
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") throw new GuardedFetchError("bad_url", "only http and https URLs are allowed");
  if (url.username !== "" || url.password !== "") throw new GuardedFetchError("bad_url", "credentials in a URL are not allowed");
  if (url.hostname === "") throw new GuardedFetchError("bad_url", "the URL has no host");
  return url;
}

/** The literal IP of a URL host (`[::1]` → `::1`), or null when it is a name. */
function ipLiteral(hostname: string): string | null {
  const bare = hostname.startsWith("[") && hostname.endsWith("]") ? hostname.slice(1, -1) : hostname;
  return ipaddr.isValid(bare) && (bare.includes(":") || ipaddr.IPv4.isValidFourPartDecimal(bare)) ? bare : null;
}

/** Resolves the host (or takes its literal), checks every address, and returns the one to connect to. */
async function resolveChecked(url: URL, options: GuardedFetchOptions, signal: AbortSignal): Promise<string> {
  const literal = ipLiteral(url.hostname);
  let addresses: string[];
  if (literal !== null) {
    addresses = [literal];
  } else {
    const lookup = options.lookup ?? systemLookup;
    let answers: ResolvedAddress[];
    try {
      answers = await Promise.race([
        lookup(url.hostname),
        new Promise<never>((_, reject) => {
          if (signal.aborted) reject(signal.reason);
          signal.addEventListener("abort", () => reject(signal.reason), { once: true });
        }),
      ]);
    } catch (err) {
      if (signal.aborted) throw err;
      throw unresolved(url, options);
    }
    addresses = answers.map((a) => a.address);
    if (addresses.length === 0) throw unresolved(url, options);
    // IPv4 first: a host with an AAAA record is often unreachable over IPv6 from a server.
    addresses.sort((a, b) => Number(a.includes(":")) - Number(b.includes(":")));
  }
  if (!options.allowPrivate) {
    for (const address of addresses) {
      if (!isPublicAddress(address)) throw literal !== null ? new GuardedFetchError("private_address", `${url.hostname} is not a public address`) : notPublicName(url);
    }
  }
  return addresses[0]!;
}

function notPublicName(url: URL): GuardedFetchError {
  return new GuardedFetchError("private_address", `${url.hostname} does not resolve, or resolves to a non-public address`);
}

/** A name that did not resolve: said plainly only where the address check is off (see "private_address"). */
function unresolved(url: URL, options: GuardedFetchOptions): GuardedFetchError {
  return options.allowPrivate ? new GuardedFetchError("dns", `${url.hostname} does not resolve`) : notPublicName(url);
}

async function readCapped(response: Response, maxBytes: number, stopped?: AbortSignal): Promise<string> {
  if (response.body === null || maxBytes <= 0) {
    await response.body?.cancel();
    return "";
  }
  const reader = response.body.getReader();
  const chunks: Uint8Array[] = [];
  let total = 0;
  try {
    while (total < maxBytes) {
      let read: Awaited<ReturnType<typeof reader.read>>;
      try {
        read = await reader.read();
      } catch (err) {
        // The caller stopped it (shutdown): nothing is answered, so the attempt is not recorded and its lease
        // goes back (an agent's reply cut short would otherwise be lost for good).
        if (stopped?.aborted) throw err;
        // The status came, then the body stopped (the timeout, a reset): the answer is that status with the
        // body read so far. paygate.md: any 2xx within the timeout is success, and the status is recorded.
        break;
      }
      if (read.done) break;
      chunks.push(read.value);
      total += read.value.length;
    }
  } finally {
    // Whatever is left is not read: the connection is not reused, so nothing needs draining.
    await reader.cancel().catch(() => undefined);
  }
  const bytes = new Uint8Array(total);
  let offset = 0;
  for (const c of chunks) {
    bytes.set(c, offset);
    offset += c.length;
  }
  return utf8Prefix(bytes, maxBytes);
}

/** A short name of a network failure, from its code; the runtime's message may quote the URL. */
function failureCode(err: unknown): string {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === "string" && /^[A-Za-z0-9_]{1,64}$/.test(code) ? code : "unknown";
}

/**
 * Sends one request through the guard. Resolves with any HTTP answer (3xx included: redirects are not
 * followed); rejects with GuardedFetchError when the URL is refused or no answer came.
 */
export async function guardedFetch(rawUrl: string, init: GuardedRequest, options: GuardedFetchOptions): Promise<GuardedResponse> {
  const started = performance.now();
  const url = parseTarget(rawUrl);
  const timeout = AbortSignal.timeout(options.timeoutMs ?? DEFAULT_TIMEOUT_MS);
  const signal = init.signal === undefined ? timeout : AbortSignal.any([timeout, init.signal]);
  const failed = (err: unknown): GuardedFetchError => {
    if (err instanceof GuardedFetchError) return err;
    if (timeout.aborted) return new GuardedFetchError("timeout", "no answer within the timeout");
    if (init.signal?.aborted) return new GuardedFetchError("aborted", "the request was aborted");
    return new GuardedFetchError("network", `network error (${failureCode(err)})`);
  };

  try {
    const address = await resolveChecked(url, options, signal);
    const https = url.protocol === "https:";
    const port = url.port !== "" ? url.port : https ? "443" : "80";
    const pinned = `${url.protocol}//${address.includes(":") ? `[${address}]` : address}:${port}${url.pathname}${url.search}`;
    const literal = ipLiteral(url.hostname);
    // The name the certificate must be valid for: the URL's host, not the address we connect to.
    const certName = literal ?? url.hostname;
    const { checkServerIdentity } = https ? await import("node:tls") : { checkServerIdentity: null };
    const response = await fetch(pinned, {
      method: init.method ?? "GET",
      headers: { ...init.headers, host: url.host, "accept-encoding": "identity" },
      body: init.body,
      redirect: "manual",
      signal,
      proxy: false,
      // Never share a connection between hosts that resolve to the same address: each was vetted alone.
      keepalive: false,
      tls: https
        ? {
            ...(literal === null ? { serverName: url.hostname } : {}),
            ...(options.ca !== undefined ? { ca: options.ca } : {}),
            // Bun already checks against serverName; checking here too keeps that true if it ever changes,
            // and a request with its own check gets a connection of its own.
            checkServerIdentity: (_host: string, cert: PeerCertificate) => checkServerIdentity!(certName, cert),
          }
        : undefined,
    });
    const body = await readCapped(response, options.maxResponseBytes ?? DEFAULT_MAX_RESPONSE_BYTES, init.signal);
    return { status: response.status, body, durationMs: Math.round(performance.now() - started) };
  } catch (err) {
    throw failed(err);
  }
}
