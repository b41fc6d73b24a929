// Keeps the README's sign-in script true: it runs against a real server and gets a working token.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { join } from "node:path";
import { startTestServer, type TestServer } from "./helpers/server.ts";
import { call } from "./helpers/wallet.ts";

let server: TestServer;
beforeAll(async () => {
  server = await startTestServer();
});
afterAll(() => server.dispose());

test("examples/sign-in.ts signs in", async () => {
  const proc = Bun.spawn([process.execPath, join(import.meta.dir, "../examples/sign-in.ts"), server.url], { stdout: "pipe" });
  const out = JSON.parse(await new Response(proc.stdout).text());
  expect(await proc.exited).toBe(0);
  expect(out.isNewSession).toBe(true);
  expect((await call(server.url, "/auth/session", { token: out.sessionToken })).status).toBe(200);
});
