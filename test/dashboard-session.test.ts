// The pages' session over HTTP against the real server: the cookie's attributes, the Origin rule for
// cookie-carried changes (Bearer needs none), sign-out revoking the token, one-time links of
// `walletgate dashboard-link` redeemed once, and what the checkout page may read without a key.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { Keypair } from "@solana/web3.js";
import { logged, runCli, startTestServer, type TestServer } from "./helpers/server.ts";
import { call, decodeJwt, newWallet, signIn, type Json } from "./helpers/wallet.ts";

let server: TestServer;
beforeAll(async () => {
  server = await startTestServer({ AUTH_RATE_LIMIT: "off" });
});
afterAll(async () => {
  await server.dispose();
});

async function raw(path: string, init: { method?: string; headers?: Record<string, string>; body?: unknown } = {}) {
  const res = await fetch(server.url + path, {
    method: init.method ?? (init.body === undefined ? "GET" : "POST"),
    headers: { ...(init.body === undefined ? {} : { "content-type": "application/json" }), ...init.headers },
    body: init.body === undefined ? undefined : JSON.stringify(init.body),
  });
  const text = await res.text();
  return { status: res.status, body: (text ? JSON.parse(text) : null) as Json, cookie: res.headers.get("set-cookie") };
}

const origin = () => new URL(server.url).origin;

/** Signs a wallet in and trades its token for the cookie, as the page does. */
async function cookieSession() {
  const token = (await signIn(server.url, newWallet())).sessionToken as string;
  const set = await raw("/dashboard/api/session", { body: { sessionToken: token }, headers: { origin: origin() } });
  expect(set.status).toBe(200);
  return { token, cookie: set.cookie!.split(";")[0]!, setCookie: set.cookie! };
}

