// GET /metrics (operations.md "Health and observability"): counters, histograms and gauges kept in memory
// and written in the Prometheus text format (version 0.0.4). Each series is found by one Map lookup on a
// key built from its label values, so counting costs a request well under a microsecond.

/** A label value as the text format wants it: backslash, double quote and newline escaped. */
function escapeLabel(value: string): string {
  return value.replace(/[\\"\n]/g, (c) => (c === "\n" ? "\\n" : `\\${c}`));
}

function labelText(names: readonly string[], values: readonly string[]): string {
  return names.map((name, i) => `${name}="${escapeLabel(values[i]!)}"`).join(",");
}

/** Sample values as Prometheus writes them (+Inf for the last bucket bound). */
const sample = (n: number): string => (n === Infinity ? "+Inf" : String(n));

type Series<T> = { labels: string[]; value: T };

export type Counter = {
  inc(...labelValues: string[]): void;
  /** The series of these label values, to count into without finding it again. */
  series(...labelValues: string[]): { inc(): void; add(n: number): void };
};
export type Histogram = {
  observe(value: number, ...labelValues: string[]): void;
  series(...labelValues: string[]): { observe(value: number): void };
};

/** Latency buckets in seconds, from a fraction of a millisecond to ten seconds. */
export const LATENCY_BUCKETS_S = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

export type Metrics = {
  counter(name: string, help: string, labelNames: readonly string[]): Counter;
  histogram(name: string, help: string, labelNames: readonly string[], buckets?: readonly number[]): Histogram;
  /** A value read when /metrics is asked for. */
  gauge(name: string, help: string, read: () => number): void;
  /** The exposition: every metric, its HELP and TYPE, then its series. */
  render(): string;
};

/** Series beyond this many per metric are counted under the label values "other" (bounded memory). */
const MAX_SERIES = 1_000;

export function createMetrics(): Metrics {
  const renderers: (() => string)[] = [];

  function seriesMap<T>(labelNames: readonly string[], fresh: () => T) {
    const series = new Map<string, Series<T>>();
    const overflow = labelNames.map(() => "other");
    const overflowKey = overflow.join("\u0000");
    return {
      series,
      get(values: string[]): T {
        let key = values.join("\u0000");
        let entry = series.get(key);
        if (entry === undefined && series.size >= MAX_SERIES) {
          key = overflowKey; // the one series allowed past the bound
          values = overflow;
          entry = series.get(key);
        }
        if (entry === undefined) {
          entry = { labels: values, value: fresh() };
          series.set(key, entry);
        }
        return entry.value;
      },
    };
  }

  return {
    counter(name, help, labelNames) {
      const map = seriesMap(labelNames, () => ({ n: 0 }));
      renderers.push(() => {
        const lines = [`# HELP ${name} ${help}`, `# TYPE ${name} counter`];
        for (const { labels, value } of map.series.values()) {
          lines.push(`${name}${labelNames.length === 0 ? "" : `{${labelText(labelNames, labels)}}`} ${value.n}`);
        }
        return lines.join("\n");
      });
      return {
        inc: (...values) => void map.get(values).n++,
        series: (...values) => {
          const counted = map.get(values);
          return { inc: () => void counted.n++, add: (n) => void (counted.n += n) };
        },
      };
    },
    histogram(name, help, labelNames, buckets = LATENCY_BUCKETS_S) {
      const bounds = [...buckets].sort((a, b) => a - b);
      const map = seriesMap(labelNames, () => ({ counts: new Array<number>(bounds.length).fill(0), sum: 0, count: 0 }));
      renderers.push(() => {
        const lines = [`# HELP ${name} ${help}`, `# TYPE ${name} histogram`];
        for (const { labels, value } of map.series.values()) {
          const base = labelText(labelNames, labels);
          const withLe = (le: number) => `{${base === "" ? "" : `${base},`}le="${sample(le)}"}`;
          let cumulative = 0;
          bounds.forEach((bound, i) => {
            cumulative += value.counts[i]!;
            lines.push(`${name}_bucket${withLe(bound)} ${cumulative}`);
          });
          lines.push(`${name}_bucket${withLe(Infinity)} ${value.count}`);
          const plain = base === "" ? "" : `{${base}}`;
          lines.push(`${name}_sum${plain} ${value.sum}`, `${name}_count${plain} ${value.count}`);
        }
        return lines.join("\n");
      });
      type Counts = { counts: number[]; sum: number; count: number };
      const observeInto = (h: Counts, v: number) => {
        let i = 0;
        while (i < bounds.length && v > bounds[i]!) i++;
        if (i < bounds.length) h.counts[i]!++;
        h.sum += v;
        h.count++;
      };
      return {
        observe: (v, ...values) => observeInto(map.get(values), v),
        series: (...values) => {
          const h = map.get(values);
          return { observe: (v: number) => observeInto(h, v) };
        },
      };
    },
    gauge(name, help, read) {
      renderers.push(() => `# HELP ${name} ${help}\n# TYPE ${name} gauge\n${name} ${sample(read())}`);
    },
    render: () => `${renderers.map((r) => r()).join("\n")}\n`,
  };
}

/** The template of the route that answers `method path` (`/pay/:productId/checkout`), or null when none does. */
export type RouteOf = (method: string, path: string) => string | null;

/**
 * The route label of a request: its route's template with every parameter `:id`, so that
 * /pay/prod_1/checkout and /pay/prod_2/checkout are one route. A path no route has, or a 404, is
 * "unmatched": nothing a client puts in a path becomes a label.
 */
export function routeLabel(template: string | null, status: number): string {
  if (template === null || status === 404) return "unmatched";
  return template.replace(/:[^/]+/g, ":id");
}

/** Paths longer than this are labelled afresh each time rather than remembered (they are not routes we have). */
const REMEMBERED_PATH_CHARS = 256;

/** The service's own metrics (operations.md): what GET /metrics reports. */
export type ServiceMetrics = {
  readonly registry: Metrics;
  /** One answered HTTP request (the access log's fields), labelled by `routeOf`. */
  request(method: string, path: string, status: number, ms: number, routeOf: RouteOf): void;
  /** A wallet sign-in's outcome: "success", or the error code it was refused with. */
  signIn(outcome: string): void;
  /** One webhook delivery attempt's result. */
  webhookAttempt(result: "success" | "failure" | "gone"): void;
  /** `count` webhook deliveries' end: delivered, or failed for good (410, the last attempt failed, or dropped unsent). */
  webhookDelivered(result: "succeeded" | "failed", count?: number): void;
  /** A tool call refused by a rate limit, over any transport (over MCP it is not an HTTP 429). */
  toolRateLimited(tool: string): void;
};

export function createServiceMetrics(): ServiceMetrics {
  const registry = createMetrics();
  const requests = registry.counter("walletgate_http_requests_total", "HTTP requests answered, by method, route and status.", ["method", "route", "status"]);
  const latency = registry.histogram("walletgate_http_request_duration_seconds", "Time to answer an HTTP request, by method and route.", ["method", "route"]);
  const rateLimited = registry.counter("walletgate_rate_limited_total", "Requests refused by a rate limit (429), by route.", ["route"]);
  const signIns = registry.counter("walletgate_auth_sign_ins_total", "Wallet sign-ins (HTTP and MCP), by outcome: success or the error code.", ["outcome"]);
  const toolsLimited = registry.counter("walletgate_tool_rate_limited_total", "Tool calls refused by a rate limit (MCP, stdio or the JSON envelope), by tool.", ["tool"]);
  const webhooks = registry.counter("walletgate_webhook_attempts_total", "Webhook delivery attempts, by result: success (2xx), gone (410) or failure.", ["result"]);
  const deliveries = registry.counter(
    "walletgate_webhook_deliveries_total",
    "Webhook deliveries ended, by result: succeeded, or failed for good (410 Gone, every attempt failed, or its endpoint disabled or gone).",
    ["result"],
  );
  // The series each recent (method, path, status) counts into: most requests repeat a few of them, and
  // labelling a path takes a split and a pattern per segment. Forgotten all at once when full (paths
  // with ids keep arriving); the series themselves stay.
  type Counted = { request: { inc(): void }; latency: { observe(s: number): void }; limited: { inc(): void } | null };
  const recent = new Map<string, Counted>();
  return {
    registry,
    request(method, path, status, ms, routeOf) {
      const key = `${method} ${status} ${path}`;
      let counted = recent.get(key);
      if (counted === undefined) {
        const template = routeOf(method, path);
        const route = routeLabel(template, status);
        counted = {
          request: requests.series(method, route, String(status)),
          latency: latency.series(method, route),
          limited: status === 429 ? rateLimited.series(route) : null,
        };
        if (recent.size >= 1_000) recent.clear();
        // A path no route took is not remembered unless its answer says none has it (404): one answered before
        // its route group was built (a 413, which needs no route) gets its template once the group is there.
        if (path.length <= REMEMBERED_PATH_CHARS && (template !== null || status === 404)) recent.set(key, counted);
      }
      counted.request.inc();
      counted.latency.observe(ms / 1000);
      counted.limited?.inc();
    },
    signIn: (outcome) => signIns.inc(outcome),
    webhookAttempt: (result) => webhooks.inc(result),
    webhookDelivered: (result, count = 1) => {
      if (count > 0) deliveries.series(result).add(count);
    },
    toolRateLimited: (tool) => toolsLimited.inc(tool),
  };
}
