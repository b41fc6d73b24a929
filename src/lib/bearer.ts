// Reads the token of an `Authorization: Bearer <token>` header.

/**
 * Null when the header is absent or names another scheme; the token (possibly empty or malformed, e.g. with
 * spaces in it, which the token's own check then refuses as TOKEN_INVALID) otherwise.
 */
export function bearerToken(header: string | null | undefined): string | null {
  if (!header) return null;
  const match = /^Bearer(?:[ \t]+(.*?))?\s*$/is.exec(header);
  return match ? (match[1] ?? "") : null; // "Bearer" with nothing after it is a bad token, not a missing one
}