describe("the dashboard session cookie", () => {
  test("POST /dashboard/api/session sets an HttpOnly, SameSite=Strict cookie for the token's lifetime", async () => {
    const { token, setCookie } = await cookieSession();
    expect(setCookie).toStartWith(`wg_session=${token}; Path=/; HttpOnly; SameSite=Strict; Max-Age=`);
    expect(Number(/Max-Age=(\d+)/.exec(setCookie)![1])).toBeGreaterThan(604_000);
    expect(setCookie).not.toContain("Secure"); // BASE_URL is http here; under https the cookie is Secure
  });

  test("under https the cookie is __Host- and Secure; a second session cookie (planted by a neighbour) is refused", async () => {
    const https = await startTestServer({ AUTH_RATE_LIMIT: "off", BASE_URL: "https://wallet.example" });
    try {
      const token = (await signIn(https.url, newWallet())).sessionToken as string;
      const post = (headers: Record<string, string>) =>
        fetch(`${https.url}/dashboard/api/session`, { method: "POST", headers: { "content-type": "application/json", ...headers }, body: JSON.stringify({ sessionToken: token }) });
      const set = (await post({ origin: "https://wallet.example" })).headers.get("set-cookie")!;
      expect(set).toStartWith(`__Host-wg_session=${token}; Path=/; HttpOnly; SameSite=Strict; Max-Age=`);
      expect(set).toEndWith("; Secure");
      const me = (cookie: string) => fetch(`${https.url}/dashboard/api/me`, { headers: { cookie } });
      expect((await me(`__Host-wg_session=${token}`)).status).toBe(200);
      expect((await me(`wg_session=${token}`)).status).toBe(401); // the unprefixed name is not read under https
      const planted = await me(`__Host-wg_session=planted; __Host-wg_session=${token}`);
      expect([planted.status, ((await planted.json()) as Json).code]).toEqual([401, "UNAUTHENTICATED"]);
      const out = await fetch(`${https.url}/dashboard/api/session`, { method: "DELETE", headers: { cookie: `__Host-wg_session=x; __Host-wg_session=${token}`, origin: "https://wallet.example" } });
      expect([out.status, out.headers.get("set-cookie")]).toEqual([200, "__Host-wg_session=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0; Secure"]);
      // Signing out revoked our token too, whichever of the two cookies it was.
      const after = await me(`__Host-wg_session=${token}`);
      expect([after.status, ((await after.json()) as Json).code]).toEqual([401, "TOKEN_REVOKED"]);
    } finally {
      await https.dispose();
    }
    // However the scheme is written: URL schemes and hosts are case-insensitive.
    const shouted = await startTestServer({ AUTH_RATE_LIMIT: "off", BASE_URL: "HTTPS://Wallet.Example" });
    try {
      const token = (await signIn(shouted.url, newWallet())).sessionToken as string;
      const answer = await fetch(`${shouted.url}/dashboard/api/session`, {
        method: "POST",
        headers: { "content-type": "application/json", origin: "https://wallet.example" },
        body: JSON.stringify({ sessionToken: token }),
      });
      const set = answer.headers.get("set-cookie")!;
      expect([answer.status, set.startsWith(`__Host-wg_session=${token}; `), set.endsWith("; Secure")]).toEqual([200, true, true]);
    } finally {
      await shouted.dispose();
    }
    // Over http too, two cookies of the name are refused rather than the first one used.
    const { cookie } = await cookieSession();
    const two = await raw("/dashboard/api/me", { headers: { cookie: `wg_session=planted; ${cookie}` } });
    expect([two.status, two.body.code]).toEqual([401, "UNAUTHENTICATED"]);
    expect(two.body.details).toEqual({ reason: "two_session_cookies" }); // the page shows this one's words, not "signed out"
  });

  test("setting the cookie needs this server's Origin and a valid token", async () => {
    const token = (await signIn(server.url, newWallet())).sessionToken;
    expect((await raw("/dashboard/api/session", { body: { sessionToken: token } })).body.code).toBe("FORBIDDEN");
    // The Origin before the body: another site hears 403 whatever it sent (the link's redemption too).
    for (const path of ["/dashboard/api/session", "/dashboard/api/session/link"]) {
      for (const headers of [{}, { origin: "https://evil.example" }] as Record<string, string>[]) {
        const r = await fetch(server.url + path, { method: "POST", headers: { "content-type": "application/json", ...headers }, body: "{bad" });
        expect({ path, status: r.status, code: ((await r.json()) as Json).code }).toEqual({ path, status: 403, code: "FORBIDDEN" });
      }
      const broken = await fetch(server.url + path, { method: "POST", headers: { "content-type": "application/json", origin: origin() }, body: "{bad" });
      expect({ path, status: broken.status }).toEqual({ path, status: 400 });
    }
    const other = await raw("/dashboard/api/session", { body: { sessionToken: token }, headers: { origin: "https://evil.example" } });
    expect([other.status, other.body.code, other.cookie]).toEqual([403, "FORBIDDEN", null]);
    const bad = await raw("/dashboard/api/session", { body: { sessionToken: "not-a-token" }, headers: { origin: origin() } });
    expect([bad.status, bad.body.code]).toEqual([401, "TOKEN_INVALID"]);
  });

  test("reads with the cookie need no Origin; changes with it need the right one; Bearer needs none", async () => {
    const { token, cookie } = await cookieSession();
    expect((await raw("/dashboard/api/me", { headers: { cookie } })).status).toBe(200);
    const noOrigin = await raw("/dashboard/api/keys", { body: { label: "x" }, headers: { cookie } });
    expect([noOrigin.status, noOrigin.body.code]).toEqual([403, "FORBIDDEN"]);
    const cross = await raw("/dashboard/api/keys", { body: { label: "x" }, headers: { cookie, origin: "http://localhost:1" } });
    expect([cross.status, cross.body.code]).toEqual([403, "FORBIDDEN"]);
    expect((await raw("/dashboard/api/keys", { body: { label: "x" }, headers: { cookie, origin: origin() } })).status).toBe(201);
    expect((await raw("/dashboard/api/keys", { body: { label: "y" }, headers: { authorization: `Bearer ${token}` } })).status).toBe(201);
    // A request carrying another wallet's Bearer token beside the cookie acts as the Bearer's wallet, the one it names.
    const other = await cookieSession();
    const both = await raw("/dashboard/api/me", { headers: { cookie, authorization: `Bearer ${other.token}` } });
    expect([both.status, both.body.walletAddress]).toEqual([200, (await raw("/dashboard/api/me", { headers: { cookie: other.cookie } })).body.walletAddress]);
    expect(both.body.walletAddress).not.toBe((await raw("/dashboard/api/me", { headers: { cookie } })).body.walletAddress);
    const none = await raw("/dashboard/api/me");
    expect([none.status, none.body.code]).toEqual([401, "UNAUTHENTICATED"]);
    // Who is asking comes before what is asked: a broken body without a session is 401, with a cookie but
    // no Origin 403, and only for the owner 400 (a form is refused as before, a body of text by the schema).
    const broken = (headers: Record<string, string>, body = "{bad", type = "application/json") =>
      fetch(server.url + "/dashboard/api/keys", { method: "POST", headers: { "content-type": type, ...headers }, body }).then(async (r) => [r.status, ((await r.json()) as Json).code]);
    expect(await broken({})).toEqual([401, "UNAUTHENTICATED"]);
    expect(await broken({ cookie })).toEqual([403, "FORBIDDEN"]);
    expect(await broken({ cookie, origin: "http://localhost:1" })).toEqual([403, "FORBIDDEN"]);
    expect(await broken({ cookie, origin: origin() })).toEqual([400, "VALIDATION_ERROR"]);
    expect(await broken({ authorization: `Bearer ${token}` })).toEqual([400, "VALIDATION_ERROR"]);
    expect(await broken({ authorization: "Bearer not-a-token" })).toEqual([401, "TOKEN_INVALID"]);
    expect(await broken({ authorization: `Bearer ${token}` }, "label=x", "application/x-www-form-urlencoded")).toEqual([400, "VALIDATION_ERROR"]);
    expect(await broken({ authorization: `Bearer ${token}` }, '{"label":"x"}', "text/plain")).toEqual([400, "VALIDATION_ERROR"]);
    expect(await broken({}, "label=x", "application/x-www-form-urlencoded")).toEqual([401, "UNAUTHENTICATED"]);
  });

  test("a page names the wallet it shows: a request under another wallet's session is refused, and does nothing", async () => {
    const { token, cookie } = await cookieSession();
    const wallet = decodeJwt(token).payload.walletAddress as string;
    const other = newWallet().address;
    const keys = () => raw("/dashboard/api/keys", { headers: { authorization: `Bearer ${token}` } }).then((r) => (r.body.keys as Json[]).length);
    const before = await keys();
    for (const headers of [{ cookie, origin: origin() }, { authorization: `Bearer ${token}` }] as Record<string, string>[]) {
      const refused = await raw("/dashboard/api/keys", { body: { label: "meant for another" }, headers: { ...headers, "x-walletgate-wallet": other } });
      expect([refused.status, refused.body.code, refused.body.details]).toEqual([401, "UNAUTHENTICATED", { reason: "other_wallet" }]);
      expect(refused.body.error).toContain(`this browser is now signed in as ${wallet}`);
      const read = await raw("/dashboard/api/products", { headers: { ...headers, "x-walletgate-wallet": other } });
      expect([read.status, read.body.details]).toEqual([401, { reason: "other_wallet" }]);
    }
    expect(await keys()).toBe(before);
    expect((await raw("/dashboard/api/keys", { body: { label: "named" }, headers: { cookie, origin: origin(), "x-walletgate-wallet": wallet } })).status).toBe(201);
    expect(await keys()).toBe(before + 1);
    // Signing out from a page that shows another wallet: refused, and the session lives on.
    const signOut = await raw("/dashboard/api/session", { method: "DELETE", headers: { cookie, origin: origin(), "x-walletgate-wallet": other } });
    expect([signOut.status, signOut.body.details]).toEqual([401, { reason: "other_wallet" }]);
    expect((await raw("/dashboard/api/me", { headers: { cookie } })).status).toBe(200);
    expect((await raw("/dashboard/api/session", { method: "DELETE", headers: { cookie, origin: origin(), "x-walletgate-wallet": wallet } })).status).toBe(200);
    expect((await raw("/dashboard/api/me", { headers: { cookie } })).status).toBe(401);
  });

  test("every owner route that takes a body checks the caller first (each one the OpenAPI document lists)", async () => {
    const doc = (await (await fetch(server.url + "/openapi.json")).json()) as { paths: Record<string, Record<string, unknown>> };
    const routes = Object.entries(doc.paths)
      .filter(([path]) => path.startsWith("/dashboard/api/") && !path.startsWith("/dashboard/api/session"))
      .flatMap(([path, methods]) => Object.keys(methods).filter((m) => ["post", "patch", "put", "delete"].includes(m)).map((m) => [m.toUpperCase(), path.replace(/\{[^}]+\}/g, "x")] as const));
    expect(routes.length).toBeGreaterThanOrEqual(10);
    const { cookie } = await cookieSession();
    for (const [method, path] of routes) {
      const ask = async (headers: Record<string, string>) => {
        const r = await fetch(server.url + path, { method, headers: { "content-type": "application/json", ...headers }, body: "{bad" });
        return { route: `${method} ${path}`, status: r.status, code: ((await r.json()) as Json).code };
      };
      expect(await ask({})).toEqual({ route: `${method} ${path}`, status: 401, code: "UNAUTHENTICATED" });
      expect(await ask({ cookie })).toEqual({ route: `${method} ${path}`, status: 403, code: "FORBIDDEN" });
    }
  });

  test("owner answers, which carry keys, webhook secrets and tokens, are never kept by a cache: errors neither", async () => {
    const { token } = await cookieSession();
    const headers = { authorization: `Bearer ${token}` };
    for (const [path, init] of [["/dashboard/api/me", {}], ["/dashboard/api/keys", { method: "POST", body: '{"label":"k"}' }], ["/dashboard/api/tokens", {}]] as const) {
      const res = await fetch(server.url + path, { ...init, headers: { ...headers, "content-type": "application/json" } });
      expect([res.status, res.headers.get("cache-control")]).toEqual([path.endsWith("keys") ? 201 : 200, "no-store"]);
    }
    const refused = await fetch(server.url + "/dashboard/api/me");
    expect([refused.status, refused.headers.get("cache-control")]).toEqual([401, "no-store"]);
    const unparsed = await fetch(server.url + "/dashboard/api/keys", { method: "POST", headers: { ...headers, "content-type": "application/json" }, body: "{not json" });
    expect([unparsed.status, unparsed.headers.get("cache-control")]).toEqual([400, "no-store"]);
  });

  test("sign-out revokes the token and clears the cookie; the cookie then fails", async () => {
    const { token, cookie } = await cookieSession();
    expect((await raw("/dashboard/api/session", { method: "DELETE", headers: { cookie } })).body.code).toBe("FORBIDDEN");
    const out = await raw("/dashboard/api/session", { method: "DELETE", headers: { cookie, origin: origin() } });
    expect([out.status, out.body]).toEqual([200, { signedOut: true }]);
    expect(out.cookie).toContain("wg_session=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0");
    expect((await raw("/dashboard/api/me", { headers: { cookie } })).body.code).toBe("TOKEN_REVOKED");
    expect((await call(server.url, "/auth/session", { token })).body.code).toBe("TOKEN_REVOKED");
    // Signing out twice, or without a cookie, still answers and clears.
    expect((await raw("/dashboard/api/session", { method: "DELETE", headers: { cookie, origin: origin() } })).status).toBe(200);
    expect((await raw("/dashboard/api/session", { method: "DELETE" })).status).toBe(200);
    // A revoked token cannot set the cookie again.
    const again = await raw("/dashboard/api/session", { body: { sessionToken: token }, headers: { origin: origin() } });
    expect([again.status, again.body.code, again.cookie]).toEqual([401, "TOKEN_REVOKED", null]);
    // A script signs out with its Bearer token (no Origin needed): that token is revoked; a dead one is its code.
    const scripted = (await cookieSession()).token;
    const bearer = { authorization: `Bearer ${scripted}` };
    expect(await raw("/dashboard/api/session", { method: "DELETE", headers: bearer })).toMatchObject({ status: 200, body: { signedOut: true } });
    expect((await raw("/dashboard/api/me", { headers: bearer })).body.code).toBe("TOKEN_REVOKED");
    expect(await raw("/dashboard/api/session", { method: "DELETE", headers: bearer })).toMatchObject({ status: 401, body: { code: "TOKEN_REVOKED" } });
    const forged = { authorization: "Bearer not-a-token" };
    expect(await raw("/dashboard/api/session", { method: "DELETE", headers: forged })).toMatchObject({ status: 401, body: { code: "TOKEN_INVALID" } });
    // A Bearer token and a cookie of another session: both are revoked, and the cookie is cleared.
    const [viaHeader, viaCookie] = [(await cookieSession()).token, await cookieSession()];
    const both = await raw("/dashboard/api/session", { method: "DELETE", headers: { authorization: `Bearer ${viaHeader}`, cookie: viaCookie.cookie } });
    expect([both.status, both.body, both.cookie]).toEqual([200, { signedOut: true }, "wg_session=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0"]);
    expect((await raw("/dashboard/api/me", { headers: { cookie: viaCookie.cookie } })).body.code).toBe("TOKEN_REVOKED");
    expect((await raw("/dashboard/api/me", { headers: { authorization: `Bearer ${viaHeader}` } })).body.code).toBe("TOKEN_REVOKED");
  });

  test("an expired token is TOKEN_EXPIRED for the owner's routes and for setting the cookie", async () => {
    const short = await startTestServer({ AUTH_RATE_LIMIT: "off", SESSION_TTL_S: "3" });
    try {
      const token = (await signIn(short.url, newWallet())).sessionToken as string;
      expect((await call(short.url, "/dashboard/api/me", { token })).status).toBe(200); // at least 2 s left (iat is whole seconds)
      await Bun.sleep(decodeJwt(token).payload.exp * 1000 + 100 - Date.now()); // just past exp
      expect(await call(short.url, "/dashboard/api/me", { token })).toMatchObject({ status: 401, body: { code: "TOKEN_EXPIRED" } });
      const set = await fetch(`${short.url}/dashboard/api/session`, {
        method: "POST",
        headers: { "content-type": "application/json", origin: new URL(short.url).origin },
        body: JSON.stringify({ sessionToken: token }),
      });
      expect([set.status, ((await set.json()) as Json).code, set.headers.get("set-cookie")]).toEqual([401, "TOKEN_EXPIRED", null]);
    } finally {
      await short.dispose();
    }
  });
});

