// Client addresses: normalising, grouping IPv6 by /64, and reading X-Forwarded-For behind trusted proxies.
import ipaddr from "ipaddr.js";

/** Who may append to X-Forwarded-For: a number of proxy hops, or the proxies' CIDR ranges. */
export type TrustProxy = { kind: "none" } | { kind: "hops"; hops: number } | { kind: "cidrs"; ranges: [ipaddr.IPv4 | ipaddr.IPv6, number][] };

/** An IP address written as one is meant: IPv4 in four decimal parts, or IPv6 without a zone. */
function isAddressAsWritten(text: string): boolean {
  return ipaddr.IPv4.isValidFourPartDecimal(text) || (ipaddr.IPv6.isValid(text) && !text.includes("%"));
}

/** More proxies than this in front of one server is a mistake (a number meant as something else). */
export const MAX_TRUSTED_HOPS = 32;

/**
 * Parses a TRUST_PROXY value: empty → none, "2" → hops (at most MAX_TRUSTED_HOPS), "10.0.0.0/8, ::1/128"
 * → CIDRs; else null. Addresses are written as they are meant: IPv4 in four decimal parts, IPv6 without
 * a zone. The shorthands an address parser also takes ("1.5" for 1.0.0.5, "0177.0.0.1" in octal, a bare
 * "1,2" for 0.0.0.1 and 0.0.0.2) would trust proxies the operator never named.
 */
export function parseTrustProxy(value: string | undefined): TrustProxy | null {
  const text = (value ?? "").trim();
  if (text === "" || text === "0" || text === "false") return { kind: "none" };
  if (/^\d+$/.test(text)) {
    const hops = Number(text);
    return hops <= MAX_TRUSTED_HOPS ? { kind: "hops", hops } : null;
  }
  const ranges: [ipaddr.IPv4 | ipaddr.IPv6, number][] = [];
  for (const part of text.split(",")) {
    const [address = "", prefix, extra] = part.trim().split("/");
    if (extra !== undefined || !isAddressAsWritten(address)) return null;
    const bits = address.includes(":") ? 128 : 32;
    if (prefix !== undefined && (!/^\d{1,3}$/.test(prefix) || Number(prefix) > bits)) return null;
    ranges.push([ipaddr.parse(address), prefix === undefined ? bits : Number(prefix)]);
  }
  return { kind: "cidrs", ranges };
}

/** One DNS label: letters, digits and inner hyphens, 1-63 characters (RFC 1123). */
const HOST_LABEL = /^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$/i;

/**
 * Whether `text` can name an address to listen on without asking anyone: an IPv4 address (four decimal
 * parts), an IPv6 address (no brackets, no zone: BASE_URL is made of it), or a syntactically valid hostname (RFC 1123: dot-separated
 * labels, at most 253 characters, a last label that is not all digits, so never an IPv4 look-alike).
 * Whether a hostname resolves to an address of this machine is learnt by listening on it.
 */
export function isListenHost(text: string): boolean {
  if (isAddressAsWritten(text)) return true;
  const name = text.endsWith(".") ? text.slice(0, -1) : text;
  if (name.length === 0 || name.length > 253) return false;
  const labels = name.split(".");
  return labels.every((label) => HOST_LABEL.test(label)) && !/^\d+$/.test(labels.at(-1)!);
}

const PLAIN_IPV4 = /^(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)(?:\.(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)){3}$/;

/** Canonical text of an address; IPv4-mapped IPv6 becomes IPv4. Null when it is not an address. */
export function normalizeIp(text: string): string | null {
  if (PLAIN_IPV4.test(text)) return text; // already canonical: the common case, without parsing
  try {
    const addr = ipaddr.parse(text.trim());
    if (addr.kind() === "ipv6" && (addr as ipaddr.IPv6).isIPv4MappedAddress()) {
      return (addr as ipaddr.IPv6).toIPv4Address().toString();
    }
    return addr.toString();
  } catch {
    return null;
  }
}

/** The network an address belongs to for per-network limits: IPv4 itself, IPv6 by its /64. */
export function networkKey(ip: string): string {
  if (PLAIN_IPV4.test(ip)) return ip; // the common case, without parsing (as normalizeIp)
  try {
    const addr = ipaddr.parse(ip);
    if (addr.kind() === "ipv4") return ip;
    const parts = (addr as ipaddr.IPv6).parts.slice(0, 4);
    return `${parts.map((p) => p.toString(16)).join(":")}::/64`;
  } catch {
    return ip;
  }
}

function isTrusted(ip: string, ranges: [ipaddr.IPv4 | ipaddr.IPv6, number][]): boolean {
  let addr: ipaddr.IPv4 | ipaddr.IPv6;
  try {
    addr = ipaddr.parse(ip);
  } catch {
    return false;
  }
  return ranges.some(([range, bits]) => addr.kind() === range.kind() && addr.match(range, bits));
}

/**
 * The client's address: the socket peer, or — behind trusted proxies — the right-most address of
 * X-Forwarded-For that a trusted proxy vouched for. Without trust the header is ignored.
 */
export function resolveClientIp(socketIp: string, forwardedFor: string | null, trust: TrustProxy): string {
  const peer = normalizeIp(socketIp) ?? socketIp;
  if (trust.kind === "none" || !forwardedFor) return peer;
  const hops = forwardedFor.split(",").map((s) => s.trim()).filter((s) => s !== "");
  const chain = [...hops, peer]; // left = farthest from us
  if (trust.kind === "hops") {
    let i = chain.length - 1;
    for (let skipped = 0; skipped < trust.hops && i > 0; skipped++) i--;
    return normalizeIp(chain[i]!) ?? peer;
  }
  let i = chain.length - 1;
  while (i > 0 && isTrusted(chain[i]!, trust.ranges)) {
    const next = normalizeIp(chain[i - 1]!);
    if (next === null) break; // a garbled entry: stop at the last address a trusted proxy gave us
    i--;
  }
  return normalizeIp(chain[i]!) ?? peer;
}
