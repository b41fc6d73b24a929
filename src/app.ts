// createApp(deps): the HTTP application — error mapping in one place, every feature's routes in one list.
// Health, sign-in and /mcp are built at start-up; the other route groups (and the OpenAPI document) are
// imported and built on their first request, so that start-up does not pay for them (operations.md).
import { Elysia, ValidationError } from "elysia";
import type { Deps } from "./deps.ts";
import { AppError, errorResponse, errorText, internalError, invalidJsonBody, type FieldProblem } from "./errors.ts";
import { authRoutes } from "./auth/routes.ts";
import { ErrorBody } from "./http-schemas.ts";
import type { ClientInfo } from "./auth/fingerprint.ts";
import { pathOf } from "./lib/path.ts";
import { importQuietly } from "./lib/quiet-import.ts";
import { routeTemplates } from "./lib/route-templates.ts";
import type { McpEndpoint } from "./mcp/endpoint.ts";
import type { OpenApiDocument } from "./docs/page.ts";
import type { RouteInfo } from "./docs/complete.ts";
import pkg from "../package.json" with { type: "json" };

export type RequestMeta = ClientInfo & { requestId: string };

export type AppOptions = { metaOf: (request: Request) => RequestMeta; mcp: McpEndpoint };

type SchemaLike = { anyOf?: SchemaLike[]; const?: unknown; type?: string; format?: string; minimum?: number; maximum?: number; multipleOf?: number };

/**
 * What a union (`t.Union`) accepts, in words: Elysia's own summary lists its members' types only ("should
 * be one of: 'string', 'string'"), which does not tell a caller which values are meant. Null for other
 * schemas, or members it cannot put in words.
 */
function choicesOf(schema: unknown): string | null {
  const members = (schema as SchemaLike | undefined)?.anyOf;
  if (!Array.isArray(members)) return null;
  const words = members.map(memberInWords);
  if (words.some((w) => w === null)) return null;
  return members.every((m) => "const" in m) ? `one of: ${words.join(", ")}` : words.join(" or ");
}

function memberInWords(m: SchemaLike): string | null {
  if ("const" in m) return JSON.stringify(m.const);
  if (m.type === "null") return "null";
  // t.Integer in a body: a number, or its text in a form or query (Elysia's coercion adds the second).
  const numeric = m.anyOf?.find((x) => x.type === "integer" || x.type === "number") ?? m;
  if (numeric.type !== "integer" && numeric.type !== "number") return null;
  const kind = numeric.type === "integer" || numeric.multipleOf === 1 ? "an integer" : "a number";
  const [min, max] = [numeric.minimum ?? m.minimum, numeric.maximum ?? m.maximum];
  if (min !== undefined && max !== undefined) return `${kind} from ${min} to ${max}`;
  if (min !== undefined) return `${kind} of at least ${min}`;
  if (max !== undefined) return `${kind} of at most ${max}`;
  return kind;
}

