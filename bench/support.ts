// Shared bench plumbing: one owner for every child process and temp dir, listening-line waits, statistics.
import type { Subprocess } from "bun";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

export const REPO_ROOT = join(import.meta.dir, "..");
export const BINARY = join(REPO_ROOT, "dist", "walletgate");

/** Owns what a bench run creates, so `close()` can kill and remove all of it, whatever failed. */
export type Resources = {
  tempDir(label: string): string;
  track<T extends Subprocess>(child: T): T;
  close(): Promise<void>;
};

export function createResources(): Resources {
  const dirs: string[] = [];
  const children = new Set<Subprocess>();
  return {
    tempDir(label) {
      const dir = mkdtempSync(join(tmpdir(), `walletgate-bench-${label}-`));
      dirs.push(dir);
      return dir;
    },
    track(child) {
      children.add(child);
      void child.exited.then(() => children.delete(child));
      return child;
    },
    async close() {
      await Promise.all([...children].map((child) => stopProcess(child, 2_000)));
      for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** SIGTERM, then SIGKILL if the process has not exited after `graceMs`. */
export async function stopProcess(child: Subprocess, graceMs: number): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  child.kill("SIGTERM");
  const timer = setTimeout(() => child.kill("SIGKILL"), graceMs);
  await child.exited;
  clearTimeout(timer);
}

/** The `url` of the first `"msg":"listening"` JSON line in `text`, or null. */
export function listeningUrl(text: string): string | null {
  for (const line of text.split("\n")) {
    if (!line.includes('"listening"')) continue;
    try {
      const parsed = JSON.parse(line) as { msg?: unknown; url?: unknown };
      if (parsed.msg === "listening" && typeof parsed.url === "string") return parsed.url;
    } catch {
      // a partial line: wait for the rest
    }
  }
  return null;
}

/** Reads a piped stdout until the listening line arrives; the stream keeps being drained afterwards. */
export async function waitForListeningOnStream(child: Subprocess<"ignore", "pipe", "pipe" | "inherit" | "ignore">, timeoutMs: number): Promise<string> {
  const reader = child.stdout.getReader();
  const decoder = new TextDecoder();
  let seen = "";
  const deadline = setTimeout(() => void reader.cancel("timeout"), timeoutMs);
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      seen += decoder.decode(value, { stream: true });
      const url = listeningUrl(seen);
      if (url !== null) {
        void drain(reader);
        return url;
      }
    }
  } finally {
    clearTimeout(deadline);
  }
  throw new Error(`no listening line within ${timeoutMs} ms (exit ${child.exitCode}); stdout:\n${seen.slice(0, 2000)}`);
}

async function drain(reader: { read(): Promise<{ done: boolean }> }): Promise<void> {
  try {
    while (!(await reader.read()).done);
  } catch {
    // the process was killed
  }
}

/** Polls a log file (the child's stdout) for the listening line. */
export async function waitForListeningInFile(path: string, child: Subprocess, timeoutMs: number): Promise<string> {
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    let text = "";
    try {
      text = readFileSync(path, "utf8");
    } catch {
      // not created yet
    }
    const url = listeningUrl(text);
    if (url !== null) return url;
    if (child.exitCode !== null || child.signalCode !== null) {
      throw new Error(`server exited (${child.exitCode ?? child.signalCode}) before listening; stdout:\n${text.slice(0, 2000)}`);
    }
    if (performance.now() > deadline) throw new Error(`no listening line within ${timeoutMs} ms in ${path}`);
    await Bun.sleep(5);
  }
}

export function median(values: readonly number[]): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

export function round(value: number, digits = 1): number {
  const f = 10 ** digits;
  return Math.round(value * f) / f;
}

/** Environment for a child: PATH and HOME only, plus `extra` — no stray settings from the caller's shell. */
export function cleanEnv(extra: Record<string, string>): Record<string, string> {
  const env: Record<string, string> = {};
  for (const name of ["PATH", "HOME", "TMPDIR"]) {
    const value = process.env[name];
    if (value !== undefined) env[name] = value;
  }
  return { ...env, ...extra };
}

