// Client fingerprints: SHA-256 of IP + User-Agent, kept only as an HMAC under a server key.
import type { Deps } from "../deps.ts";
import { hmacSha256Hex, sha256Hex } from "../lib/hash.ts";

export type ClientInfo = {
  ip: string;
  userAgent: string;
  /**
   * True when the request came through a proxy TRUST_PROXY does not name (its peer sent X-Forwarded-For,
   * or BASE_URL is https): `ip` is then the proxy's, shared by all of its clients.
   */
  behindUntrustedProxy?: boolean;
};

/**
 * Whether this client's fingerprint may link a wallet or restore an MCP session to one: FINGERPRINT_RESTORE
 * on, and an address that is the client's own. Behind a proxy TRUST_PROXY does not name, every client has
 * the proxy's address, and another with the same User-Agent would be restored to this one's wallet.
 */
export function fingerprintUsable(deps: Deps, client: ClientInfo): boolean {
  return deps.config.fingerprintRestore && client.behindUntrustedProxy !== true;
}

/** The fingerprint of auth.md: hex SHA-256 over the client IP followed by the User-Agent. */
export function fingerprintOf(client: ClientInfo): string {
  return sha256Hex(client.ip + client.userAgent);
}

/**
 * What is stored and looked up: the fingerprint under the server's HMAC key. The IP goes into the
 * HMAC input on its own as well, because `ip + userAgent` alone is ambiguous: 10.0.0.1 with
 * "5Mozilla" and 10.0.0.15 with "Mozilla" share a fingerprint.
 */
export function storedFingerprint(deps: Deps, client: ClientInfo): string {
  return hmacSha256Hex(deps.auth.fingerprintKey, `${client.ip}\n${fingerprintOf(client)}`);
}
