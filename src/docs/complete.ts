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
  "401": "UNAUTHENTICATED, TOKEN_INVALID, TOKEN_EXPIRED or TOKEN_REVOKED: no usable session (Bearer token or the pages' cookie)",
  "403": "FORBIDDEN: a write carried by the pages' cookie without this server's Origin",
  "413": "PAYLOAD_TOO_LARGE: the body is over MAX_BODY_BYTES",
  "422": "a refusal its code names: PAYMENT_MISMATCH, TRANSACTION_REJECTED or INSUFFICIENT_FUNDS (a payment), NOT_SUPPORTED (not on this network or configuration)",
  "503": "CHAIN_UNAVAILABLE: the Solana RPC node did not answer",
};

/** Dashboard routes that need no session (they make one). */
const OPEN = new Set(["POST /dashboard/api/session", "POST /dashboard/api/session/link"]);

/** The statuses a route can answer by its kind alone (beyond those it declares). */
function sharedErrors(route: RouteInfo): string[] {
  const method = route.method.toUpperCase();
  const statuses: string[] = [];
  if (route.hooks.body !== undefined) statuses.push("400", "413");
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
  const errorResponse = (status: string): Response => ({ description: WHY[status], content: { "application/json": { schema: errorBody } } });
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
    for (const status of sharedErrors(route)) responses[status] ??= errorResponse(status);
    // The plugin names declared statuses "Response for status N": say what they mean where the catalogue does.
    for (const [status, response] of Object.entries(responses)) {
      if (WHY[status] !== undefined && response.description?.startsWith("Response for status")) response.description = WHY[status];
    }
    operation.responses = Object.fromEntries(Object.entries(responses).sort(([a], [b]) => a.localeCompare(b)));
  }
  // /mcp is one route for every method (the MCP transport answers them all); the Streamable HTTP transport
  // uses three, each its own operation with an id of its own (an OpenAPI document's ids are unique).
  const mcp = doc.paths?.["/mcp"] as Record<string, { operationId?: string }> | undefined;
  if (mcp !== undefined) {
    for (const method of Object.keys(mcp)) {
      if (!["get", "post", "delete"].includes(method)) delete mcp[method];
      else mcp[method]!.operationId = `${method}Mcp`;
    }
  }
  const paths = (doc.paths ??= {}) as Record<string, Record<string, unknown>>;
  for (const [path, get] of Object.entries(PAGES)) paths[path] = { ...paths[path], get };
  return doc;
}
