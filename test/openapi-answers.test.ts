// /openapi.json against what the running server answers: every success answer of the public, checkout and
// dashboard routes, each got from a real request (a purchase on localnet included), fits the schema the
// document gives for it, with no field the document leaves out; and every operation documents a 2xx.
import { afterAll, expect, test } from "bun:test";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { Keypair } from "@solana/web3.js";
import { FormatRegistry } from "@sinclair/typebox";
import { ISO_MS } from "./helpers/time.ts";
import { Value } from "@sinclair/typebox/value";
import { ANSWERS } from "../src/docs/answers.ts";
import { newBuyer, signCheckout } from "./helpers/checkout.ts";
import { runCli, startTestServer, type TestServer } from "./helpers/server.ts";
import { call, newWallet, signIn, type Json } from "./helpers/wallet.ts";

// spec/README.md: times are ISO 8601 UTC with milliseconds.
if (!FormatRegistry.Has("date-time")) FormatRegistry.Set("date-time", (v) => ISO_MS.test(v));

let server: TestServer | null = null;
afterAll(async () => server?.dispose());

type Schema = { properties?: Record<string, Schema>; anyOf?: Schema[]; items?: Schema; additionalProperties?: unknown };

/** Fields of `value` that `schema` (a JSON Schema from the document) does not name, as paths. */
function undocumented(schema: Schema, value: unknown, path = "$"): string[] {
  if (Array.isArray(value)) return schema.items === undefined ? [] : value.flatMap((v, i) => undocumented(schema.items!, v, `${path}[${i}]`));
  if (value === null || typeof value !== "object") return [];
  if (schema.anyOf !== undefined) {
    // The branch that names every field, if one does.
    const fits = schema.anyOf.map((branch) => undocumented(branch, value, path));
    return fits.find((f) => f.length === 0) ?? fits[0]!;
  }
  if (schema.properties === undefined) return schema.additionalProperties === undefined ? [] : [`${path} (no properties documented)`];
  return Object.entries(value).flatMap(([key, v]) => (schema.properties![key] === undefined ? [`${path}.${key}`] : undocumented(schema.properties![key]!, v, `${path}.${key}`)));
}

