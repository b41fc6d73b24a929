// The error mapping in-process (app.handle): unexpected failures are a bare 500 with a logged request id.
import { expect, test } from "bun:test";
import { createApp } from "./app.ts";
import { createLogger } from "./log.ts";
import { createMcpEndpoint } from "./mcp/endpoint.ts";
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
