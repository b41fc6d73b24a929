// The OpenAPI document as @elysiajs/openapi builds it, completed where the plugin cannot know: the bodies
// our own JSON parser reads (it lists no content type for a parser that is a function, and `text/plain`
// for the /public/* routes, which read the text to check its depth first), the success answers
// (docs/answers.ts: routes declare only their errors), and the errors every route of a kind can answer,
// by the rules of the error catalogue (spec/README.md) that routes share.
import type { OpenApiDocument } from "./page.ts";

/** What `app.routes` tells of a route (Elysia): its method, its path (`:id`) and its schemas. */
export type RouteInfo = { method: string; path: string; hooks: { body?: unknown; params?: unknown; query?: unknown } };

type Response = { description?: string; content?: Record<string, { schema?: unknown }> };

const WHY: Record<string, string> = {
  "400": "VALIDATION_ERROR: the body, query or path parameters fail their schema (details lists the fields); INVALID_ADDRESS where a wallet address is taken",
  "401": "UNAUTHENTICATED, TOKEN_INVALID, TOKEN_EXPIRED or TOKEN_REVOKED: no usable session (Bearer token or the pages' cookie), or one that is not valid",
  "429": "RATE_LIMITED: too many requests; retryAfter (and the Retry-After header) says in how many seconds to try again",
  "403": "FORBIDDEN: a write carried by the pages' cookie without this server's Origin",
  "413": "PAYLOAD_TOO_LARGE: the body is over MAX_BODY_BYTES",
  "422": "a refusal its code names: PAYMENT_MISMATCH, TRANSACTION_REJECTED or INSUFFICIENT_FUNDS (a payment), NOT_SUPPORTED (not on this network or configuration)",
  "503": "CHAIN_UNAVAILABLE: the Solana RPC node did not answer",
};

/** What a 401 means where it is not a session's: /public/* (API keys) and the routes proving a wallet. */
function why401(method: string, path: string): string {
  if (path.startsWith("/public/")) return "MISSING_API_KEY or INVALID_API_KEY: no usable X-API-Key";
  if (method.toUpperCase() === "POST" && ["/auth/verify", "/auth/revoke-all", "/dashboard/api/session"].includes(path)) {
    return "INVALID_SIGNATURE, NONCE_NOT_FOUND, NONCE_USED or CHALLENGE_EXPIRED: the signed challenge does not hold";
  }
  if (path === "/dashboard/api/session/link") return "NONCE_NOT_FOUND, NONCE_USED or CHALLENGE_EXPIRED: the sign-in link code is unknown, used or expired";
  return WHY["401"]!;
}

/** The rate-limit headers of paygate.md, on every /public/* answer to a valid key. */
const RATE_HEADERS = {
  "X-RateLimit-Limit": { description: "requests allowed in the window that limits (minute or day)", schema: { type: "integer" } },
  "X-RateLimit-Remaining": { description: "requests left in that window", schema: { type: "integer" } },
  "X-RateLimit-Reset": { description: "when that window has room again, in Unix seconds", schema: { type: "integer" } },
};
const RETRY_AFTER = { "Retry-After": { description: "seconds to wait before trying again (at least 1)", schema: { type: "integer", minimum: 1 } } };

/**
 * Elysia's `t.Integer` also takes numeric strings (for query strings), which the plugin writes as "a string
 * or an integer": every integer here is a JSON number, so the document says integer.
 */
function plainIntegers(node: unknown): unknown {
  if (Array.isArray(node)) return node.map(plainIntegers);
  if (node === null || typeof node !== "object") return node;
  const anyOf = (node as { anyOf?: unknown }).anyOf;
  if (Array.isArray(anyOf) && anyOf.length === 2) {
    const [text, integer] = anyOf as { type?: string; format?: string }[];
    if (text?.type === "string" && text.format === "integer" && integer?.type === "integer") {
      const { anyOf: _, ...rest } = node as Record<string, unknown>;
      return plainIntegers({ ...rest, ...integer });
    }
  }
  return Object.fromEntries(Object.entries(node).map(([k, v]) => [k, plainIntegers(v)]));
}

/** Dashboard routes that need no session (they make one). */
const OPEN = new Set(["POST /dashboard/api/session", "POST /dashboard/api/session/link"]);

/** The statuses a route can answer by its kind alone (beyond those it declares). */
function sharedErrors(route: RouteInfo): string[] {
  const method = route.method.toUpperCase();
  const statuses: string[] = [];
  if (route.hooks.body !== undefined) statuses.push("400");
  // A declared body over MAX_BODY_BYTES is refused before any route runs (server.ts), whatever the route.
  statuses.push("413");
  if (route.hooks.params !== undefined || route.hooks.query !== undefined) statuses.push("400");
  if (route.path.startsWith("/dashboard/api/") && !OPEN.has(`${method} ${route.path}`)) {
    statuses.push("401");
    if (method !== "GET") statuses.push("403");
  }
  return statuses;
}

