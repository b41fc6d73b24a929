// HTTP edge of the Dashboard API (dashboard.md): the owner's profile and limits, products, API keys,
// webhooks, feature tokens, purchases and statistics, for a Bearer token or the pages' session cookie.
import { Elysia, t } from "elysia";
import { bearerToken } from "../lib/bearer.ts";
import type { Deps } from "../deps.ts";
import { AppError, parseBodyReadAsText } from "../errors.ts";
import { firstCharacters } from "../lib/text.ts";
import { revokeSessionToken, authenticateToken } from "../auth/sessions.ts";
import { ownerWriteHits } from "../auth/rate-limit.ts";
import { redeemDashboardLink } from "./links.ts";
import type { ClientInfo } from "../auth/fingerprint.ts";
import { clearedSessionCookie, cookieTokens, dashboardToken, requireSameOrigin, sessionCookie } from "./session.ts";
import { createApiKey, listApiKeys, revokeApiKey } from "../paygate/keys.ts";
import { ownerOfSession, ownerUsage, type Owner } from "../paygate/owners.ts";
import { archiveProduct, createProduct, getProduct, listProducts, updateProduct } from "../paygate/products.ts";
import { listPurchases, ownerStatsWithDaily } from "../paygate/purchases.ts";
import { AccessToken, revokeAnswer, RevokeMissing, TokenListQuery } from "../paygate/routes.ts";
import { listFeatureTokens } from "../paygate/tokens.ts";
import {
  createEndpoint,
  deleteEndpoint,
  listEndpoints,
  revealEndpointSecret,
  rotateEndpointSecret,
  updateEndpoint,
} from "../webhooks/endpoints.ts";
import { listDeliveries, listDeliveryAttempts, resendDelivery, sendTestEvent } from "../webhooks/outbox.ts";
import { ErrorBody, knownFieldsOnly, QueryInteger } from "../http-schemas.ts";

const Id = t.Object({ id: t.String({ maxLength: 64 }) });
const Amount = t.Union([t.String({ maxLength: 40 }), t.Number()], { description: 'a decimal amount in whole tokens, e.g. "9.99"' });
const ProductFields = {
  title: t.String({ maxLength: 200 }),
  description: t.String({ maxLength: 2000 }),
  price: Amount,
  currency: t.Optional(t.String({ maxLength: 20, description: "USDC (default) or the service token's symbol" })),
  featureIds: t.Optional(t.Array(t.String({ maxLength: 64 }), { maxItems: 50 })),
  // No maxLength: an over-long address is INVALID_ADDRESS like any other bad one (spec README), and the body limit bounds it.
  payTo: t.Optional(t.Union([t.String(), t.Null()], { description: "wallet that receives payments; default (or null) the owner's" })),
  // A JSON number: t.Integer would also take its text, as `Number()` reads it ("0x10" as 16).
  accessDays: t.Optional(t.Union([t.Number({ minimum: 1, maximum: 36500, multipleOf: 1 }), t.Null()])),
  redirectOrigins: t.Optional(t.Array(t.String({ maxLength: 200 }), { maxItems: 10 })),
};
/** A product as its owner writes it: whole when it is created, in part when it is edited. */
const Product = t.Object({ ...ProductFields, type: t.Union([t.Literal("feature_unlock"), t.Literal("access")]) });
const PRODUCT_KEYS = Object.keys(Product.properties);

