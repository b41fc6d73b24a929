// The success answers of the routes, for /openapi.json: routes declare only their error statuses (a
// response schema on a route would also make Elysia check every answer against it, on the hot paths too),
// so the document gets its 2xx entries from here (docs/complete.ts). test/openapi-answers.test.ts checks
// every one against what the running server answers.
import { Type as t, type TSchema } from "@sinclair/typebox";

const Iso = t.String({ format: "date-time" });
const Address = t.String({ description: "base58 Solana address" });
const Decimal = t.String({ description: 'a decimal amount in whole tokens, e.g. "9.99"' });
const Currency = t.String({ description: 'USDC or the service token\'s symbol, e.g. "WGT"' });
const Optional = <S extends TSchema>(schema: S) => t.Optional(schema);

const Product = t.Object({
  productId: t.String(),
  title: t.String(),
  description: t.String(),
  type: t.Union([t.Literal("feature_unlock"), t.Literal("access")]),
  price: Decimal,
  currency: Currency,
  network: t.String(),
  featureIds: t.Array(t.String()),
  payTo: Address,
  accessDays: t.Union([t.Integer(), t.Null()]),
  redirectOrigins: t.Array(t.String()),
  status: t.Union([t.Literal("active"), t.Literal("archived")]),
  paymentUrl: t.String(),
  createdAt: Iso,
  updatedAt: Iso,
});

/** An owner's product list: paygate.md's `{ products }`, with `total` and `hasMore` when a page is cut at ~1 MB. */
const ProductPage = t.Object({
  products: t.Array(Product),
  total: t.Optional(t.Integer({ minimum: 0, description: "only on a page cut short: how many products the owner has" })),
  hasMore: t.Optional(t.Literal(true, { description: "only on a page cut short: ask again with ?offset= the products seen so far" })),
});

/** What the checkout page reads of a product: no owner's wallet, no feature ids, no link to itself, no times. */
const PayProduct = t.Pick(Product, ["productId", "title", "description", "type", "price", "currency", "network", "accessDays", "redirectOrigins", "status"]);

const Stats = t.Object({
  totalRevenue: t.Number({ description: "USDC, in whole USDC" }),
  totalTransactions: t.Integer(),
  productCount: t.Integer(),
  revenueByCurrency: t.Record(t.String(), Decimal),
});

const TokenStatus = t.Union([t.Literal("active"), t.Literal("revoked"), t.Literal("expired")]);
const Token = t.Object({
  accessToken: t.String(),
  productId: t.String(),
  productTitle: t.String(),
  features: t.Array(t.String()),
  walletAddress: Address,
  txHash: t.String(),
  status: TokenStatus,
  createdAt: Iso,
  revokedAt: Optional(Iso),
  expiresAt: Optional(Iso),
});
const TokenPage = t.Object({ tokens: t.Array(Token), total: t.Integer(), limit: t.Integer(), offset: t.Integer() });

const Revoked = t.Object({ success: t.Literal(true), message: t.String({ description: '"Token revoked", or "Token was already revoked"' }) });

const ApiKey = t.Object({ keyId: t.String(), label: t.String(), prefix: t.String(), createdAt: Iso, lastUsedAt: t.Union([Iso, t.Null()]), revokedAt: t.Union([Iso, t.Null()]) });
const NewApiKey = t.Object({ keyId: t.String(), key: t.String({ description: "pk_ + 64 hex: shown only in this answer" }), label: t.String(), prefix: t.String(), createdAt: Iso });

