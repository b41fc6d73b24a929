// The dashboard pages' session (dashboard.md "Sign-in"): an HttpOnly, SameSite=Strict cookie holding the
// owner's session token, and the Origin check that cookie-authenticated state changes must pass.
import type { Deps } from "../deps.ts";
import { AppError } from "../errors.ts";
import { bearerToken } from "../lib/bearer.ts";

export const SESSION_COOKIE = "wg_session";

const SAFE_METHODS = new Set(["GET", "HEAD", "OPTIONS"]);

/** Set-Cookie for a session token that expires at `expiresAtS` (Unix seconds); Secure under https. */
export function sessionCookie(deps: Deps, token: string, expiresAtS: number): string {
  const maxAge = Math.max(0, expiresAtS - Math.floor(deps.clock.now() / 1000));
  return `${SESSION_COOKIE}=${token}; Path=/; HttpOnly; SameSite=Strict; Max-Age=${maxAge}${secure(deps)}`;
}

export function clearedSessionCookie(deps: Deps): string {
  return `${SESSION_COOKIE}=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0${secure(deps)}`;
}

function secure(deps: Deps): string {
  return deps.baseUrl.startsWith("https:") ? "; Secure" : "";
}

/** The session cookie's value, or null. */
export function cookieToken(request: Request): string | null {
  const header = request.headers.get("cookie");
  if (header === null) return null;
  for (const part of header.split(";")) {
    const eq = part.indexOf("=");
    if (eq !== -1 && part.slice(0, eq).trim() === SESSION_COOKIE) return part.slice(eq + 1).trim() || null;
  }
  return null;
}

/**
 * The owner's session token of a Dashboard API request: Bearer first (scripts), else the cookie (pages).
 * A state-changing request carried by the cookie must come from a page of this server: its Origin must
 * be BASE_URL's, so another site cannot make the browser act for the owner.
 */
export function dashboardToken(deps: Deps, request: Request): string {
  const bearer = bearerToken(request.headers.get("authorization"));
  if (bearer !== null) return bearer;
  const cookie = cookieToken(request);
  if (cookie === null) throw new AppError("UNAUTHENTICATED", "sign in: Authorization: Bearer <sessionToken> of the owner's wallet, or the dashboard's session cookie");
  if (!SAFE_METHODS.has(request.method)) requireSameOrigin(deps, request);
  return cookie;
}

export function requireSameOrigin(deps: Deps, request: Request): void {
  const origin = request.headers.get("origin");
  const expected = new URL(deps.baseUrl).origin;
  if (origin !== expected) {
    throw new AppError(
      "FORBIDDEN",
      `a change made with the session cookie must come from this server's pages at ${expected} (Origin); ` +
        "if you open the dashboard at another address, set BASE_URL to it",
    );
  }
}
