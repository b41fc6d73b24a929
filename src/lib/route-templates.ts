// Which route template (`/pay/:productId/checkout`) a request path belongs to, given the routes an app
// has: for labels that must never hold what a client put in the path (metrics).

type Template = { method: string; parts: string[]; template: string };

const paramCount = (t: Template) => t.parts.filter((p) => p.startsWith(":")).length;

export class RouteTemplates {
  /** By number of path segments; a template ending in `*` is kept under `wild`. */
  readonly #bySize = new Map<number, Template[]>();
  readonly #wild: Template[] = [];
  readonly #known = new Set<string>();

  /** Adds an app's routes (`{method, path}`, Elysia's `app.routes`); `ALL` answers every method. */
  add(routes: readonly { method: string; path: string }[]): void {
    for (const { method, path } of routes) {
      const key = `${method} ${path}`;
      if (this.#known.has(key)) continue;
      this.#known.add(key);
      const parts = path.split("/");
      const entry = { method, parts, template: path };
      if (parts.at(-1) === "*") this.#wild.push(entry);
      else {
        const list = this.#bySize.get(parts.length) ?? [];
        list.push(entry);
        // Static segments before parameters: /keys/new is not /keys/:id.
        list.sort((a, b) => paramCount(a) - paramCount(b));
        this.#bySize.set(parts.length, list);
      }
    }
  }

  /** The template of the route that answers `method path`, or null when none does. */
  find(method: string, path: string): string | null {
    const parts = path.split("/");
    const fits = (t: Template, n: number) => {
      if (t.method !== method && t.method !== "ALL" && !(method === "HEAD" && t.method === "GET")) return false;
      for (let i = 0; i < n; i++) if (t.parts[i] !== parts[i] && !t.parts[i]!.startsWith(":")) return false;
      return true;
    };
    for (const t of this.#bySize.get(parts.length) ?? []) if (fits(t, parts.length)) return t.template;
    for (const t of this.#wild) if (parts.length >= t.parts.length - 1 && fits(t, t.parts.length - 1)) return t.template;
    return null;
  }
}
