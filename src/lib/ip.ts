// Client addresses: normalising, grouping IPv6 by /64, reading X-Forwarded-For behind trusted proxies, and
// telling public addresses from private ones (the outbound guard, the RPC URL rule).
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
    const range = ipaddr.parse(address);
    const width = prefix === undefined ? bits : Number(prefix);
    // An IPv4 range written IPv4-mapped (::ffff:10.0.0.0/104) is that IPv4 range: addresses are compared as
    // normalizeIp writes them, mapped ones as IPv4.
    if (range.kind() === "ipv6" && (range as ipaddr.IPv6).isIPv4MappedAddress() && width >= 96) {
      ranges.push([(range as ipaddr.IPv6).toIPv4Address(), width - 96]);
    } else {
      ranges.push([range, width]);
    }
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
  // As the peer is: a proxy a dual-stack hop wrote IPv4-mapped (::ffff:10.0.0.5) is the IPv4 proxy.
  const normalized = normalizeIp(ip);
  if (normalized === null) return false;
  let addr: ipaddr.IPv4 | ipaddr.IPv6;
  try {
    addr = ipaddr.parse(normalized);
  } catch {
    return false;
  }
  return ranges.some(([range, bits]) => addr.kind() === range.kind() && addr.match(range, bits));
}

/** Whether X-Forwarded-For from this peer is believed: a hop count believes anyone, addresses their own. */
export function trustsPeer(socketIp: string, trust: TrustProxy): boolean {
  if (trust.kind === "none") return false;
  return trust.kind === "hops" || isTrusted(socketIp, trust.ranges);
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

/** The IPv4 address embedded in an IPv6 one that routes to it (mapped, NAT64 well-known, 6to4), if any. */
function embeddedIpv4(ip: ipaddr.IPv6): ipaddr.IPv4 | null {
  const p = ip.parts;
  const fromWords = (hi: number, lo: number) => new ipaddr.IPv4([hi >> 8, hi & 0xff, lo >> 8, lo & 0xff]);
  switch (ip.range()) {
    case "ipv4Mapped":
      return ip.toIPv4Address();
    case "rfc6052":
      // 64:ff9b::/96 carries the address in its last 32 bits; the local-use 64:ff9b:1::/48 is refused outright.
      return p[0] === 0x64 && p[1] === 0xff9b && p[2] === 0 && p[3] === 0 && p[4] === 0 && p[5] === 0 ? fromWords(p[6]!, p[7]!) : null;
    case "6to4":
      return fromWords(p[1]!, p[2]!);
    default:
      return null;
  }
}

/**
 * True only for public unicast addresses. Everything ipaddr.js names otherwise is refused: private,
 * loopback, link-local (169.254.169.254, the cloud metadata address, is one), unique-local (fd00:ec2::254
 * is AWS's IPv6 metadata), CGNAT (100.100.100.200 is Alibaba's), multicast, broadcast, unspecified,
 * reserved (192.0.0.192 is Oracle's). One public address is refused by name: 168.63.129.16, through which
 * every Azure virtual machine reaches its platform (WireServer, the guest agent's plugin). IPv6 forms that
 * carry an IPv4 address are judged by that address.
 */
export function isPublicAddress(address: string): boolean {
  let ip: ipaddr.IPv4 | ipaddr.IPv6;
  try {
    ip = ipaddr.parse(address);
  } catch {
    return false;
  }
  if (ip.kind() === "ipv4") return isPublicV4(ip as ipaddr.IPv4);
  const v6 = ip as ipaddr.IPv6;
  const range = v6.range();
  // ::a.b.c.d (IPv4-compatible, deprecated by RFC 4291) is "unicast" to ipaddr.js; a URL host spelled
  // [::127.0.0.1] becomes [::7f00:1]. No public destination is written that way: refused.
  if (range === "unicast") return !v6.parts.slice(0, 6).every((part) => part === 0);
  const v4 = embeddedIpv4(v6);
  return v4 !== null && isPublicV4(v4);
}

/** Cloud platform endpoints at public addresses, which a host inside that cloud reaches without authentication. */
const PLATFORM_ADDRESSES = new Set(["168.63.129.16"]);

function isPublicV4(ip: ipaddr.IPv4): boolean {
  return ip.range() === "unicast" && !PLATFORM_ADDRESSES.has(ip.toString());
}

/**
 * A URL host that can only mean a non-public target whatever DNS says: an address literal that is not
 * public (as `new URL` writes it: IPv6 in brackets, other IPv4 spellings already made dotted), or
 * `localhost` and its subdomains (RFC 6761). Other names are judged when sent, after resolution.
 */
export function namesPrivateHost(hostname: string): boolean {
  const host = hostname.toLowerCase().replace(/\.$/, "");
  if (host === "localhost" || host.endsWith(".localhost")) return true;
  const literal = host.startsWith("[") ? host.slice(1, -1) : host;
  return ipaddr.isValid(literal) && !isPublicAddress(literal);
}