/**
 * A body schema as written: Elysia marks a route's object schemas closed (`additionalProperties: false`)
 * when the route first runs, which would make the document depend on traffic; unknown fields of a body
 * are dropped, not refused, so open is also what the route does.
 */
function asWritten(schema: unknown): unknown {
  return JSON.parse(JSON.stringify(schema), (key, value: unknown) =>
    value !== null && typeof value === "object" && !Array.isArray(value) && (value as { additionalProperties?: unknown }).additionalProperties === false
      ? Object.fromEntries(Object.entries(value).filter(([k]) => k !== "additionalProperties"))
      : value,
  );
}

/** A page (dashboard.md) in the document: answered before the app's routes (server.ts), so no route declares it. */
const page = (summary: string, operationId: string, parameters: unknown[] = []) => ({
  tags: ["pages"],
  summary,
  operationId,
  ...(parameters.length === 0 ? {} : { parameters }),
  responses: { "200": { description: "an HTML page; its script calls the API routes", content: { "text/html": { schema: { type: "string" } } } } },
});

/** The pages, so that the document names every endpoint the server answers (operations.md). */
const PAGES: Record<string, ReturnType<typeof page>> = {
  "/dashboard": page("The owner dashboard: sign in with a wallet, then products, keys, webhooks and sales", "getDashboardPage"),
  "/pay/{productId}": page("The checkout page of a product (its payment link): pay with a browser wallet", "getPayPage", [
    { name: "productId", in: "path", required: true, schema: { type: "string" }, description: "the product's id, prod_…" },
  ]),
};

export function completeDocument(
  doc: OpenApiDocument,
  routes: readonly RouteInfo[],
  errorBody: unknown,
  answers: Readonly<Record<string, { status: number; schema: unknown }>> = {},
): OpenApiDocument {
  const errorResponse = (status: string, method: string, path: string): Response => ({
    description: status === "401" ? why401(method, path) : WHY[status],
    content: { "application/json": { schema: errorBody } },
  });
  for (const route of routes) {
    const path = route.path.replace(/:([^/]+)/g, "{$1}");
    const operation = doc.paths?.[path]?.[route.method.toLowerCase()] as
      | { requestBody?: { content?: Record<string, { schema?: unknown }>; required?: boolean }; responses?: Record<string, Response> }
      | undefined;
    if (operation === undefined) continue;
    if (route.hooks.body !== undefined) {
      const schema = asWritten(route.hooks.body) as Record<string, unknown>;
      // The dashboard's bodies refuse fields they do not name (dashboard/routes.ts, knownFieldsOnly).
      if (route.path.startsWith("/dashboard/api/")) schema.additionalProperties = false;
      operation.requestBody = { required: true, content: { "application/json": { schema } } };
    }
    const responses = (operation.responses ??= {});
    const answer = answers[`${route.method.toUpperCase()} ${route.path}`];
    if (answer !== undefined && !Object.keys(responses).some((status) => status.startsWith("2"))) {
      responses[String(answer.status)] = { description: answer.status === 201 ? "Created" : "OK", content: { "application/json": { schema: asWritten(answer.schema) } } };
    }
    for (const status of sharedErrors(route)) responses[status] ??= errorResponse(status, route.method, route.path);
    // The plugin names declared statuses "Response for status N": say what they mean where the catalogue does.
    for (const [status, response] of Object.entries(responses)) {
      if (WHY[status] !== undefined && response.description?.startsWith("Response for status")) response.description = status === "401" ? why401(route.method, route.path) : WHY[status];
      const headers = {
        ...(route.path.startsWith("/public/") && status !== "401" && status !== "413" ? RATE_HEADERS : {}),
        ...(status === "429" ? RETRY_AFTER : {}),
      };
      if (Object.keys(headers).length > 0) (response as Response & { headers?: unknown }).headers = headers;
    }
    operation.responses = Object.fromEntries(Object.entries(responses).sort(([a], [b]) => a.localeCompare(b)));
  }
  // /mcp is one route for every method (the MCP transport answers them all); the Streamable HTTP transport
  // uses three, each its own operation with an id of its own (an OpenAPI document's ids are unique).
  const mcp = doc.paths?.["/mcp"] as Record<string, Record<string, unknown>> | undefined;
  if (mcp !== undefined) {
    for (const method of Object.keys(mcp)) {
      if (!["get", "post", "delete"].includes(method)) delete mcp[method];
      else Object.assign(mcp[method]!, { operationId: `${method}Mcp`, ...MCP_OPERATIONS[method] });
    }
  }
  const metrics = doc.paths?.["/metrics"]?.get as { responses?: Record<string, Response> } | undefined;
  if (metrics !== undefined) {
    metrics.responses = {
      "200": { description: "Prometheus text exposition format", content: { "text/plain; version=0.0.4": { schema: { type: "string" } } } },
      "413": { description: WHY["413"] },
    };
  }
  const readyz = doc.paths?.["/readyz"]?.get as { responses?: Record<string, Response> } | undefined;
  if (readyz?.responses !== undefined) {
    readyz.responses["503"] = {
      description: "the database or the ledger does not answer",
      content: {
        "application/json": {
          schema: {
            type: "object",
            required: ["status", "checks"],
            properties: {
              status: { const: "unavailable", type: "string" },
              checks: { type: "object", required: ["database", "ledger"], properties: { database: { enum: ["ok", "error"] }, ledger: { enum: ["ok", "error"] } } },
            },
          },
        },
      },
    };
  }
  // The dashboard API takes the pages' session cookie as well as a Bearer token (dashboard.md).
  const schemes = ((doc as { components?: { securitySchemes?: Record<string, unknown> } }).components ??= {}).securitySchemes ?? {};
  (doc as { components: { securitySchemes?: Record<string, unknown> } }).components.securitySchemes = {
    ...schemes,
    cookie: { type: "apiKey", in: "cookie", name: "wg_session", description: "the pages' session (__Host-wg_session when BASE_URL is https)" },
  };
  for (const [path, item] of Object.entries(doc.paths ?? {})) {
    if (!path.startsWith("/dashboard/api/")) continue;
    for (const operation of Object.values(item as Record<string, { security?: unknown[] }>)) {
      if (Array.isArray(operation.security) && operation.security.some((s) => "bearer" in (s as object))) operation.security = [{ bearer: [] }, { cookie: [] }];
    }
  }
  const session = doc.paths?.["/dashboard/api/session"]?.delete as { security?: unknown[] } | undefined;
  if (session !== undefined) session.security = [{ bearer: [] }, { cookie: [] }];
  const paths = (doc.paths ??= {}) as Record<string, Record<string, unknown>>;
  for (const [path, get] of Object.entries(PAGES)) paths[path] = { ...paths[path], get };
  return plainIntegers(doc) as OpenApiDocument;
}

