// Reads the token of an `Authorization: Bearer <token>` header.

/**
 * Null when the header is absent or names another scheme; the token (possibly empty or malformed, e.g. with
 * spaces in it, which the token's own check then refuses as TOKEN_INVALID) otherwise: what follows the
 * scheme and its spaces or tabs, without trailing whitespace. Read by slicing, in one pass: a pattern with a
 * lazy token before trailing whitespace takes time quadratic in a header full of spaces, and this runs on
 * every request before anything is authenticated.
 */
export function bearerToken(header: string | null | undefined): string | null {
  if (!header || header.slice(0, 6).toLowerCase() !== "bearer") return null;
  const rest = header.slice(6).trimEnd();
  if (rest === "") return ""; // "Bearer" with nothing after it is a bad token, not a missing one
  if (rest[0] !== " " && rest[0] !== "\t") return null; // "Bearerx": another scheme
  let start = 1;
  while (rest[start] === " " || rest[start] === "\t") start++;
  return rest.slice(start);
}
