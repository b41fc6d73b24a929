// HTTP edges of payment gating: the public API (paygate.md "Public API": X-API-Key, per-owner rate limits
// with their headers on every answer to a valid key) and the buyer's checkout under /pay (no key).
import { Elysia, t } from "elysia";
import type { Deps } from "../deps.ts";
import { AppError, jsonBodyParser, parseJsonBody } from "../errors.ts";
import { importQuietly } from "../lib/quiet-import.ts";
import type { ClientInfo } from "../auth/fingerprint.ts";
import { checkoutHits, paymentCheckHits } from "../auth/rate-limit.ts";
import { createKeyAuthenticator, type KeyCaller } from "./keys.ts";
import { buyerProduct, getProduct, listProducts } from "./products.ts";
import { checkAccess, ownerStats, verifyTransaction } from "./purchases.ts";
import { listFeatureTokens, revokeFeatureToken, verifyFeatureToken } from "./tokens.ts";
import { ErrorBody, QueryInteger } from "../http-schemas.ts";

const Id = t.String({ maxLength: 64 });
// No length cap in these two schemas: a string of any length that is not an address is INVALID_ADDRESS, and
// one that is not a token is an unknown token (paygate.md), not a schema failure. MAX_BODY_BYTES bounds both.
const Address = t.String({ description: "a Solana address (base58 of 32 bytes)" });
export const AccessToken = t.String({ description: "an ft_ feature access token" });

/** The query of GET /public/feature/tokens and GET /dashboard/api/tokens. */
export const TokenListQuery = t.Object({
  productId: t.Optional(Id),
  walletAddress: t.Optional(Address),
  status: t.Optional(t.Union([t.Literal("active"), t.Literal("revoked"), t.Literal("expired")])),
  limit: QueryInteger("limit", 1, 1000, "1 to 1000, default 100"),
  offset: QueryInteger("offset", 0),
});

/** paygate.md: revoking a token that is not the owner's (or not a token) is 404 in this shape, not the error body. */
export const RevokeMissing = t.Object({ success: t.Literal(false), error: t.String(), code: t.Literal("NOT_FOUND") }, { additionalProperties: false });

/**
 * A revoke answered as the source document shows it: `{success: true, message}`, or for an unknown or
 * another owner's token `404 {success: false, error, code: "NOT_FOUND"}` (not the plain error body).
 */
export async function revokeAnswer(deps: Deps, owner: string, accessToken: string, set: { status?: number | string }) {
  try {
    return await revokeFeatureToken(deps, owner, accessToken);
  } catch (err) {
    if (!(err instanceof AppError) || err.code !== "NOT_FOUND") throw err;
    set.status = 404;
    return { success: false as const, error: err.message, code: err.code };
  }
}