/** What GET and DELETE /mcp answer besides their success (the transport's checks and the session's). */
const MCP_SESSION_ERRORS = {
  "400": { description: "no Mcp-Session-Id, or an MCP-Protocol-Version this server does not speak" },
  "403": { description: "a page of another origin (Origin header)" },
  "404": { description: "no such session" },
  "413": { description: WHY["413"] },
};

const jsonRpc = { type: "object", description: "a JSON-RPC 2.0 message of MCP (an array of them: a batch, MCP 2025-03-26)" };
/** The three methods of MCP's Streamable HTTP transport at /mcp, and the plain envelope calls of mcp.md. */
const MCP_OPERATIONS: Record<string, Record<string, unknown>> = {
  post: {
    summary: "MCP (Streamable HTTP): a JSON-RPC message or batch; or a plain call {tool, params} answered with the envelope",
    security: [{}, { bearer: [] }],
    requestBody: {
      required: true,
      content: {
        "application/json": {
          schema: {
            oneOf: [
              jsonRpc,
              { type: "array", items: jsonRpc },
              { type: "object", required: ["tool"], properties: { tool: { type: "string" }, params: { type: "object" } }, description: "a plain call (mcp.md)" },
            ],
          },
        },
      },
    },
    responses: {
      "200": { description: "the JSON-RPC answer (or batch of answers), or the plain call's envelope {success, data | error, code}", content: { "application/json": { schema: { type: ["object", "array"] } } } },
      "202": { description: "a notification or response taken: nothing to answer" },
      "400": { description: "not JSON-RPC, or no Mcp-Session-Id where one is needed; a plain call's VALIDATION_ERROR" },
      "401": { description: "a plain call's TOKEN_INVALID, TOKEN_EXPIRED or TOKEN_REVOKED (its Bearer token), or UNAUTHENTICATED" },
      "403": { description: "a page of another origin (Origin header), or a plain call's FORBIDDEN" },
      "404": { description: "the Mcp-Session-Id names no session (open one with initialize); a plain call's NOT_FOUND" },
      "406": { description: "the Accept header takes neither application/json nor text/event-stream (Streamable HTTP)" },
      "409": { description: "a plain call's CONFLICT or INVALID_STATE" },
      "413": { description: WHY["413"] },
      "422": { description: WHY["422"] },
      "429": { description: WHY["429"] },
      "503": { description: "CHAIN_UNAVAILABLE (a plain call), or every MCP session busy (Retry-After)" },
    },
  },
  get: {
    summary: "MCP (Streamable HTTP): the session's event stream",
    responses: {
      "200": { description: "server-sent events", content: { "text/event-stream": { schema: { type: "string" } } } },
      ...MCP_SESSION_ERRORS,
      "405": { description: "the session is out of memory and there is no room to bring it back for a stream now" },
      "406": { description: "the Accept header does not take text/event-stream" },
      "409": { description: "the session has an event stream open already" },
      "503": { description: "the server is shutting down" },
    },
  },
  delete: {
    summary: "MCP (Streamable HTTP): end the session now",
    responses: { "200": { description: "ended" }, ...MCP_SESSION_ERRORS, "503": { description: "every MCP session is busy: retry shortly (Retry-After)" } },
  },
};