/** Figures from wrk's own summary (run with --latency): requests/s, p50 and p99 in ms, non-2xx answers. */
export function parseWrkSummary(out: string): { requestsPerSecond: number; latencyP50Ms: number; latencyP99Ms: number; non2xx: number } {
  const ms = (label: string) => {
    const m = new RegExp(`${label}%\\s+([\\d.]+)(us|ms|s)`).exec(out);
    if (m === null) return Number.NaN;
    const value = Number(m[1]);
    return m[2] === "us" ? value / 1000 : m[2] === "s" ? value * 1000 : value;
  };
  return {
    // As wrk printed them (not rounded again: ratios and their verdicts are taken from these).
    requestsPerSecond: Number(/Requests\/sec:\s+([\d.]+)/.exec(out)?.[1]),
    latencyP50Ms: ms("50"),
    latencyP99Ms: ms("99"),
    non2xx: Number(/Non-2xx or 3xx responses:\s+(\d+)/.exec(out)?.[1] ?? 0),
  };
}

/**
 * The server under load: `serverCommand` in `dir` on 127.0.0.1 port 0 with a fresh `dir/data`, rate limits
 * off and the JSON access log to `dir/server.log` (as in production). Resolves once it listens; the
 * caller stops it (`stopProcess`).
 */
export async function startLoadServer(resources: Resources, serverCommand: string[], dir: string): Promise<{ server: Subprocess; url: string; dataDir: string }> {
  const dataDir = join(dir, "data");
  const log = join(dir, "server.log");
  const server = resources.track(
    Bun.spawn(serverCommand, {
      cwd: dir,
      env: cleanEnv({ PORT: "0", HOST: "127.0.0.1", DATA_DIR: dataDir, AUTH_RATE_LIMIT: "off", LOG_FORMAT: "json", LOG_LEVEL: "info" }),
      stdin: "ignore",
      stdout: Bun.file(log),
      stderr: "inherit",
    }),
  );
  try {
    return { server, url: await waitForListeningInFile(log, server, 10_000), dataDir };
  } catch (err) {
    await stopProcess(server, 10_000);
    throw err;
  }
}

/** The load generator: wrk when installed (Debian package), else autocannon (npm), as operations.md says. */
export type LoadGenerator = "wrk" | "autocannon";

/** One autocannon load, as the wrk runs report it: requests per second over the run, latency in ms. */
export type AutocannonSummary = { requests: number; requestsPerSecond: number; non2xx: number; socketErrors: number; seconds: number; latencyP50Ms: number; latencyP99Ms: number };

/**
 * Fallback where wrk is not installed: autocannon (a devDependency) in this process. `nextBody`, when given,
 * makes each request's body (a JSON-RPC id of its own, a signed body used once); `onAnswer` sees each
 * answer's status and body (to count tool errors, which come back as 200s).
 */
export async function autocannonLoad(options: {
  url: string;
  connections: number;
  seconds: number;
  method?: "GET" | "POST";
  headers?: Record<string, string>;
  body?: string;
  nextBody?: () => string;
  onAnswer?: (status: number, body: string) => void;
}): Promise<AutocannonSummary> {
  const autocannon = (await import("autocannon")).default as unknown as (opts: Record<string, unknown>) => Promise<{
    requests: { total: number; average: number };
    "2xx": number;
    non2xx: number;
    errors: number;
    timeouts: number;
    duration: number;
    latency: { p50: number; p99: number };
  }>;
  const result = await autocannon({
    url: options.url,
    connections: options.connections,
    duration: options.seconds,
    timeout: 10,
    requests: [
      {
        method: options.method ?? (options.body === undefined && options.nextBody === undefined ? "GET" : "POST"),
        headers: { ...(options.body !== undefined || options.nextBody !== undefined ? { "content-type": "application/json" } : {}), ...options.headers },
        ...(options.body === undefined ? {} : { body: options.body }),
        ...(options.nextBody === undefined ? {} : { setupRequest: (request: Record<string, unknown>) => ({ ...request, body: options.nextBody!() }) }),
        ...(options.onAnswer === undefined ? {} : { onResponse: (status: number, body: string) => options.onAnswer!(status, body) }),
      },
    ],
  });
  const requests = result["2xx"] + result.non2xx;
  return {
    requests,
    requestsPerSecond: Math.round(requests / result.duration),
    non2xx: result.non2xx,
    socketErrors: result.errors, // autocannon counts each timeout among its errors too
    seconds: result.duration,
    latencyP50Ms: result.latency.p50,
    latencyP99Ms: result.latency.p99,
  };
}
