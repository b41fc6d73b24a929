// The pages and their assets, answered through the server's own handler, so that every one of them carries
// a request id, an access-log line and its count in the metrics, and the pages their security headers.
// Bun bundles each page (HTML and hashed assets) and serves the bundles from a second server of its own,
// on loopback, started when the first page or asset is asked for; the server's handler reads the HTML from
// there once and each asset the first time it is asked for, and keeps them.
import type { HTMLBundle, Server } from "bun";

/**
 * Where the bundles' server serves each page's HTML. Bun answers there without the headers below (so a
 * page there could be framed): that server listens on loopback only, and the path is random per process.
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

/**
 * How Bun names a bundle's hashed files, at the root: `/chunk-2xzszxn1.js`, `/chunk-qqzj12df.css`
 * (`[name]-[hash].[ext]`, 8 characters of hash). Only such a path is looked for among the assets; anything
 * else goes to the routes.
 */
const ASSET_PATH = /^\/[\w-]+-[0-9a-z]{8}\.[0-9a-z]+$/;

/** Whether a request may be for one of the pages' assets. */
export function isAssetRequest(method: string, path: string): boolean {
  return (method === "GET" || method === "HEAD") && ASSET_PATH.test(path);
}

/** The headers of Bun's answer an asset is served with (no others: Bun's Date and length are its own). */
const ASSET_HEADERS = ["content-type", "etag", "cache-control"] as const;

/** A hashed file's name changes with its content: it may be kept for good. */
const IMMUTABLE = "public, max-age=31536000, immutable";

/**
 * The headers an asset is served with, from Bun's answer. Run from source, Bun sends a quoted ETag and
 * `Cache-Control: immutable`; the compiled executable's embedded files come with a bare ETag (not a valid
 * entity tag, which caches may drop) and no caching at all, so every page load asked for them again.
 * Both are made what the source run sends.
 */
export function assetHeaders(bun: Headers): Record<string, string> {
  const headers: Record<string, string> = { "x-content-type-options": "nosniff" };
  for (const name of ASSET_HEADERS) {
    const value = bun.get(name);
    if (value !== null) headers[name] = value;
  }
  headers["cache-control"] ??= IMMUTABLE;
  const etag = headers.etag;
  if (etag !== undefined && !/^(W\/)?".*"$/.test(etag)) headers.etag = `"${etag.replaceAll('"', "")}"`;
  return headers;
}

type Asset = { body: Blob; headers: Record<string, string> };

export type PageCache = {
  respond(name: PageName, method: string): Promise<Response>;
  /** The bundles' file at `request`'s path, as Bun serves it (type, ETag, caching); null when there is none. */
  asset(path: string, request: Request): Promise<Response | null>;
  /** Stops the bundles' server, if it was started. */
  stop(): Promise<void>;
};

/** Whether an If-None-Match header names `etag` (or `*`); weak and strong tags compare alike. */
function matchesEtag(ifNoneMatch: string | null, etag: string | undefined): boolean {
  if (ifNoneMatch === null || etag === undefined) return false;
  const bare = (tag: string) => tag.trim().replace(/^W\//, "");
  return ifNoneMatch.split(",").some((tag) => tag.trim() === "*" || bare(tag) === bare(etag));
}

export function createPageCache(bundles: Readonly<Record<PageName, HTMLBundle>>): PageCache {
  let source: Server<unknown> | null = null;
  const origin = () => {
    source ??= Bun.serve({
      port: 0,
      hostname: "127.0.0.1",
      reusePort: false,
      development: false,
      routes: { [PAGE_SOURCES.dashboard]: bundles.dashboard, [PAGE_SOURCES.pay]: bundles.pay },
      fetch: () => new Response(null, { status: 404 }),
    });
    return `http://127.0.0.1:${source.port}`;
  };

  const html = new Map<PageName, Promise<string>>();
  const load = (name: PageName) => {
    let text = html.get(name);
    if (text === undefined) {
      text = fetch(origin() + PAGE_SOURCES[name]).then(async (response) => {
        if (!response.ok) throw new Error(`the ${name} page's bundle answered ${response.status}`);
        return response.text();
      });
      text.catch(() => html.delete(name)); // a failed read is tried again by the next request
      html.set(name, text);
    }
    return text;
  };

  // Only files the bundles' server has are kept (a fixed few); a path it has not is asked again each time.
  const assets = new Map<string, Promise<Asset | null>>();
  const loadAsset = (path: string) => {
    let asset = assets.get(path);
    if (asset === undefined) {
      asset = (async () => {
        // Bun may bundle a page when it is first asked for, and only then serve its files.
        await Promise.all([load("dashboard"), load("pay")]);
        const response = await fetch(origin() + path);
        if (response.status === 404) return null;
        if (!response.ok) throw new Error(`the pages' bundle answered ${response.status} for ${path}`);
        return { body: await response.blob(), headers: assetHeaders(response.headers) };
      })();
      asset.then(
        (found) => found === null && assets.delete(path),
        () => assets.delete(path),
      );
      assets.set(path, asset);
    }
    return asset;
  };

  return {
    async respond(name, method) {
      const text = await load(name);
      return new Response(method === "HEAD" ? null : text, { headers: PAGE_HEADERS });
    },
    async asset(path, request) {
      const asset = await loadAsset(path);
      if (asset === null) return null;
      if (matchesEtag(request.headers.get("if-none-match"), asset.headers.etag)) return new Response(null, { status: 304, headers: asset.headers });
      if (request.method === "HEAD") return new Response(null, { headers: { ...asset.headers, "content-length": String(asset.body.size) } });
      return new Response(asset.body, { headers: asset.headers });
    },
    async stop() {
      await source?.stop(true);
    },
  };
}
