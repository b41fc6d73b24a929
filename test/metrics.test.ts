// GET /metrics on the running server: Prometheus text that counts what happened over HTTP and MCP —
// requests by route and status with their latency, a 429, sign-in outcomes, live MCP sessions.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { startTestServer, type TestServer } from "./helpers/server.ts";
import { call, getChallenge, newWallet, signIn } from "./helpers/wallet.ts";
import { connectMcp } from "./helpers/mcp.ts";

let server: TestServer;
beforeAll(async () => {
  server = await startTestServer(); // rate limits on, as by default
});
afterAll(async () => {
  await server?.dispose();
});

/** The value of the sample line that starts with `series` (name and labels), or null. */
function valueOf(text: string, series: string): number | null {
  const line = text.split("\n").find((l) => l.startsWith(`${series} `));
  return line === undefined ? null : Number(line.slice(series.length + 1));
}

test("GET /metrics counts requests, latency, a rate-limit refusal, sign-in outcomes and live MCP sessions", async () => {
  const wallet = newWallet();
  await signIn(server.url, wallet);
  const challenge = await getChallenge(server.url, wallet);
  const forged = await call(server.url, "/auth/verify", {
    body: { walletAddress: wallet.address, nonce: challenge.nonce, signature: newWallet().sign(challenge.message) },
  });
  expect(forged.body.code).toBe("INVALID_SIGNATURE");
  // Challenges are limited to 10 a minute per client and wallet: the 11th of a fresh wallet is 429.
  const limited = newWallet();
  let last = 0;
  for (let i = 0; i < 11; i++) last = (await call(server.url, `/auth/challenge?wallet=${limited.address}`)).status;
  expect(last).toBe(429);
  const mcp = await connectMcp(server.url, "metrics-test");
  // A tool refused by a limit answers over MCP with HTTP 200: it is counted by tool. session_auth shares
  // the challenge limit of the wallet above (10 a minute per client and wallet).
  expect(await mcp.call("session_auth", { walletAddress: limited.address })).toMatchObject({ success: false, code: "RATE_LIMITED" });

  const res = await fetch(`${server.url}/metrics`);
  expect(res.status).toBe(200);
  expect(res.headers.get("content-type")).toBe("text/plain; version=0.0.4; charset=utf-8");
  const text = await res.text();
  expect(text).toContain("# TYPE walletgate_http_requests_total counter");
  expect(text).toContain("# TYPE walletgate_http_request_duration_seconds histogram");
  expect(valueOf(text, 'walletgate_http_requests_total{method="POST",route="/auth/verify",status="200"}')).toBe(1);
  expect(valueOf(text, 'walletgate_http_requests_total{method="POST",route="/auth/verify",status="401"}')).toBe(1);
  expect(valueOf(text, 'walletgate_http_requests_total{method="GET",route="/auth/challenge",status="429"}')).toBe(1);
  expect(valueOf(text, 'walletgate_http_request_duration_seconds_count{method="POST",route="/auth/verify"}')).toBe(2);
  expect(valueOf(text, 'walletgate_http_request_duration_seconds_bucket{method="POST",route="/auth/verify",le="+Inf"}')).toBe(2);
  expect(valueOf(text, 'walletgate_rate_limited_total{route="/auth/challenge"}')).toBe(1);
  expect(valueOf(text, 'walletgate_tool_rate_limited_total{tool="session_auth"}')).toBe(1);
  expect(valueOf(text, 'walletgate_auth_sign_ins_total{outcome="success"}')).toBe(1);
  expect(valueOf(text, 'walletgate_auth_sign_ins_total{outcome="INVALID_SIGNATURE"}')).toBe(1);
  expect(valueOf(text, "walletgate_mcp_sessions_live")).toBe(1);
  // No address, nonce or token ever becomes a label.
  expect(text).not.toContain(wallet.address);
  expect(text).not.toContain(limited.address);
  await mcp.client.close();
});

test("labels are the routes' templates: paths a client makes up, pages and assets add no series of their own", async () => {
  const key = "pk_" + "0".repeat(64);
  // /public/* answers 401 before routing, for any path; GET /pay/<anything> is the checkout page.
  for (let i = 0; i < 30; i++) {
    expect((await call(server.url, `/public/x${i}/${"ab/".repeat(2_000)}`, { headers: { "x-api-key": key } })).status).toBe(401);
    expect((await fetch(`${server.url}/pay/made-up-${i}`)).status).toBe(200);
  }
  expect((await call(server.url, "/public/products/prod_nothing", { headers: { "x-api-key": key } })).status).toBe(401);
  const text = await (await fetch(`${server.url}/metrics`)).text();
  // Every /public/* path needs a key first (its catch-all route): one label whatever the path.
  expect(valueOf(text, 'walletgate_http_requests_total{method="GET",route="/public/*",status="401"}')).toBe(30);
  expect(valueOf(text, 'walletgate_http_requests_total{method="GET",route="/pay/:id",status="200"}')).toBe(30);
  expect(valueOf(text, 'walletgate_http_requests_total{method="GET",route="/public/products/:id",status="401"}')).toBe(1);
  expect(text).not.toContain("made-up");
  expect(text).not.toContain("/x1");
  expect(text.length).toBeLessThan(100_000);
});
