// Which route template (`/pay/:productId/checkout`) a request path belongs to, given the routes an app
// has: for labels that must never hold what a client put in the path (metrics).

type Template = { method: string; parts: string[]; template: string };

export type RouteTemplates = {
  /** Adds an app's routes (`{method, path}`, Elysia's `app.routes`); `ALL` answers every method. */
  add(routes: readonly { method: string; path: string }[]): void;
  /** The template of the route that answers `method path`, or null when none does. */
  find(method: string, path: string): string | null;
};

const paramCount = (t: Template) => t.parts.filter((p) => p.startsWith(":")).length;

export function routeTemplates(): RouteTemplates {
  /** By number of path segments; a template ending in `*` is kept under `wild`. */
  const bySize = new Map<number, Template[]>();
  const wild: Template[] = [];
  const known = new Set<string>();
  return {
    add(routes) {
      for (const { method, path } of routes) {
        const key = `${method} ${path}`;
        if (known.has(key)) continue;
        known.add(key);
        const parts = path.split("/");
        const entry = { method, parts, template: path };
        if (parts.at(-1) === "*") {
          wild.push(entry);
          continue;
        }
        const list = bySize.get(parts.length) ?? [];
        list.push(entry);
        // Static segments before parameters: /keys/new is not /keys/:id.
        list.sort((a, b) => paramCount(a) - paramCount(b));
        bySize.set(parts.length, list);
      }
    },
    find(method, path) {
      // Elysia answers a path with one trailing slash as the path without it.
      const parts = (path.length > 1 && path.endsWith("/") ? path.slice(0, -1) : path).split("/");
      const fits = (t: Template, n: number) => {
        if (t.method !== method && t.method !== "ALL" && !(method === "HEAD" && t.method === "GET")) return false;
        for (let i = 0; i < n; i++) if (t.parts[i] !== parts[i] && !t.parts[i]!.startsWith(":")) return false;
        return true;
      };
      for (const t of bySize.get(parts.length) ?? []) if (fits(t, parts.length)) return t.template;
      for (const t of wild) if (parts.length >= t.parts.length - 1 && fits(t, t.parts.length - 1)) return t.template;
      return null;
    },
  };
}