/** The pages' cookie: set from a session token the page got by signing in, and cleared (and revoked) on sign-out. */
export function dashboardSessionRoutes(deps: Deps, clientOf: (request: Request) => ClientInfo) {
  /**
   * Only this server's pages may set the cookie: the Origin is checked before the body (read as text) is
   * parsed, so another site hears 403 whatever it sent (the owner routes below do the same with the session).
   */
  const pagesOnly = (fields: readonly string[]) => {
    const known = knownFieldsOnly(fields);
    return (context: { request: Request; body: unknown }) => {
      requireSameOrigin(deps, context.request);
      parseBodyReadAsText(context);
      known(context);
    };
  };
  return new Elysia({ name: "dashboard-session", prefix: "/dashboard/api", detail: { tags: ["dashboard"] } })
    .post(
      "/session",
      async ({ body, set }) => {
        const session = await authenticateToken(deps, body.sessionToken);
        set.headers["set-cookie"] = sessionCookie(deps, body.sessionToken, session.expiresAtS);
        return { walletAddress: session.walletAddress, expiresAt: new Date(session.expiresAtS * 1000).toISOString() };
      },
      {
        transform: pagesOnly(["sessionToken"]),
        parse: "text",
        body: t.Object({ sessionToken: t.String({ maxLength: 2048 }) }),
        detail: { summary: "Keep a session token in the pages' HttpOnly, SameSite=Strict cookie (Origin must be this server)" },
        response: { 401: ErrorBody, 403: ErrorBody },
      },
    )
    .post(
      "/session/link",
      async ({ request, body, set }) => {
        const session = await redeemDashboardLink(deps, body.code, clientOf(request));
        set.headers["set-cookie"] = sessionCookie(deps, session.token, session.expiresAtS);
        return { walletAddress: session.walletAddress, expiresAt: session.expiresAt };
      },
      {
        transform: pagesOnly(["code"]),
        parse: "text",
        body: t.Object({ code: t.String({ maxLength: 100 }) }),
        detail: { summary: "Redeem a one-time link of `walletgate dashboard-link` for the pages' session cookie" },
        response: { 400: ErrorBody, 401: ErrorBody, 403: ErrorBody },
      },
    )
    .delete(
      "/session",
      async ({ request, set }) => {
        // A script signing out with its Bearer token: that token is revoked (as POST /auth/revoke, errors
        // included: a token already dead is not reported signed out), and no Origin is asked for.
        const bearer = bearerToken(request.headers.get("authorization"));
        if (bearer !== null) await revokeSessionToken(deps, bearer);
        // Every session cookie's token (two when a neighbour planted one): ours is revoked whichever it is. With a
        // Bearer token beside it no Origin is asked for: no other site's page can send an Authorization header here.
        const tokens = cookieTokens(deps, request);
        if (tokens.length > 0) {
          if (bearer === null) requireSameOrigin(deps, request);
          // A page signing out the wallet it shows: not another wallet's session set since in this browser.
          if (bearer === null && request.headers.get(SHOWN_WALLET_HEADER) !== null) {
            for (const token of tokens) {
              const live = await authenticateToken(deps, token).catch((err) => {
                if (err instanceof AppError) return null; // a dead one is cleared whoever's it was
                throw err;
              });
              if (live !== null) requireShownWallet(request, live.walletAddress);
            }
          }
          for (const token of tokens) {
            // Already revoked, expired or not a token: signing out still clears the cookie.
            await revokeSessionToken(deps, token).catch((err) => {
              if (!(err instanceof AppError)) throw err;
            });
          }
        }
        if (bearer === null || tokens.length > 0) set.headers["set-cookie"] = clearedSessionCookie(deps);
        return { signedOut: true };
      },
      {
        detail: { summary: "Sign out: revoke the session token (Bearer, and the cookie's) and clear the cookie" },
        response: { 401: ErrorBody, 403: ErrorBody },
      },
    );
}

/** The header in which the pages name the wallet they show (api.ts). */
export const SHOWN_WALLET_HEADER = "x-walletgate-wallet";

/**
 * A page names the wallet it shows: a browser's one session cookie may since have been set for another
 * wallet (a sign-in in another tab, a dashboard link), and the page's request would then read or change
 * that wallet's account under the first one's address. Refused, with nothing done; the page then reloads.
 */
