// The dashboard pages' session (dashboard.md "Sign-in"): an HttpOnly, SameSite=Strict cookie holding the
// owner's session token, and the Origin check that cookie-authenticated state changes must pass.
import type { Deps } from "../deps.ts";
import { AppError } from "../errors.ts";
import { bearerToken } from "../lib/bearer.ts";

/**
 * The cookie's name: under https with the `__Host-` prefix, which browsers accept only from this very
 * host, Secure, with Path=/ and no Domain, so that a sibling subdomain cannot plant its own session
 * cookie beside ours (and sign the owner's pages into the planter's account).
 */
function cookieName(deps: Deps): string {
  return underHttps(deps) ? "__Host-wg_session" : "wg_session";
}

/** Whether BASE_URL is https, however its scheme is written (`HTTPS://…` too: URL schemes are case-insensitive). */
function underHttps(deps: Deps): boolean {
  return new URL(deps.baseUrl).protocol === "https:";
}

const SAFE_METHODS = new Set(["GET", "HEAD", "OPTIONS"]);

/** Set-Cookie for a session token that expires at `expiresAtS` (Unix seconds); Secure under https. */
export function sessionCookie(deps: Deps, token: string, expiresAtS: number): string {
  const maxAge = Math.max(0, expiresAtS - Math.floor(deps.clock.now() / 1000));
  return `${cookieName(deps)}=${token}; Path=/; HttpOnly; SameSite=Strict; Max-Age=${maxAge}${secure(deps)}`;
}

export function clearedSessionCookie(deps: Deps): string {
  return `${cookieName(deps)}=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0${secure(deps)}`;
}

function secure(deps: Deps): string {
  return underHttps(deps) ? "; Secure" : "";
}

/**
 * The session cookie's value, or null. Two cookies of that name are refused rather than one picked: we
 * set one only (Path=/), so another was planted by a neighbour (over plain http, cookies ignore the port).
 */
export function cookieToken(deps: Deps, request: Request): string | null {
  const values = cookieTokens(deps, request);
  if (values.length > 1) {
    throw new AppError(
      "UNAUTHENTICATED",
      `two ${cookieName(deps)} cookies came with this request, one set by another site on this host: clear this site's cookies in the browser, then sign in again`,
      { details: { reason: "two_session_cookies" } },
    );
  }
  return values[0] ?? null;
}

/** Every session cookie's value the request carries (sign-out revokes them all). */
export function cookieTokens(deps: Deps, request: Request): string[] {
  const header = request.headers.get("cookie");
  if (header === null) return [];
  const name = cookieName(deps);
  const values: string[] = [];
  for (const part of header.split(";")) {
    const eq = part.indexOf("=");
    if (eq === -1 || part.slice(0, eq).trim() !== name) continue;
    const value = part.slice(eq + 1).trim();
    if (value !== "") values.push(value);
  }
  return values;
}

/**
 * The owner's session token of a Dashboard API request: Bearer first (scripts), else the cookie (pages).
 * A state-changing request carried by the cookie must come from a page of this server: its Origin must
 * be BASE_URL's, so another site cannot make the browser act for the owner.
 */
export function dashboardToken(deps: Deps, request: Request): string {
  const bearer = bearerToken(request.headers.get("authorization"));
  if (bearer !== null) return bearer;
  const cookie = cookieToken(deps, request);
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
