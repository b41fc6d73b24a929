// createApp(deps): the Elysia application — error mapping in one place, every feature's routes in one list.
import { Elysia, ValidationError } from "elysia";
import { openapi } from "@elysiajs/openapi";
import type { Deps } from "./deps.ts";
import { AppError, errorResponse, errorText, internalError } from "./errors.ts";
import { authRoutes } from "./auth/routes.ts";
import { payRoutes, publicRoutes } from "./paygate/routes.ts";
import { dashboardApiRoutes } from "./dashboard/routes.ts";
import type { ClientInfo } from "./auth/fingerprint.ts";
import type { McpEndpoint } from "./mcp/endpoint.ts";
import pkg from "../package.json" with { type: "json" };

export type RequestMeta = ClientInfo & { requestId: string };

export type AppOptions = { metaOf: (request: Request) => RequestMeta; mcp: McpEndpoint };

function validationDetails(err: ValidationError): { field: string; message: string }[] {
  try {
    return err.all.map((e) => ({ field: "path" in e && e.path ? e.path : "/", message: e.summary ?? e.message }));
  } catch {
    return [];
  }
}

export function createApp(deps: Deps, options: AppOptions) {
  const clientOf = (request: Request): ClientInfo => {
    const meta = options.metaOf(request);
    return { ip: meta.ip, userAgent: meta.userAgent };
  };
  return new Elysia()
    .onError(({ code, error, request, set }) => {
      // Headers a route already decided (e.g. X-RateLimit-* of /public/*) go out with its error too.
      const decided = Object.fromEntries(Object.entries(set.headers).filter((e): e is [string, string] => typeof e[1] === "string"));
      if (error instanceof AppError) return errorResponse(error, decided);
      // A response that fails its own schema is our bug, not the client's: it falls through to 500.
      if (code === "VALIDATION" && error instanceof ValidationError && error.type !== "response") {
        const details = validationDetails(error);
        const where = error.type === "query" ? "query" : error.type === "body" ? "body" : error.type;
        return errorResponse(new AppError("VALIDATION_ERROR", `invalid ${where}`, { details }), decided);
      }
      if (code === "PARSE") return errorResponse(new AppError("VALIDATION_ERROR", "request body is not valid JSON"));
      if (code === "NOT_FOUND") return errorResponse(new AppError("NOT_FOUND", "no such route"));
      deps.log.error("unhandled error", {
        requestId: options.metaOf(request).requestId,
        error: errorText(error),
      });
      return errorResponse(internalError());
    })
    .use(
      openapi({
        path: "/docs",
        specPath: "/openapi.json",
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
    )
    .get("/healthz", () => ({ status: "ok" as const }), { detail: { summary: "The process is up", tags: ["health"] } })
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
    )
    .use(authRoutes(deps, clientOf))
    .use(publicRoutes(deps))
    .use(payRoutes(deps, clientOf))
    .use(dashboardApiRoutes(deps))
    // The MCP transport reads the body itself (mcp.md: Elysia must not consume it first).
    .all("/mcp", ({ request }) => options.mcp.handle(request, clientOf(request)), {
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