describe("one-time links of walletgate dashboard-link", () => {
  async function link(): Promise<{ code: string; wallet: string }> {
    const keypair = Keypair.generate();
    const file = join(server.dataDir, `kp-${keypair.publicKey.toBase58()}.json`);
    writeFileSync(file, JSON.stringify(Array.from(keypair.secretKey)), { mode: 0o600 });
    const r = await runCli(["dashboard-link", "--keypair", file, "--json"], { DATA_DIR: server.dataDir, BASE_URL: server.url });
    expect(r.code).toBe(0);
    const out = JSON.parse(r.stdout) as { url: string; walletAddress: string };
    expect(out.url).toStartWith(`${server.url}/dashboard#link=`);
    return { code: out.url.split("#link=")[1]!, wallet: out.walletAddress };
  }

  test("a link signs its wallet in once: cookie set, the second use refused", async () => {
    const { code, wallet } = await link();
    const first = await raw("/dashboard/api/session/link", { body: { code }, headers: { origin: origin() } });
    expect([first.status, first.body.walletAddress]).toEqual([200, wallet]);
    const cookie = first.cookie!.split(";")[0]!;
    expect((await raw("/dashboard/api/me", { headers: { cookie } })).body.walletAddress).toBe(wallet);
    const again = await raw("/dashboard/api/session/link", { body: { code }, headers: { origin: origin() } });
    expect([again.status, again.body.code, again.cookie]).toEqual([401, "NONCE_USED", null]);
  });

  test("a link needs the Origin; unknown and malformed codes are refused", async () => {
    const { code } = await link();
    expect((await raw("/dashboard/api/session/link", { body: { code } })).body.code).toBe("FORBIDDEN");
    const unknown = await raw("/dashboard/api/session/link", { body: { code: "1".repeat(32) }, headers: { origin: origin() } });
    expect([unknown.status, unknown.body.code]).toEqual([401, "NONCE_NOT_FOUND"]);
    const malformed = await raw("/dashboard/api/session/link", { body: { code: "not base58!" }, headers: { origin: origin() } });
    expect([malformed.status, malformed.body.code]).toEqual([400, "VALIDATION_ERROR"]);
    expect(malformed.body.details).toEqual({ fields: [{ field: "code", message: "a sign-in link code is base58 of 32 bytes" }] });
    // The refused attempts did not spend the real link.
    expect((await raw("/dashboard/api/session/link", { body: { code }, headers: { origin: origin() } })).status).toBe(200);
  });
});

