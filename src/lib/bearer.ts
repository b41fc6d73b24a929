// Reads the token of an `Authorization: Bearer <token>` header.

/** Null when the header is absent or names another scheme; the token (possibly empty) otherwise. */
export function bearerToken(header: string | null | undefined): string | null {
  if (!header) return null;
  const match = /^Bearer(?:[ \t]+(\S*))?\s*$/i.exec(header);
  return match ? (match[1] ?? "") : null; // "Bearer" with nothing after it is a bad token, not a missing one
}