test("every success answer fits its documented schema and names no field the document leaves out", async () => {
  server = await startTestServer({ AUTH_RATE_LIMIT: "off", ALLOW_PRIVATE_NETWORK_TARGETS: "true" });
  const url = server.url;
  const answers: Record<string, { status: number; body: unknown }> = {};
  const seen = async <T extends { status: number; body: any }>(route: string, response: Promise<T>): Promise<T> => {
    const r = await response;
    expect([route, r.status]).toEqual([route, ANSWERS[route]?.status ?? 200]);
    answers[route] ??= { status: r.status, body: r.body };
    return r;
  };

  const owner = newWallet();
  const token = (await signIn(url, owner)).sessionToken;
  const dash = (path: string, init: { method?: string; body?: unknown } = {}) => call(url, `/dashboard/api${path}`, { ...init, token });
  await seen("GET /healthz", call(url, "/healthz"));
  await seen("GET /readyz", call(url, "/readyz"));
  await seen("GET /dashboard/api/me", dash("/me"));
  const product = (await seen("POST /dashboard/api/products", dash("/products", { body: { title: "Pro", description: "", type: "feature_unlock", price: "1", featureIds: ["a"], accessDays: 30 } }))).body;
  const pid = product.productId as string;
  await seen("GET /dashboard/api/products", dash("/products"));
  await seen("GET /dashboard/api/products/:id", dash(`/products/${pid}`));
  await seen("PATCH /dashboard/api/products/:id", dash(`/products/${pid}`, { method: "PATCH", body: { title: "Pro 2" } }));
  const key = (await seen("POST /dashboard/api/keys", dash("/keys", { body: { label: "server" } }))).body;
  await seen("GET /dashboard/api/keys", dash("/keys"));
  const pub = (path: string, init: { method?: string; body?: unknown } = {}) => call(url, `/public${path}`, { ...init, headers: { "x-api-key": key.key } });

  const hook = Bun.serve({ port: 0, hostname: "127.0.0.1", fetch: () => new Response("ok") });
  try {
    const endpoint = (await seen("POST /dashboard/api/webhooks", dash("/webhooks", { body: { url: `http://127.0.0.1:${hook.port}/h`, events: ["product.created"] } }))).body;
    const wid = endpoint.endpointId as string;
    await seen("GET /dashboard/api/webhooks", dash("/webhooks"));
    await seen("PATCH /dashboard/api/webhooks/:id", dash(`/webhooks/${wid}`, { method: "PATCH", body: { events: ["product.created", "payment.completed"] } }));
    await seen("GET /dashboard/api/webhooks/:id/secret", dash(`/webhooks/${wid}/secret`));
    await seen("POST /dashboard/api/webhooks/:id/rotate-secret", dash(`/webhooks/${wid}/rotate-secret`, { method: "POST" }));
    const testEvent = (await seen("POST /dashboard/api/webhooks/:id/test", dash(`/webhooks/${wid}/test`, { method: "POST" }))).body;
    const attempts = `/deliveries/${testEvent.deliveryId}/attempts`;
    for (let i = 0; i < 100 && ((await dash(attempts)).body.attempts as unknown[]).length === 0; i++) await Bun.sleep(50);
    await seen("GET /dashboard/api/deliveries/:id/attempts", dash(attempts));
    await seen("GET /dashboard/api/webhooks/:id/deliveries", dash(`/webhooks/${wid}/deliveries`));
    await seen("POST /dashboard/api/deliveries/:id/resend", dash(`/deliveries/${testEvent.deliveryId}/resend`, { method: "POST" }));

    // A purchase through the checkout page's API, signed outside the server.
    const buyer = newBuyer();
    expect((await runCli(["ledger", "airdrop", "--to", buyer.wallet.address, "--sol", "1", "--usdc", "5"], { DATA_DIR: server.dataDir })).code).toBe(0);
    await seen("GET /pay/:productId/product", call(url, `/pay/${pid}/product`));
    const opened = (await seen("POST /pay/:productId/checkout", call(url, `/pay/${pid}/checkout`, { body: { walletAddress: buyer.wallet.address } }))).body;
    await seen("POST /pay/:productId/confirm", call(url, `/pay/${pid}/confirm`, { body: { checkoutId: opened.checkoutId } }));
    const done = (
      await seen("POST /pay/:productId/submit", call(url, `/pay/${pid}/submit`, { body: { checkoutId: opened.checkoutId, transaction: signCheckout(opened.transaction, buyer.keypair) } }))
    ).body;
    expect(done.status).toBe("completed");
    await seen("POST /public/access/check", pub("/access/check", { body: { productId: pid, walletAddress: buyer.wallet.address } }));
    await seen("GET /public/products", pub("/products"));
    await seen("GET /public/products/:id", pub(`/products/${pid}`));
    await seen("GET /public/stats", pub("/stats"));
    await seen("GET /public/verify/:txHash", pub(`/verify/${done.txHash}`));
    await seen("POST /public/feature/verify", pub("/feature/verify", { body: { accessToken: done.accessToken } }));
    await seen("GET /public/feature/tokens", pub("/feature/tokens"));
    await seen("GET /dashboard/api/tokens", dash("/tokens"));
    await seen("GET /dashboard/api/purchases", dash("/purchases"));
    await seen("GET /dashboard/api/stats", dash("/stats?days=2"));
    await seen("POST /public/feature/revoke", pub("/feature/revoke", { body: { accessToken: done.accessToken } }));
    await seen("POST /dashboard/api/tokens/revoke", dash("/tokens/revoke", { body: { accessToken: done.accessToken } }));
    await seen("POST /dashboard/api/products/:id/archive", dash(`/products/${pid}/archive`, { method: "POST" }));
    await seen("DELETE /dashboard/api/keys/:keyId", dash(`/keys/${key.keyId}`, { method: "DELETE" }));
    await seen("DELETE /dashboard/api/webhooks/:id", dash(`/webhooks/${wid}`, { method: "DELETE" }));
  } finally {
    await hook.stop(true);
  }
  await seen("POST /dashboard/api/session", call(url, "/dashboard/api/session", { body: { sessionToken: token }, headers: { origin: url } }));
  await seen("DELETE /dashboard/api/session", call(url, "/dashboard/api/session", { method: "DELETE", token }));
  const keypairFile = join(server.dataDir, "operator.json");
  writeFileSync(keypairFile, JSON.stringify(Array.from(Keypair.generate().secretKey)), { mode: 0o600 });
  const link = await runCli(["dashboard-link", "--keypair", keypairFile, "--json"], { DATA_DIR: server.dataDir, BASE_URL: url });
  const code = decodeURIComponent(/#link=(.+)$/.exec((JSON.parse(link.stdout) as Json).url)![1]!);
  await seen("POST /dashboard/api/session/link", call(url, "/dashboard/api/session/link", { body: { code }, headers: { origin: url } }));

  expect(Object.keys(ANSWERS).filter((route) => answers[route] === undefined)).toEqual([]); // every documented answer was seen
  const spec = (await call(url, "/openapi.json")).body as { paths: Record<string, Record<string, { responses?: Record<string, { content?: Record<string, { schema: Schema }> }> }>> };
  for (const [route, { status, body }] of Object.entries(answers)) {
    const [method, path] = route.split(" ") as [string, string];
    const documented = spec.paths[path.replace(/:([^/]+)/g, "{$1}")]?.[method.toLowerCase()]?.responses?.[String(status)]?.content?.["application/json"]?.schema;
    expect([route, documented !== undefined]).toEqual([route, true]);
    expect([route, [...Value.Errors(ANSWERS[route]!.schema, body)].map((e) => `${e.path}: ${e.message}`)]).toEqual([route, []]);
    expect([route, undocumented(documented!, body)]).toEqual([route, []]);
  }
  // Every operation says what it answers on success (/mcp speaks MCP; /metrics is Prometheus text).
  const silent = Object.entries(spec.paths).flatMap(([path, operations]) =>
    path === "/mcp" || path === "/metrics" ? [] : Object.entries(operations).filter(([, op]) => !Object.keys(op.responses ?? {}).some((s) => s.startsWith("2"))).map(([m]) => `${m} ${path}`),
  );
  expect(silent).toEqual([]);
}, 60_000);