const Endpoint = t.Object({ endpointId: t.String(), url: t.String(), events: t.Array(t.String()), enabled: t.Boolean(), createdAt: Iso });
const NewEndpoint = t.Object({ ...Endpoint.properties, secret: t.String({ description: "whsec_…" }) });
const Secret = t.Object({ secret: t.String({ description: "whsec_…" }) });
const DeliveryId = t.Object({ deliveryId: t.String() });
const Delivery = t.Object({
  deliveryId: t.String(),
  eventId: t.String(),
  type: t.String(),
  status: t.Union([t.Literal("pending"), t.Literal("succeeded"), t.Literal("failed")]),
  attempts: t.Integer(),
  lastStatusCode: t.Union([t.Integer(), t.Null()]),
  nextAttemptAt: t.Union([Iso, t.Null()]),
  createdAt: Iso,
});
const Attempt = t.Object({
  attempt: t.Integer(),
  at: Iso,
  statusCode: t.Union([t.Integer(), t.Null()]),
  durationMs: t.Integer(),
  response: t.Union([t.String(), t.Null()], { description: "up to 1 KiB of the answer" }),
  error: t.Union([t.String(), t.Null()]),
});

const Purchase = t.Object({
  purchaseId: t.String(),
  productId: t.String(),
  productTitle: t.String(),
  walletAddress: Address,
  txHash: t.String(),
  amount: Decimal,
  currency: Currency,
  network: t.String(),
  purchasedAt: Iso,
  expiresAt: Optional(Iso),
});

/** Named when the answer is another checkout's of the wallet and product: the one to confirm from then on. */
const OtherCheckout = Optional(t.String({ description: "another checkout of this wallet and product, which the answer is about: confirm that one from then on" }));
const Completed = t.Object({
  status: t.Literal("completed"),
  txHash: t.String(),
  purchaseId: t.String(),
  accessToken: Optional(t.String({ description: "feature unlocks: the ft_ token" })),
  checkoutId: OtherCheckout,
});
const Confirmation = t.Union([t.Object({ status: t.Literal("pending"), checkoutId: OtherCheckout }), Completed]);

const Limits = t.Object({ minute: t.Integer(), day: t.Integer() });
const Session = t.Object({ walletAddress: Address, expiresAt: Iso });

