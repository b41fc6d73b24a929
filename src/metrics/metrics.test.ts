// The Prometheus text written by GET /metrics, in isolation: counters, cumulative histogram buckets,
// gauges read at render time, label escaping, bounded series, and route labels that never hold ids.
import { describe, expect, test } from "bun:test";
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
  test("ids become :id; names stay; a path nothing answered is unmatched", () => {
    expect(routeLabel("/auth/verify", 200)).toBe("/auth/verify");
    expect(routeLabel("/pay/prod_8Hx2kQ/checkout", 200)).toBe("/pay/:id/checkout");
    expect(routeLabel("/dashboard/api/webhooks/whe_abc123/deliveries/dlv_9/attempts", 200)).toBe("/dashboard/api/webhooks/:id/deliveries/:id/attempts");
    expect(routeLabel(`/public/verify/${"5".repeat(40)}${"x".repeat(48)}`, 200)).toBe("/public/verify/:id");
    expect(routeLabel("/mcp", 200)).toBe("/mcp");
    expect(routeLabel("/anything/else/at/all", 404)).toBe("unmatched");
  });

  test("the service's metrics: requests by route and status, latency, 429s, sign-in outcomes", () => {
    const s = createServiceMetrics();
    s.request("POST", "/auth/verify", 200, 3.2);
    s.request("POST", "/auth/verify", 429, 0.4);
    s.signIn("success");
    s.signIn("INVALID_SIGNATURE");
    const text = s.registry.render();
    expect(text).toContain('walletgate_http_requests_total{method="POST",route="/auth/verify",status="200"} 1\n');
    expect(text).toContain('walletgate_http_requests_total{method="POST",route="/auth/verify",status="429"} 1\n');
    expect(text).toContain('walletgate_http_request_duration_seconds_bucket{method="POST",route="/auth/verify",le="0.005"} 2\n');
    expect(text).toContain('walletgate_http_request_duration_seconds_bucket{method="POST",route="/auth/verify",le="0.0025"} 1\n');
    expect(text).toContain('walletgate_rate_limited_total{route="/auth/verify"} 1\n');
    expect(text).toContain('walletgate_auth_sign_ins_total{outcome="INVALID_SIGNATURE"} 1\n');
  });
});
