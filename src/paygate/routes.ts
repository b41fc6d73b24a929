// HTTP edge of the public API (paygate.md "Public API"): X-API-Key, per-owner rate limits with their
// headers on every answer to a valid key, and the owner's products.
import { Elysia, t } from "elysia";
import type { Deps } from "../deps.ts";
import { AppError } from "../errors.ts";
import { createKeyAuthenticator, type KeyCaller } from "./keys.ts";
import { getProduct, listProducts } from "./products.ts";

const ErrorBody = t.Object({ error: t.String(), code: t.String(), retryAfter: t.Optional(t.Integer()), details: t.Optional(t.Unknown()) });

export function publicRoutes(deps: Deps) {
  const limiter = deps.paygate.rateLimiter;
  const authenticate = createKeyAuthenticator(deps);
  const callers = new WeakMap<Request, KeyCaller>();
  const callerOf = (request: Request): KeyCaller => callers.get(request)!;

  return (
    new Elysia({ name: "public-routes", prefix: "/public", detail: { tags: ["public"], security: [{ apiKey: [] }] } })
      // Before validation: a request without a valid key hears 401 whatever else is wrong with it, and
      // does not count against anyone.
      .onTransform(async ({ request, set }) => {
        const caller = await authenticate(request.headers.get("x-api-key"));
        callers.set(request, caller);
        const decision = limiter.hit(caller.owner, caller.tier, deps.clock.now());
        if (decision === null) return; // unlimited: no headers
        set.headers["x-ratelimit-limit"] = String(decision.limit);
        set.headers["x-ratelimit-remaining"] = String(decision.remaining);
        set.headers["x-ratelimit-reset"] = String(decision.resetS);
        if (!decision.allowed) throw new AppError("RATE_LIMITED", "Rate limit exceeded", { retryAfter: decision.retryAfterS });
      })
      .get("/products", async ({ request }) => ({ products: await listProducts(deps, callerOf(request).owner) }), {
        detail: { summary: "The owner's products, newest first (archived ones with their status)" },
        response: { 401: ErrorBody, 429: ErrorBody },
      })
      .get("/products/:id", async ({ request, params }) => getProduct(deps, callerOf(request).owner, params.id), {
        params: t.Object({ id: t.String({ maxLength: 64 }) }),
        detail: { summary: "One of the owner's products; another owner's is 404" },
        response: { 401: ErrorBody, 404: ErrorBody, 429: ErrorBody },
      })
  );
}
