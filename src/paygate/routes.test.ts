// A structural guard for /public/*: the API key is checked before a body is parsed (paygate.md), which
// holds only while every route with a body reads it as text and leaves the parsing to the group's
// transform hook. A new route that forgot `parse: "text"` would answer 400 to a keyless broken body.
import { expect, test } from "bun:test";
import { testDeps } from "../../test/helpers/deps.ts";
import { publicRoutes } from "./routes.ts";

type RouteInfo = { method: string; path: string; hooks?: { parse?: { fn: unknown }[] } };

test("every /public/* route that takes a body reads it as text, for the key check to come first", async () => {
  const { deps } = await testDeps();
  const routes = (publicRoutes(deps) as unknown as { routes: RouteInfo[] }).routes;
  const withBody = routes.filter((r) => ["POST", "PUT", "PATCH", "DELETE"].includes(r.method));
  expect(withBody.map((r) => r.path).sort()).toEqual(["/public/access/check", "/public/feature/revoke", "/public/feature/verify"]);
  for (const route of withBody) expect({ path: route.path, parse: route.hooks?.parse?.map((p) => p.fn) }).toEqual({ path: route.path, parse: ["text"] });
  // The fallback (any method, any other path) reads no body: its answer is the key's, then 404.
  expect(routes.filter((r) => r.method === "ALL").map((r) => ({ path: r.path, parse: r.hooks?.parse?.map((p) => p.fn) }))).toEqual([{ path: "/public/*", parse: ["none"] }]);
});