export function publicRoutes(deps: Deps) {
  const limiter = deps.paygate.rateLimiter;
  const authenticate = createKeyAuthenticator(deps);
  const callers = new WeakMap<Request, KeyCaller>();
  const ownerOf = (request: Request): string => callers.get(request)!.owner;

  return (
    new Elysia({ name: "public-routes", prefix: "/public", detail: { tags: ["public"], security: [{ apiKey: [] }] } })
      // Before the body is parsed or validated: a request without a valid key hears 401 whatever else is
      // wrong with it (a body that is not JSON included), and does not count against anyone. Bodies are
      // therefore read as text (`parse: "text"` on every route with a body, which routes.test.ts checks: a
      // route-level parser costs nothing, where a parse hook here measured ~10 % off the access check) and
      // parsed here, after the key and the limit.
      // Synchronous (no frame to await per request: store.ts), hence a named function Elysia does not take for async.
      .onTransform(function keyAndLimit(context) {
        const { request, set } = context;
        const caller = authenticate(request.headers.get("x-api-key"));
        callers.set(request, caller);
        const decision = limiter.hit(caller.owner, caller.tier, deps.clock.now());
        // null: the unlimited tier, which carries no limit headers
        if (decision !== null) {
          set.headers["x-ratelimit-limit"] = String(decision.limit);
          set.headers["x-ratelimit-remaining"] = String(decision.remaining);
          set.headers["x-ratelimit-reset"] = String(decision.resetS);
          if (!decision.allowed) throw new AppError("RATE_LIMITED", "Rate limit exceeded", { retryAfter: decision.retryAfterS });
        }
        // Parsed once the key is known good: what is not JSON is VALIDATION_ERROR, as elsewhere.
        if (typeof context.body === "string") (context as { body: unknown }).body = parseJsonBody(context.body);
      })
      .get("/products", ({ request, query }) => listProducts(deps, ownerOf(request), query.offset ?? 0), {
        query: t.Object({ offset: QueryInteger("offset", 0) }),
        detail: {
          summary:
            "The owner's products, newest first (archived ones with their status): a page of up to ~1 MB of JSON, with total and hasMore (ask again from offset + the products returned)",
        },
        response: { 401: ErrorBody, 429: ErrorBody },
      })
      .get("/products/:id", async ({ request, params }) => getProduct(deps, ownerOf(request), params.id), {
        params: t.Object({ id: Id }),
        detail: { summary: "One of the owner's products; another owner's is 404" },
        response: { 401: ErrorBody, 404: ErrorBody, 429: ErrorBody },
      })
      .get("/stats", ({ request }) => ownerStats(deps, ownerOf(request)), {
        detail: { summary: "Revenue (totalRevenue in USDC, every currency in revenueByCurrency), purchases and products" },
        response: { 401: ErrorBody, 429: ErrorBody },
      })
      // A named function whose answer is not awaited (checkAccess is synchronous): Elysia's source check takes
      // an arrow returning a call for async.
      .post("/access/check", function accessCheck({ request, body }) {
        const answer = checkAccess(deps, ownerOf(request), body.productId, body.walletAddress);
        return answer;
      }, {
        parse: "text",
        body: t.Object({ productId: Id, walletAddress: Address }),
        detail: { summary: "Whether a wallet has access to a product now; without it, the paymentUrl to buy it" },
        response: { 400: ErrorBody, 401: ErrorBody, 404: ErrorBody, 429: ErrorBody },
      })
      // A payment the buyer sent itself is recorded here if the watcher has not yet.
      .get("/verify/:txHash", ({ request, params }) => {
        const owner = ownerOf(request);
        return verifyTransaction(deps, owner, params.txHash, async (tx) => (await checkout()).recordPaymentOf(deps, owner, tx));
      }, {
        params: t.Object({ txHash: t.String({ maxLength: 100 }) }),
        detail: { summary: "Whether a transaction is a purchase of one of the owner's products (valid: false otherwise)" },
        // 503: the transaction is read from the chain when it is not a recorded purchase.
        response: { 400: ErrorBody, 401: ErrorBody, 429: ErrorBody, 503: ErrorBody },
      })
      .post("/feature/verify", ({ request, body }) => verifyFeatureToken(deps, ownerOf(request), body.accessToken), {
        parse: "text",
        body: t.Object({ accessToken: AccessToken }),
        detail: { summary: "Whether a feature access token is valid now, and the features it unlocks" },
        response: { 400: ErrorBody, 401: ErrorBody, 429: ErrorBody },
      })
      .get(
        "/feature/tokens",
        ({ request, query, set }) => {
          // The buyers' tokens themselves: no cache in front of /public keeps them (a GET, keyed by X-API-Key).
          set.headers["cache-control"] = "no-store";
          return listFeatureTokens(deps, ownerOf(request), query);
        },
        {
          query: TokenListQuery,
          detail: { summary: "The owner's feature access tokens, newest first; a productId that is not one of the owner's products is 404" },
          response: { 400: ErrorBody, 401: ErrorBody, 404: ErrorBody, 429: ErrorBody },
        },
      )
      .post("/feature/revoke", ({ request, body, set }) => revokeAnswer(deps, ownerOf(request), body.accessToken, set), {
        parse: "text",
        body: t.Object({ accessToken: AccessToken }),
        detail: { summary: "Revoke a feature access token, permanently" },
        response: { 400: ErrorBody, 401: ErrorBody, 404: RevokeMissing, 429: ErrorBody },
      })
      // Every /public/* request needs its key (paygate.md), a path that names no endpoint too: 404 only
      // after the key check, with the limit headers like any other answer to a valid key.
      .all(
        "/*",
        () => {
          throw new AppError("NOT_FOUND", "no such route");
        },
        { parse: "none", detail: { hide: true } }, // any method: no body is read, and the key comes first
      )
  );
}

