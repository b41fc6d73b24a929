// The pages' HTML answered through the server's own handler, so that it carries security headers, a
// request id and an access-log line. Bun serves each page's bundle (HTML and hashed assets) at an internal
// path; the HTML is read from there once, over loopback, and kept.

/**
 * Where Bun's routes serve each page's bundled HTML (server.ts). Bun answers there itself, without the
 * headers below (so a page there could be framed): the path is random per process, and only this process
 * reads it.
 */
const INTERNAL = `/_pages/${Buffer.from(crypto.getRandomValues(new Uint8Array(16))).toString("hex")}`;
export const PAGE_SOURCES = { dashboard: `${INTERNAL}/dashboard`, pay: `${INTERNAL}/pay` } as const;
export type PageName = keyof typeof PAGE_SOURCES;

/** No script or style from anywhere but this server, no framing by other sites, no plugins. */
export const PAGE_HEADERS: Readonly<Record<string, string>> = {
  "content-type": "text/html;charset=utf-8",
  "content-security-policy":
    "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; connect-src 'self'; " +
    "object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'",
  "x-frame-options": "DENY",
  "x-content-type-options": "nosniff",
  "referrer-policy": "no-referrer",
  "cache-control": "no-cache",
};

/** The page a GET of `path` asks for: `/dashboard`, or `/pay/<productId>` (one segment: the checkout API has more). */
export function pageOf(method: string, path: string): PageName | null {
  if (method !== "GET" && method !== "HEAD") return null;
  if (path === "/dashboard" || path === "/dashboard/") return "dashboard";
  if (/^\/pay\/[^/]+$/.test(path)) return "pay";
  return null;
}

export type PageCache = { respond(name: PageName, method: string): Promise<Response> };

/** `origin` is this server's own loopback address. */
export function createPageCache(origin: string): PageCache {
  const html = new Map<PageName, Promise<string>>();
  const load = (name: PageName) => {
    let text = html.get(name);
    if (text === undefined) {
      text = fetch(origin + PAGE_SOURCES[name]).then(async (response) => {
        if (!response.ok) throw new Error(`the ${name} page's bundle answered ${response.status}`);
        return response.text();
      });
      text.catch(() => html.delete(name)); // a failed read is tried again by the next request
      html.set(name, text);
    }
    return text;
  };
  return {
    async respond(name, method) {
      const text = await load(name);
      return new Response(method === "HEAD" ? null : text, { headers: PAGE_HEADERS });
    },
  };
}