function requireShownWallet(request: Request, wallet: string): void {
  const shown = request.headers.get(SHOWN_WALLET_HEADER);
  if (shown === null || shown === wallet) return;
  throw new AppError(
    "UNAUTHENTICATED",
    `this page shows wallet ${firstCharacters(shown, 44)}, but this browser is now signed in as ${wallet} (in another tab, or by a sign-in link): nothing was done; reload the page`,
    { details: { reason: "other_wallet" } },
  );
}

export function dashboardApiRoutes(deps: Deps, clientOf: (request: Request) => ClientInfo) {
  const owners = new WeakMap<Request, Owner>();
  const ownerOf = (request: Request): Owner => owners.get(request)!;
  /**
   * The owner, after counting a write that makes a row or an outbox event against its limits and its client
   * network's (auth/rate-limit.ts).
   */
  const counted = (request: Request, kind: "write" | "webhook"): string => {
    const owner = ownerOf(request).walletAddress;
    deps.auth.rateLimiter.consume(ownerWriteHits(owner, kind, clientOf(request).ip), deps.clock.now());
    return owner;
  };
  return (
    new Elysia({ name: "dashboard-api", prefix: "/dashboard/api", detail: { tags: ["dashboard"], security: [{ bearer: [] }] } })
        // Answers carry secrets (a new key, a webhook secret, feature tokens): no cache keeps them, errors
      // included (a body refused while parsing too: this runs before it).
      .onRequest(({ set }) => {
        set.headers["cache-control"] = "no-store";
      })
      // Before the body is parsed or validated (paygate's /public does the same): a request without a session,
      // or a cookie-carried change from elsewhere, hears 401 or 403 whatever else is wrong with it. Routes with
      // a body read it as text (`parse: "text"`), those without one read none (`parse: "none"`), and the body is
      // parsed here, after (test/dashboard-session.test.ts asks every route the OpenAPI document lists).
      .onTransform(async (context) => {
        const { request } = context;
        const owner = await ownerOfSession(deps, dashboardToken(deps, request));
        requireShownWallet(request, owner.walletAddress);
        owners.set(request, owner);
        parseBodyReadAsText(context);
      })
      .get("/me", ({ request }) => ownerUsage(deps, ownerOf(request)), { detail: { summary: "The owner, its tier and its rate-limit use" } })
      .get("/products", ({ request, query }) => listProducts(deps, ownerOf(request).walletAddress, query.offset ?? 0), {
        query: t.Object({ offset: QueryInteger("offset", 0) }),
        detail: { summary: "The owner's products, newest first: a page of up to ~1 MB of JSON, with total and hasMore (ask again from offset + the products returned)" },
      })
      .get("/products/:id", ({ request, params }) => getProduct(deps, ownerOf(request).walletAddress, params.id), {
        params: t.Object({ id: t.String({ maxLength: 64 }) }),
        detail: { summary: "One of the owner's products; another owner's is 404" },
        response: { 404: ErrorBody },
      })
      .post(
        "/products",
        async ({ request, body, set }) => {
          set.status = 201;
          return createProduct(deps, counted(request, "write"), body);
        },
        {
          transform: knownFieldsOnly(PRODUCT_KEYS),
          parse: "text",
          body: Product,
          detail: { summary: "Create a product (at most 1,000 per owner: 409 past it)" },
          // 503: a payTo other than the owner's wallet is looked up on the chain (is it a wallet?).
          response: { 400: ErrorBody, 409: ErrorBody, 422: ErrorBody, 429: ErrorBody, 503: ErrorBody },
        },
      )
      .patch("/products/:id", ({ request, params, body }) => updateProduct(deps, counted(request, "write"), params.id, body), {
        params: t.Object({ id: t.String({ maxLength: 64 }) }),
        transform: knownFieldsOnly(PRODUCT_KEYS),
        parse: "text",
        body: t.Partial(Product),
        detail: { summary: "Edit a product (not its type); the fields given are applied to the product as it is when written" },
        // 409: the product kept changing under this edit (ten tries); 503: a new payTo is looked up on the chain.
        response: { 400: ErrorBody, 404: ErrorBody, 409: ErrorBody, 422: ErrorBody, 429: ErrorBody, 503: ErrorBody },
      })
      .post("/products/:id/archive", ({ request, params }) => archiveProduct(deps, counted(request, "write"), params.id), {
        parse: "none", // no body: none is read, so the caller is checked first whatever is sent
        params: t.Object({ id: t.String({ maxLength: 64 }) }),
        detail: { summary: "Archive a product: no new purchases, existing access stays" },
        response: { 404: ErrorBody, 429: ErrorBody },
      })
      .get("/keys", async ({ request }) => ({ keys: await listApiKeys(deps, ownerOf(request).walletAddress) }), {
        detail: { summary: "The owner's API keys (never the keys themselves)" },
      })
      .post(
        "/keys",
        async ({ request, body, set }) => {
          set.status = 201;
          return createApiKey(deps, counted(request, "write"), body.label);
        },
        {
          transform: knownFieldsOnly(["label"]),
          parse: "text",
          body: t.Object({ label: t.String({ maxLength: 100 }) }),
          detail: { summary: "Create an API key: the key appears only in this answer (409 past 100 unrevoked or 1,000 in all)" },
          response: { 400: ErrorBody, 409: ErrorBody, 429: ErrorBody },
        },
      )
      .delete("/keys/:keyId", ({ request, params }) => revokeApiKey(deps, ownerOf(request).walletAddress, params.keyId), {
        parse: "none", // no body: none is read, so the caller is checked first whatever is sent
        params: t.Object({ keyId: t.String({ maxLength: 64 }) }),
        detail: { summary: "Revoke an API key: refused from the next request on" },
        response: { 404: ErrorBody },
      })
      .get("/webhooks", ({ request }) => listEndpoints(deps, ownerOf(request).walletAddress), { detail: { summary: "The owner's webhook endpoints" } })
      .post(
        "/webhooks",
        async ({ request, body, set }) => {
          set.status = 201;
          return createEndpoint(deps, counted(request, "write"), body);
        },
        {
          transform: knownFieldsOnly(["url", "events"]),
          parse: "text",
          body: t.Object({ url: t.String({ maxLength: 2048 }), events: t.Array(t.String({ maxLength: 40 }), { maxItems: 20 }) }),
          detail: { summary: "Add an endpoint: its whsec_ secret is in this answer (and can be revealed later); at most 20 (409 past it)" },
          response: { 400: ErrorBody, 409: ErrorBody, 429: ErrorBody },
        },
      )
      .patch("/webhooks/:id", ({ request, params, body }) => updateEndpoint(deps, ownerOf(request).walletAddress, params.id, body), {
        params: Id,
        transform: knownFieldsOnly(["url", "events", "enabled"]),
        parse: "text",
        body: t.Partial(t.Object({ url: t.String({ maxLength: 2048 }), events: t.Array(t.String({ maxLength: 40 }), { maxItems: 20 }), enabled: t.Boolean() })),
        detail: { summary: "Edit an endpoint: its URL, its events, or enable it again (a 410 from it disables it)" },
        response: { 400: ErrorBody, 404: ErrorBody },
      })
      .delete("/webhooks/:id", ({ request, params }) => deleteEndpoint(deps, ownerOf(request).walletAddress, params.id), {
        parse: "none", // no body: none is read, so the caller is checked first whatever is sent
        params: Id,
        detail: { summary: "Delete an endpoint: no more deliveries to it" },
        response: { 404: ErrorBody },
      })
      .post("/webhooks/:id/rotate-secret", ({ request, params }) => rotateEndpointSecret(deps, ownerOf(request).walletAddress, params.id), {
        parse: "none", // no body: none is read, so the caller is checked first whatever is sent
        params: Id,
        detail: {
          summary: "A new secret; the old one keeps signing alongside it for 24 hours",
          description: "Each replaced secret signs for 24 hours after its own rotation, at most four at once: a fifth rotation within a day is 429 until the oldest stops.",
        },
        response: { 404: ErrorBody, 429: ErrorBody },
      })
      .get("/webhooks/:id/secret", ({ request, params }) => revealEndpointSecret(deps, ownerOf(request).walletAddress, params.id), {
        params: Id,
        detail: { summary: "Reveal the endpoint's signing secret" },
        response: { 404: ErrorBody },
      })
      .post("/webhooks/:id/test", ({ request, params }) => sendTestEvent(deps, counted(request, "webhook"), params.id), {
        parse: "none", // no body: none is read, so the caller is checked first whatever is sent
        params: Id,
        detail: { summary: "Send a webhook.test event to this endpoint" },
        response: { 404: ErrorBody, 409: ErrorBody, 429: ErrorBody },
      })
      .get(
        "/webhooks/:id/deliveries",
        ({ request, params, query }) => listDeliveries(deps, ownerOf(request).walletAddress, params.id, { limit: query.limit, offset: query.offset }),
        {
          params: Id,
          query: t.Object({ limit: QueryInteger("limit", 1, 100, "1 to 100"), offset: QueryInteger("offset", 0) }),
          detail: { summary: "The endpoint's delivery log" },
          response: { 404: ErrorBody },
        },
      )
      .get("/deliveries/:id/attempts", ({ request, params }) => listDeliveryAttempts(deps, ownerOf(request).walletAddress, params.id), {
        params: Id,
        detail: { summary: "A delivery's attempts, oldest first: when, status code, duration, up to 1 KiB of the response or the error" },
        response: { 404: ErrorBody },
      })
      .post("/deliveries/:id/resend", ({ request, params }) => resendDelivery(deps, counted(request, "webhook"), params.id), {
        parse: "none", // no body: none is read, so the caller is checked first whatever is sent
        params: Id,
        detail: { summary: "Deliver the same event again (same webhook-id)" },
        response: { 404: ErrorBody, 409: ErrorBody, 429: ErrorBody },
      })
      .get("/tokens", ({ request, query }) => listFeatureTokens(deps, ownerOf(request).walletAddress, query), {
        query: TokenListQuery,
        detail: { summary: "The owner's feature access tokens, newest first (as /public/feature/tokens)" },
        response: { 400: ErrorBody, 404: ErrorBody },
      })
      .post("/tokens/revoke", ({ request, body, set }) => revokeAnswer(deps, ownerOf(request).walletAddress, body.accessToken, set), {
        transform: knownFieldsOnly(["accessToken"]),
        parse: "text",
        body: t.Object({ accessToken: AccessToken }), // as /public/feature/revoke: an unknown token of any length is 404
        detail: { summary: "Revoke a feature access token, permanently (as /public/feature/revoke)" },
        response: { 400: ErrorBody, 404: RevokeMissing },
      })
      .get("/purchases", ({ request, query }) => listPurchases(deps, ownerOf(request).walletAddress, query), {
        query: t.Object({
          productId: t.Optional(t.String({ maxLength: 64 })),
          limit: QueryInteger("limit", 1, 1000, "1 to 1000, default 100"),
          offset: QueryInteger("offset", 0),
        }),
        detail: { summary: "The owner's purchases, newest first; a productId that is not one of the owner's products is 404" },
        response: { 400: ErrorBody, 404: ErrorBody },
      })
      .get("/stats", ({ request, query }) => ownerStatsWithDaily(deps, ownerOf(request).walletAddress, query.days), {
        query: t.Object({ days: QueryInteger("days", 1, 365, "UTC days back, today included; default 30") }),
        detail: { summary: "The /public/stats numbers and revenue (USDC) and purchases per UTC day" },
        response: { 400: ErrorBody },
      })
  );
}