const CheckoutId = t.String({ maxLength: 64 });

/** Checkout builds and reads Solana transactions: @solana/web3.js loads with the first checkout, not at start. */
const checkout = () => importQuietly(() => import("./checkout.ts"));

/** The buyer's side (paygate.md "Checkout"): no API key; the checkout id is the buyer's handle. */
export function payRoutes(deps: Deps, clientOf: (request: Request) => ClientInfo) {
  // Each submit or confirm may read the chain: bounded per client network, as opening checkouts is.
  const paymentCheck = (request: Request) => {
    deps.auth.rateLimiter.consume(paymentCheckHits(clientOf(request).ip), deps.clock.now());
  };
  return new Elysia({ name: "pay-routes", prefix: "/pay", detail: { tags: ["checkout"] } })
    .get("/:productId/product", ({ params }) => buyerProduct(deps, params.productId), {
      params: t.Object({ productId: Id }),
      detail: { summary: "What the checkout page shows of a product (title, description, price, network, status)" },
      response: { 404: ErrorBody },
    })
    .post(
      "/:productId/checkout",
      async ({ params, body, request }) => {
        // Every checkout opened is a row kept for 15 minutes: bounded per client network.
        deps.auth.rateLimiter.consume(checkoutHits(clientOf(request).ip), deps.clock.now());
        return (await checkout()).startCheckout(deps, params.productId, body.walletAddress, body.checkoutId);
      },
      {
      params: t.Object({ productId: Id }),
      parse: jsonBodyParser,
      body: t.Object({ walletAddress: Address, checkoutId: t.Optional(CheckoutId) }),
      detail: {
        summary: "Open a checkout (15 minutes): an unsigned transaction for the buyer to sign",
        description: "With the checkoutId of an open checkout, the same reference on a fresh blockhash.",
      },
      response: { 400: ErrorBody, 404: ErrorBody, 409: ErrorBody, 429: ErrorBody, 503: ErrorBody },
      },
    )
    .post(
      "/:productId/submit",
      async ({ params, body, request }) => {
        paymentCheck(request);
        return (await checkout()).submitCheckout(deps, params.productId, body.checkoutId, body.transaction);
      },
      {
        params: t.Object({ productId: Id }),
        parse: jsonBodyParser,
        // 1,232 bytes at most, so at most 1,644 base64 characters.
        body: t.Object({ checkoutId: CheckoutId, transaction: t.String({ maxLength: 1700, description: "the signed transaction, standard base64" }) }),
        detail: { summary: "Submit the signed checkout transaction, wait for it, and confirm the purchase" },
        response: { 400: ErrorBody, 404: ErrorBody, 409: ErrorBody, 422: ErrorBody, 429: ErrorBody, 503: ErrorBody },
      },
    )
    .post(
      "/:productId/confirm",
      async ({ params, body, request }) => {
        paymentCheck(request);
        return (await checkout()).confirmCheckout(deps, params.productId, body.checkoutId, body.txHash);
      },
      {
        params: t.Object({ productId: Id }),
        parse: jsonBodyParser,
        body: t.Object({
          checkoutId: CheckoutId,
          txHash: t.Optional(t.String({ maxLength: 100, description: "the signature of a payment the buyer sent itself: read first" })),
        }),
        detail: { summary: "Find the checkout's payment by its reference (or its txHash): pending, or the completed purchase" },
        response: { 404: ErrorBody, 409: ErrorBody, 422: ErrorBody, 429: ErrorBody, 503: ErrorBody },
      },
    );
}