/** The schema's complaints as `details.fields`: `/a/0/b` becomes `a.0.b`; the whole input is its kind. */
function validationDetails(err: ValidationError, where: string): { fields: FieldProblem[] } {
  try {
    const fields = err.all.map((e) => {
      const path = "path" in e && typeof e.path === "string" ? e.path.replace(/^\//, "").replaceAll("/", ".") : "";
      // An error with no path names the schema by its title, else the whole input.
      const title = "schema" in e && typeof e.schema?.title === "string" ? e.schema.title : where;
      // Not the refused value: Elysia's summary of a wrong type ends in "but found: <value>", which may be a secret in the wrong field.
      const choices = "schema" in e ? choicesOf(e.schema) : null;
      const name = path === "" ? title : path.split(".").at(-1)!;
      const message = choices !== null ? `Property '${name}' should be ${choices}` : (e.summary ?? e.message).replace(/ but found: [\s\S]*$/, "");
      return { field: path === "" ? title : path, message };
    });
    return { fields };
  } catch {
    return { fields: [] };
  }
}

type Client = (request: Request) => ClientInfo;
type Routes = ReturnType<typeof authRoutes> | Elysia<any, any, any, any, any, any, any>;

/** The error mapping every route group shares: AppError, validation, parse, not found, else a logged 500. */
function withErrors(deps: Deps, options: AppOptions) {
  // standardHostname off: Elysia otherwise finds the path at the first "/" after character 11 of the URL,
  // which cuts into it behind a proxy that sends a short Host (`proxy_pass http://app` sends `Host: app`).
  return new Elysia({ handler: { standardHostname: false } }).onError(({ code, error, request, set }) => {
    // Headers a route already decided (e.g. X-RateLimit-* of /public/*) go out with its error too.
    const decided = Object.fromEntries(Object.entries(set.headers).filter((e): e is [string, string] => typeof e[1] === "string"));
    if (error instanceof AppError) return errorResponse(error, decided);
    // A response that fails its own schema is our bug, not the client's: it falls through to 500.
    if (code === "VALIDATION" && error instanceof ValidationError && error.type !== "response") {
      const where = error.type; // body, query, params, headers
      return errorResponse(new AppError("VALIDATION_ERROR", `invalid ${where}`, { details: validationDetails(error, where) }), decided);
    }
    // A parse hook's own refusal (errors.ts parseJsonBody) comes wrapped, as its cause.
    if (code === "PARSE") return errorResponse(error instanceof Error && error.cause instanceof AppError ? error.cause : invalidJsonBody());
    if (code === "NOT_FOUND") return errorResponse(new AppError("NOT_FOUND", "no such route"));
    return unhandled(deps, options, request, error, decided);
  });
}

/** An error no route expected: logged with the request id, answered 500 (with the headers already decided). */
function unhandled(deps: Deps, options: AppOptions, request: Request, error: unknown, headers: Record<string, string> = {}): Response {
  deps.log.error("unhandled error", {
    requestId: options.metaOf(request).requestId,
    error: errorText(error),
    ...(deps.db.noteFailure(error) ? { database: "damaged: writes stopped, /readyz fails" } : {}),
  });
  return errorResponse(internalError(), headers);
}

function healthRoutes(deps: Deps) {
  return new Elysia({ name: "health-routes" })
    .get("/healthz", () => ({ status: "ok" as const }), { detail: { summary: "The process is up", tags: ["health"] } })
    .get(
      "/metrics",
      () => new Response(deps.metrics.registry.render(), { headers: { "content-type": "text/plain; version=0.0.4; charset=utf-8" } }),
      {
        detail: {
          summary: "Prometheus metrics",
          description: "Requests and latency by route, rate-limit refusals, sign-in outcomes, webhook attempts, live MCP sessions.",
          tags: ["health"],
        },
      },
    )
    .get(
      "/readyz",
      async () => {
        const database = deps.db.ping() ? "ok" : "error";
        const ledger = (await deps.ledger.ping()) ? "ok" : "error";
        const checks = { database, ledger };
        if (database !== "ok" || ledger !== "ok") {
          return new Response(JSON.stringify({ status: "unavailable", checks }), {
            status: 503,
            headers: { "content-type": "application/json" },
          });
        }
        return { status: "ready" as const, checks };
      },
      { detail: { summary: "The database and the ledger (embedded, or the Solana RPC) answer", tags: ["health"] } },
    );
}

function mcpRoute(options: AppOptions, clientOf: Client) {
  // The MCP transport reads the body itself (mcp.md: Elysia must not consume it first).
  return new Elysia({ name: "mcp-route" }).all("/mcp", ({ request }) => options.mcp.handle(request, clientOf(request), options.metaOf(request).requestId), {
    parse: "none",
    detail: {
      summary: "MCP Streamable HTTP, or a plain JSON tool call",
      description:
        "Model Context Protocol (initialize, tools/list, tools/call; Mcp-Session-Id; DELETE ends a session). " +
        'A POST body {"tool": "<name>", "params": {...}} without "jsonrpc" calls one tool and answers its envelope, ' +
        "with the error table's HTTP status on failure. Authorization: Bearer <sessionToken> runs the call as that wallet.",
      tags: ["mcp"],
    },
  });
}

/** The route groups built on first use, each with the path prefixes it answers. */
const LAZY_GROUPS: { prefixes: string[]; load: (deps: Deps, clientOf: Client) => Promise<Routes[]> }[] = [
  {
    prefixes: ["/public/", "/pay/"],
    load: async (deps, clientOf) => {
      const { payRoutes, publicRoutes } = await importQuietly(() => import("./paygate/routes.ts"));
      return [publicRoutes(deps), payRoutes(deps, clientOf)];
    },
  },
  {
    prefixes: ["/dashboard/"],
    load: async (deps, clientOf) => {
      const { dashboardApiRoutes, dashboardSessionRoutes } = await importQuietly(() => import("./dashboard/routes.ts"));
      return [dashboardSessionRoutes(deps, clientOf), dashboardApiRoutes(deps, clientOf)];
    },
  },
];

/** `/docs` and `/openapi.json`: a documentation app holding every route group, built on first request. */
async function docsApp(deps: Deps, options: AppOptions, clientOf: Client, eager: Routes[]) {
  const { openapi } = await import("@elysiajs/openapi");
  let app = withErrors(deps, options).use(
    openapi({
      // The plugin's own page loads its viewer from a CDN (unpinned) onto this origin: /docs is ours below.
      provider: null,
      path: "/docs",
      // Not reachable from outside (only /openapi.json and /docs/* reach this app): the document is
      // completed below (docs/complete.ts) and served as /openapi.json.
      specPath: "/openapi.plugin.json",
      documentation: {
        info: { title: "walletgate", version: pkg.version, description: "Wallet sign-in, sessions and payment gating." },
        components: {
          securitySchemes: {
            bearer: { type: "http", scheme: "bearer", bearerFormat: "JWT" },
            apiKey: { type: "apiKey", in: "header", name: "X-API-Key" },
          },
        },
      },
    }),
  ) as Elysia<any, any, any, any, any, any, any>;
  const groups = await Promise.all(LAZY_GROUPS.map((g) => g.load(deps, clientOf)));
  for (const routes of [...eager, ...groups.flat()]) app = app.use(routes);
  // The document, completed once (docs/complete.ts), and the reference page rendered from it.
  const { DOCS_HEADERS, renderDocsPage } = await import("./docs/page.ts");
  const { completeDocument } = await import("./docs/complete.ts");
  const { ANSWERS } = await import("./docs/answers.ts");
  let document: Promise<OpenApiDocument> | null = null;
  const finished = () =>
    (document ??= (async () => {
      const built = (await (await app.handle(new Request("http://docs/openapi.plugin.json"))).json()) as OpenApiDocument;
      return completeDocument(built, app.routes as RouteInfo[], ErrorBody, ANSWERS);
    })());
  let page: string | null = null;
  return app
    .get("/openapi.json", async () => Response.json(await finished()), { detail: { hide: true } })
    .get(
      "/docs",
      async () => {
        page ??= renderDocsPage(await finished());
        return new Response(page, { headers: DOCS_HEADERS });
      },
      { detail: { hide: true } },
    );
}

export type App = {
  /** Answers one request: from the start-up app, or from the route group its path belongs to. */
  handle(request: Request): Response | Promise<Response>;
  /** The template of the route (of those built so far) that answers `method path`, or null: for metrics. */
  routeOf(method: string, path: string): string | null;
};

/** A request's client, read when asked for: finding the address can be a system call (see server.ts). */
class ClientOf implements ClientInfo {
  constructor(private readonly meta: RequestMeta) {}
  get ip(): string {
    return this.meta.ip;
  }
  get userAgent(): string {
    return this.meta.userAgent;
  }
  get behindUntrustedProxy(): boolean {
    return this.meta.behindUntrustedProxy === true;
  }
}

export function createApp(deps: Deps, options: AppOptions): App {
  const clientOf: Client = (request) => new ClientOf(options.metaOf(request));
  const eager = (): Routes[] => [healthRoutes(deps), authRoutes(deps, clientOf), mcpRoute(options, clientOf)];
  let core = withErrors(deps, options) as Elysia<any, any, any, any, any, any, any>;
  for (const routes of eager()) core = core.use(routes);
  const templates = routeTemplates();
  templates.add(core.routes);

  type Fetch = (request: Request) => Response | Promise<Response>;
  const building = new Map<string, Promise<Fetch>>();
  /** Built groups, called directly: no promise in the way of every request once a group exists. */
  const ready = new Map<string, Fetch>();
  const lazily = (key: string, build: () => Promise<Elysia<any, any, any, any, any, any, any>>, request: Request): Response | Promise<Response> => {
    const fetch = ready.get(key);
    if (fetch !== undefined) return fetch(request);
    let pending = building.get(key);
    if (pending === undefined) {
      pending = build().then((a) => {
        templates.add(a.routes);
        ready.set(key, a.fetch);
        return a.fetch;
      });
      // A failed build (it should not) is retried by the next request rather than kept.
      pending.catch(() => building.delete(key));
      building.set(key, pending);
    }
    return pending.then((f) => f(request));
  };

  const coreFetch = core.fetch;
  const groups = LAZY_GROUPS.map((group) => ({
    prefixes: group.prefixes,
    key: group.prefixes[0]!,
    build: async () => {
      let app = withErrors(deps, options) as Elysia<any, any, any, any, any, any, any>;
      for (const routes of await group.load(deps, clientOf)) app = app.use(routes);
      return app;
    },
  }));
  const buildDocs = () => docsApp(deps, options, clientOf, eager());
  /**
   * /mcp answered without Elysia in the way (its route above is for the OpenAPI document): the transport
   * reads the body and answers every method itself, so routing, hooks and response mapping would add
   * nothing but time to each tool call.
   */
  const mcp = async (request: Request): Promise<Response> => {
    try {
      return await options.mcp.handle(request, clientOf(request), options.metaOf(request).requestId);
    } catch (error) {
      return error instanceof AppError ? errorResponse(error) : unhandled(deps, options, request, error);
    }
  };
  return {
    handle(request) {
      const path = pathOf(request.url);
      if (path === "/mcp") return mcp(request);
      if (path === "/openapi.json" || path === "/docs" || path.startsWith("/docs/")) return lazily("docs", buildDocs, request);
      for (const group of groups) {
        if (group.prefixes.some((prefix) => path.startsWith(prefix))) return lazily(group.key, group.build, request);
      }
      return coreFetch(request);
    },
    routeOf: (method, path) => templates.find(method, path),
  };
}
