// Client fingerprints: SHA-256 of IP + User-Agent, kept only as an HMAC under a server key.
import type { Deps } from "../deps.ts";
import { hmacSha256Hex, sha256Hex } from "../lib/hash.ts";

export type ClientInfo = { ip: string; userAgent: string };

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