/** Success answers by `METHOD /path` as Elysia names routes (`:id`). */
export const ANSWERS: Readonly<Record<string, { status: 200 | 201; schema: TSchema }>> = {
  "GET /healthz": { status: 200, schema: t.Object({ status: t.Literal("ok") }) },
  "GET /readyz": {
    status: 200,
    schema: t.Object({ status: t.Literal("ready"), checks: t.Object({ database: t.Literal("ok"), ledger: t.Literal("ok") }) }, { description: "503 with status \"unavailable\" and the failing check \"error\"" }),
  },

  "GET /public/products": { status: 200, schema: ProductPage },
  "GET /public/products/:id": { status: 200, schema: Product },
  "GET /public/stats": { status: 200, schema: Stats },
  "POST /public/access/check": {
    status: 200,
    schema: t.Union([
      t.Object({ hasAccess: t.Literal(true), txHash: t.String(), purchasedAt: Iso, expiresAt: Optional(Iso) }),
      t.Object({ hasAccess: t.Literal(false), paymentUrl: t.String() }),
    ]),
  },
  "GET /public/verify/:txHash": {
    status: 200,
    schema: t.Union([
      t.Object({
        valid: t.Literal(true),
        txHash: t.String(),
        productId: t.String(),
        productTitle: t.String(),
        walletAddress: Address,
        amount: Decimal,
        currency: Currency,
        network: t.String(),
        purchasedAt: Iso,
        expiresAt: Optional(Iso),
      }),
      t.Object({ valid: t.Literal(false), txHash: t.String(), error: t.String() }),
    ]),
  },
  "POST /public/feature/verify": {
    status: 200,
    schema: t.Union([
      t.Object({
        valid: t.Literal(true),
        features: t.Array(t.String()),
        productId: t.String(),
        productTitle: t.String(),
        walletAddress: Address,
        createdAt: Iso,
        expiresAt: Optional(Iso),
      }),
      t.Object({ valid: t.Literal(false), error: t.String() }),
    ]),
  },
  "GET /public/feature/tokens": { status: 200, schema: TokenPage },
  "POST /public/feature/revoke": { status: 200, schema: Revoked },

  "GET /pay/:productId/product": { status: 200, schema: PayProduct },
  "POST /pay/:productId/checkout": {
    status: 200,
    schema: t.Object({
      checkoutId: t.String(),
      reference: Address,
      transaction: t.String({ description: "base64 of the unsigned transaction for the buyer's wallet to sign" }),
      amount: Decimal,
      currency: Currency,
      payTo: Address,
      expiresAt: Iso,
    }),
  },
  "POST /pay/:productId/submit": { status: 200, schema: Confirmation },
  "POST /pay/:productId/confirm": { status: 200, schema: Confirmation },

  "POST /dashboard/api/session": { status: 200, schema: Session },
  "DELETE /dashboard/api/session": { status: 200, schema: t.Object({ signedOut: t.Literal(true) }) },
  "POST /dashboard/api/session/link": { status: 200, schema: Session },
  "GET /dashboard/api/me": {
    status: 200,
    schema: t.Object({
      walletAddress: Address,
      tier: t.Union([t.Literal("free"), t.Literal("pro"), t.Literal("unlimited")]),
      usage: t.Object({ minute: t.Integer(), day: t.Integer(), limits: t.Union([Limits, t.Null()], { description: "null: unlimited" }) }),
    }),
  },
  "GET /dashboard/api/products": { status: 200, schema: ProductPage },
  "POST /dashboard/api/products": { status: 201, schema: Product },
  "GET /dashboard/api/products/:id": { status: 200, schema: Product },
  "PATCH /dashboard/api/products/:id": { status: 200, schema: Product },
  "POST /dashboard/api/products/:id/archive": { status: 200, schema: Product },
  "GET /dashboard/api/keys": { status: 200, schema: t.Object({ keys: t.Array(ApiKey) }) },
  "POST /dashboard/api/keys": { status: 201, schema: NewApiKey },
  "DELETE /dashboard/api/keys/:keyId": { status: 200, schema: t.Object({ revoked: t.Literal(true) }) },
  "GET /dashboard/api/webhooks": { status: 200, schema: t.Object({ endpoints: t.Array(Endpoint) }) },
  "POST /dashboard/api/webhooks": { status: 201, schema: NewEndpoint },
  "PATCH /dashboard/api/webhooks/:id": { status: 200, schema: Endpoint },
  "DELETE /dashboard/api/webhooks/:id": { status: 200, schema: t.Object({ deleted: t.Literal(true) }) },
  "POST /dashboard/api/webhooks/:id/rotate-secret": { status: 200, schema: Secret },
  "GET /dashboard/api/webhooks/:id/secret": { status: 200, schema: Secret },
  "POST /dashboard/api/webhooks/:id/test": { status: 200, schema: DeliveryId },
  "GET /dashboard/api/webhooks/:id/deliveries": { status: 200, schema: t.Object({ deliveries: t.Array(Delivery), total: t.Integer() }) },
  "GET /dashboard/api/deliveries/:id/attempts": { status: 200, schema: t.Object({ attempts: t.Array(Attempt) }) },
  "POST /dashboard/api/deliveries/:id/resend": { status: 200, schema: DeliveryId },
  "GET /dashboard/api/tokens": { status: 200, schema: TokenPage },
  "POST /dashboard/api/tokens/revoke": { status: 200, schema: Revoked },
  "GET /dashboard/api/purchases": { status: 200, schema: t.Object({ purchases: t.Array(Purchase), total: t.Integer() }) },
  "GET /dashboard/api/stats": {
    status: 200,
    schema: t.Object({ ...Stats.properties, daily: t.Array(t.Object({ date: t.String({ description: "UTC day, YYYY-MM-DD" }), revenue: Decimal, transactions: t.Integer() })) }),
  },
};
