// The error mapping in-process (app.handle): unexpected failures are a bare 500 with a logged request id.
import { expect, test } from "bun:test";
import { createApp } from "./app.ts";
import { createLogger } from "./log.ts";
import { createMcpEndpoint } from "./mcp/endpoint.ts";
import { createApiKey } from "./paygate/keys.ts";
import { testDeps } from "../test/helpers/deps.ts";
import { newWallet } from "../test/helpers/wallet.ts";

test("an unexpected failure is 500 INTERNAL_ERROR with no SQL or stack, logged with the request id", async () => {
  const { deps: base } = await testDeps();
  const lines: string[] = [];
  const deps = { ...base, log: createLogger("info", "json", (l) => lines.push(l)) } as typeof base;
  const app = createApp(deps, { metaOf: () => ({ requestId: "req-test-1", ip: "192.0.2.1", userAgent: "t" }), mcp: createMcpEndpoint(deps) });
  deps.db.sqlite.run("DROP TABLE auth_challenges"); // the next query fails inside SQLite
  const res = await app.handle(new Request(`http://local/auth/challenge?wallet=${newWallet().address}`));
  expect(res.status).toBe(500);
  const text = await res.text();
  expect(JSON.parse(text)).toEqual({ error: "internal error", code: "INTERNAL_ERROR" });
  expect(text).not.toMatch(/sqlite|auth_challenges|at |\.ts/i);
  const logged = lines.map((l) => JSON.parse(l)).find((l) => l.msg === "unhandled error");
  expect(logged.requestId).toBe("req-test-1");
});

test("a 500 from /public/* still carries the X-RateLimit-* headers of the key's owner", async () => {
  const { deps } = await testDeps();
  const app = createApp(deps, { metaOf: () => ({ requestId: "req-test-3", ip: "192.0.2.1", userAgent: "t" }), mcp: createMcpEndpoint(deps) });
  const { key } = await createApiKey(deps, newWallet().address, "server");
  deps.db.sqlite.run("DROP TABLE products"); // the listing fails inside SQLite, after the key and the limit
  const res = await app.handle(new Request("http://localhost/public/products", { headers: { "x-api-key": key } }));
  expect(res.status).toBe(500);
  expect(await res.json()).toEqual({ error: "internal error", code: "INTERNAL_ERROR" });
  expect([res.headers.get("x-ratelimit-limit"), res.headers.get("x-ratelimit-remaining")]).toEqual(["60", "59"]);
  expect(Number(res.headers.get("x-ratelimit-reset"))).toBeGreaterThan(0);
});

test("route groups built on first use: concurrent first requests share one build and get the same answers", async () => {
  const { deps } = await testDeps();
  const app = createApp(deps, { metaOf: () => ({ requestId: "req-test-2", ip: "192.0.2.1", userAgent: "t" }), mcp: createMcpEndpoint(deps) });
  const answers = await Promise.all(
    ["/public/access/check", "/public/access/check", "/dashboard/api/me", "/pay/none/checkout"].map((path) =>
      app.handle(new Request(`http://localhost${path}`, { method: path.startsWith("/dashboard") ? "GET" : "POST" })),
    ),
  );
  const bodies = (await Promise.all(answers.map((r) => r.json()))) as { code: string }[];
  expect(answers.map((r) => r.status)).toEqual([401, 401, 401, 400]);
  expect(bodies[0]).toEqual(bodies[1]);
  expect(bodies.map((b) => b.code)).toEqual(["MISSING_API_KEY", "MISSING_API_KEY", "UNAUTHENTICATED", "VALIDATION_ERROR"]);
  // An unknown path under a lazy prefix is the same 404 as anywhere else (under /public/ only after the
  // key check: every /public/* request needs its key, paygate.md).
  const missing = await app.handle(new Request("http://localhost/pay/none/nowhere/else"));
  expect([missing.status, await missing.json()]).toEqual([404, { error: "no such route", code: "NOT_FOUND" }]);
  const keyless = await app.handle(new Request("http://localhost/public/nowhere"));
  expect([keyless.status, await keyless.json()]).toEqual([401, { error: "API key required", code: "MISSING_API_KEY" }]);
});

test("a short Host (a proxy's upstream name, `proxy_pass http://app`) reaches every route group", async () => {
  const { deps } = await testDeps();
  const app = createApp(deps, { metaOf: () => ({ requestId: "req-test-4", ip: "192.0.2.1", userAgent: "t" }), mcp: createMcpEndpoint(deps) });
  const { key } = await createApiKey(deps, newWallet().address, "server");
  for (const host of ["a", "app", "a:1", "web:80", "[::1]"]) {
    const get = (path: string, headers: Record<string, string> = {}) => app.handle(new Request(`http://${host}${path}`, { headers }));
    expect((await get("/healthz")).status).toBe(200);
    expect((await get(`/auth/challenge?wallet=${newWallet().address}`)).status).toBe(200);
    expect((await get("/openapi.json")).status).toBe(200);
    expect((await get("/public/products", { "x-api-key": key })).status).toBe(200);
    expect(await (await get("/dashboard/api/me")).json()).toMatchObject({ code: "UNAUTHENTICATED" });
    expect(await (await get("/pay/prod_none/product")).json()).toMatchObject({ code: "NOT_FOUND", error: "no such product" });
  }
});
