// The Prometheus text written by GET /metrics, in isolation: counters, cumulative histogram buckets,
// gauges read at render time, label escaping, bounded series, and route labels that never hold ids.
import { describe, expect, test } from "bun:test";
import { routeTemplates } from "../lib/route-templates.ts";
import { createMetrics, createServiceMetrics, routeLabel } from "./metrics.ts";

describe("the text format", () => {
  test("a counter, a histogram and a gauge, each with HELP and TYPE", () => {
    const m = createMetrics();
    const c = m.counter("x_total", "Things.", ["kind"]);
    c.inc("a");
    c.inc("a");
    c.inc('q"u\\o\nte');
    const h = m.histogram("x_seconds", "Time.", ["route"], [0.1, 1]);
    h.observe(0.05, "/a");
    h.observe(0.5, "/a");
    h.observe(5, "/a");
    let live = 3;
    m.gauge("x_live", "Live.", () => live);
    live = 4;
    expect(m.render()).toBe(
      [
        "# HELP x_total Things.",
        "# TYPE x_total counter",
        'x_total{kind="a"} 2',
        'x_total{kind="q\\"u\\\\o\\nte"} 1',
        "# HELP x_seconds Time.",
        "# TYPE x_seconds histogram",
        'x_seconds_bucket{route="/a",le="0.1"} 1',
        'x_seconds_bucket{route="/a",le="1"} 2',
        'x_seconds_bucket{route="/a",le="+Inf"} 3',
        'x_seconds_sum{route="/a"} 5.55',
        'x_seconds_count{route="/a"} 3',
        "# HELP x_live Live.",
        "# TYPE x_live gauge",
        "x_live 4",
        "",
      ].join("\n"),
    );
  });

  test("a value equal to a bucket's bound counts in that bucket (le is less than or equal)", () => {
    const m = createMetrics();
    const h = m.histogram("z_seconds", "Z.", [], [0.1, 1]);
    h.observe(0.1);
    h.observe(1);
    const text = m.render();
    expect(text).toContain('z_seconds_bucket{le="0.1"} 1\n');
    expect(text).toContain('z_seconds_bucket{le="1"} 2\n');
  });

  test("series are bounded: past 1,000 label sets the rest count as other", () => {
    const m = createMetrics();
    const c = m.counter("y_total", "Y.", ["k"]);
    for (let i = 0; i < 1_200; i++) c.inc(String(i));
    c.inc("5"); // a series kept before the bound still counts as itself
    const text = m.render();
    expect(text.split("\n").filter((l) => l.startsWith("y_total{"))).toHaveLength(1_001);
    expect(text).toContain('y_total{k="other"} 200\n');
    expect(text).toContain('y_total{k="5"} 2\n');
  });
});

describe("route labels", () => {
  test("a route's template with parameters as :id; a path no route has, or a 404, is unmatched", () => {
    const routes = routeTemplates();
    routes.add([
      { method: "POST", path: "/auth/verify" },
      { method: "POST", path: "/pay/:productId/checkout" },
      { method: "GET", path: "/dashboard/api/webhooks/:id/deliveries" },
      { method: "GET", path: "/public/verify/:txHash" },
      { method: "GET", path: "/public/feature/tokens" },
      { method: "GET", path: "/public/feature/:id" },
      { method: "ALL", path: "/mcp" },
    ]);
    const label = (method: string, path: string, status = 200) => routeLabel(routes.find(method, path), status);
    expect(label("POST", "/auth/verify")).toBe("/auth/verify");
    expect(label("POST", "/pay/prod_8Hx2kQ/checkout")).toBe("/pay/:id/checkout");
    expect(label("GET", "/dashboard/api/webhooks/whe_abc123/deliveries")).toBe("/dashboard/api/webhooks/:id/deliveries");
    expect(label("GET", `/public/verify/${"5".repeat(40)}${"x".repeat(48)}`)).toBe("/public/verify/:id");
    expect(label("GET", "/public/feature/tokens")).toBe("/public/feature/tokens"); // the static route, not /:id
    expect(label("DELETE", "/mcp")).toBe("/mcp");
    expect(label("POST", "/auth/verify/")).toBe("/auth/verify"); // answered as without its trailing slash
    expect(label("GET", "/auth/verify")).toBe("unmatched"); // another method
    expect(label("GET", "/public/x1/ab/ab/ab")).toBe("unmatched");
    expect(label("GET", "/public/verify/unknown", 404)).toBe("unmatched");
  });

  test("arbitrary paths answered without routing (a 401 before it) add no series", () => {
    const s = createServiceMetrics();
    const none = () => null;
    for (let i = 0; i < 1_100; i++) s.request("GET", `/public/x${i}/${"ab/".repeat(4_000)}`, 401, 0.1, none);
    const text = s.registry.render();
    expect(text).toContain('walletgate_http_requests_total{method="GET",route="unmatched",status="401"} 1100\n');
    expect(text.length).toBeLessThan(10_000);
  });

  test("a path answered before its route group was built is labelled by its template once the group is there", () => {
    const s = createServiceMetrics();
    let built = false;
    const routeOf = () => (built ? "/pay/:productId/checkout" : null);
    s.request("POST", "/pay/prod_1/checkout", 413, 0.1, routeOf); // the 413 needs no route: answered first
    built = true;
    s.request("POST", "/pay/prod_1/checkout", 413, 0.1, routeOf);
    const text = s.registry.render();
    expect(text).toContain('walletgate_http_requests_total{method="POST",route="/pay/:id/checkout",status="413"} 1\n');
  });

  test("the service's metrics: requests by route and status, latency, 429s, sign-in outcomes", () => {
    const s = createServiceMetrics();
    const routeOf = (_method: string, path: string) => path;
    s.request("POST", "/auth/verify", 200, 3.2, routeOf);
    s.request("POST", "/auth/verify", 429, 0.4, routeOf);
    s.signIn("success");
    s.signIn("INVALID_SIGNATURE");
    const text = s.registry.render();
    expect(text).toContain('walletgate_http_requests_total{method="POST",route="/auth/verify",status="200"} 1\n');
    expect(text).toContain('walletgate_http_requests_total{method="POST",route="/auth/verify",status="429"} 1\n');
    expect(text).toContain('walletgate_http_request_duration_seconds_bucket{method="POST",route="/auth/verify",le="0.005"} 2\n');
    expect(text).toContain('walletgate_http_request_duration_seconds_bucket{method="POST",route="/auth/verify",le="0.0025"} 1\n');
    expect(text).toContain('walletgate_rate_limited_total{route="/auth/verify"} 1\n');
    // Only 429s are rate-limit refusals: other errors of a route are not counted there.
    s.request("POST", "/auth/verify", 401, 0.4, routeOf);
    s.request("GET", "/auth/session", 503, 0.4, routeOf);
    const after = s.registry.render();
    expect(after).toContain('walletgate_rate_limited_total{route="/auth/verify"} 1\n');
    expect(after).not.toContain('walletgate_rate_limited_total{route="/auth/session"}');
    expect(text).toContain('walletgate_auth_sign_ins_total{outcome="INVALID_SIGNATURE"} 1\n');
  });
});