describe("the checkout page's product read", () => {
  test("GET /pay/:productId/product: what a buyer sees, no owner secrets; 404 for unknown; archived says so", async () => {
    const owner = (await signIn(server.url, newWallet())).sessionToken;
    const created = await call(server.url, "/dashboard/api/products", {
      token: owner,
      body: { title: "Pass", description: "A month", type: "access", price: "3", accessDays: 30 },
    });
    expect(created.status).toBe(201);
    const id = created.body.productId;
    const read = await raw(`/pay/${id}/product`);
    expect(read.status).toBe(200);
    expect(read.body).toEqual({
      productId: id, title: "Pass", description: "A month", type: "access", price: "3", currency: "USDC",
      network: "localnet", accessDays: 30, redirectOrigins: [], status: "active",
    });
    expect((await raw("/pay/prod_nothing/product")).body.code).toBe("NOT_FOUND");
    await call(server.url, `/dashboard/api/products/${id}/archive`, { token: owner, body: {} });
    expect((await raw(`/pay/${id}/product`)).body.status).toBe("archived");
  });

  test("the pages are served with their security headers and a request id: HTML that loads its bundle", async () => {
    const ids: string[] = [];
    for (const path of ["/dashboard", "/pay/prod_x"]) {
      const res = await fetch(server.url + path);
      ids.push(res.headers.get("x-request-id") ?? "");
      expect(res.status).toBe(200);
      expect(res.headers.get("content-type")).toContain("text/html");
      expect(res.headers.get("content-security-policy")).toContain("frame-ancestors 'none'");
      expect(res.headers.get("content-security-policy")).toContain("script-src 'self'");
      expect(res.headers.get("x-frame-options")).toBe("DENY");
      expect(res.headers.get("x-content-type-options")).toBe("nosniff");
      expect(res.headers.get("x-request-id")).toMatch(/^[0-9a-f-]{36}$/);
      const html = await res.text();
      const script = /<script[^>]+src="([^"]+)"/.exec(html)![1]!;
      const js = await fetch(new URL(script, server.url));
      expect(js.status).toBe(200);
      expect(html).not.toMatch(/https?:\/\/(?!127\.0\.0\.1)/); // no CDN: nothing but this server
    }
    // Nor is a page served anywhere without those headers: Bun's own copy sits at a path random per process.
    for (const path of ["/_pages/dashboard", "/_pages/pay"]) expect((await fetch(server.url + path)).headers.get("content-type") ?? "").not.toContain("text/html");
    // The checkout API under /pay is not a page.
    const api = await fetch(`${server.url}/pay/prod_x/product`);
    expect([api.status, ((await api.json()) as Json).code]).toEqual([404, "NOT_FOUND"]);
    // One log line per page request, under the id its response carried.
    const lines = await logged(server, (ls) => ids.every((id) => ls.some((l) => l.requestId === id)));
    expect(ids.map((id) => lines.filter((l) => l.requestId === id).map((l) => [l.msg, l.path, l.status]))).toEqual([
      [["request", "/dashboard", 200]],
      [["request", "/pay/prod_x", 200]],
    ]);
  });

  test("the pages' bundled scripts and styles carry a request id, a log line and metrics, with their type and caching", async () => {
    const paths = new Set<string>();
    for (const page of ["/dashboard", "/pay/prod_x"]) {
      const html = await (await fetch(server.url + page)).text();
      for (const [, path] of html.matchAll(/<(?:script|link)[^>]+(?:src|href)="(\/[^"]+)"/g)) paths.add(path!);
    }
    expect([...paths].some((p) => p.endsWith(".js")) && [...paths].some((p) => p.endsWith(".css"))).toBe(true);
    const ids: string[] = [];
    for (const path of paths) {
      const res = await fetch(server.url + path);
      const body = await res.text();
      expect({ path, status: res.status, empty: body === "" }).toEqual({ path, status: 200, empty: false });
      expect(res.headers.get("content-type")).toMatch(path.endsWith(".css") ? /^text\/css/ : /^text\/javascript/);
      expect(res.headers.get("cache-control")).toBe("public, max-age=31536000, immutable");
      expect(res.headers.get("x-content-type-options")).toBe("nosniff");
      expect(res.headers.get("x-request-id")).toMatch(/^[0-9a-f-]{36}$/);
      ids.push(res.headers.get("x-request-id")!);
      // A browser's revalidation: 304 under the same ETag, with a request id of its own.
      const again = await fetch(server.url + path, { headers: { "if-none-match": res.headers.get("etag")! } });
      expect([again.status, again.headers.get("etag"), again.headers.get("x-request-id")?.length]).toEqual([304, res.headers.get("etag"), 36]);
      ids.push(again.headers.get("x-request-id")!);
    }
    // A name shaped like an asset that the bundles do not have is the catalogue's 404.
    const missing = await fetch(`${server.url}/chunk-00000000.js`);
    expect([missing.status, ((await missing.json()) as Json).code, missing.headers.has("x-request-id")]).toEqual([404, "NOT_FOUND", true]);
    const lines = await logged(server, (ls) => ids.every((id) => ls.some((l) => l.requestId === id)));
    for (const id of ids) expect(lines.filter((l) => l.requestId === id && l.msg === "request")).toHaveLength(1);
    const metrics = await (await fetch(`${server.url}/metrics`)).text();
    const counted = (path: string, status: number) => metrics.includes(`walletgate_http_requests_total{method="GET",route="${path}",status="${status}"} `);
    // One route for every bundled file (the files a build has are not labels of their own).
    const assets = (status: number) => Number(/ (\d+)$/m.exec(metrics.split("\n").find((l) => l.startsWith(`walletgate_http_requests_total{method="GET",route="asset",status="${status}"} `)) ?? "")?.[1]);
    expect(assets(200)).toBeGreaterThanOrEqual(paths.size);
    expect(assets(304)).toBe(paths.size);
    for (const path of paths) expect(counted(path, 200)).toBe(false);
  });
});
