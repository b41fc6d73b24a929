// The path of a request URL without scheme, host or query, read without building a URL object.

export function pathOf(url: string): string {
  // Bun gives a request without a usable Host (HTTP/1.0 without one, an empty or invalid one) a url
  // that is its path and query alone: its path starts at once (a "//" in its query is no host).
  const start = url.startsWith("/") ? 0 : url.indexOf("/", url.indexOf("//") + 2);
  if (start === -1) return "/";
  const query = url.indexOf("?", start);
  return query === -1 ? url.slice(start) : url.slice(start, query);
}
