// Rows "POST /public/access/check requests/s" and "its p99 at 50 connections" against an Elysia route doing
// one SQLite primary-key lookup (bench/access-baseline.ts), measured in the same run (operations.md).
import { generateKeyPairSync, sign } from "node:crypto";
import { join } from "node:path";
import { base58 } from "@scure/base";
import type { Subprocess } from "bun";
import { autocannonLoad, cleanEnv, parseWrkSummary, startLoadServer, stopProcess, waitForListeningInFile, type LoadGenerator, type Resources } from "./support.ts";

export type AccessOptions = { serverCommand: string[]; seconds: number; loadGenerator: LoadGenerator };
export type Rate = { requestsPerSecond: number; latencyP99Ms: number; non2xx: number };
/** Each side's windows, in the order they ran: baseline, walletgate, walletgate, baseline. */
export type AccessResult = { walletgate: Rate; baseline: Rate; windows: { walletgate: Rate[]; baseline: Rate[] }; throughputRatio: number; p99Ratio: number };

const CONNECTIONS = 50;

function parseWrk(out: string): Rate {
  const { requestsPerSecond, latencyP99Ms, non2xx } = parseWrkSummary(out);
  return { requestsPerSecond, latencyP99Ms, non2xx };
}

async function postLoad(resources: Resources, url: string, body: string, headers: Record<string, string>, seconds: number, dir: string, generator: LoadGenerator): Promise<Rate> {
  if (generator === "autocannon") {
    const summary = await autocannonLoad({ url, connections: CONNECTIONS, seconds, method: "POST", headers, body });
    return { requestsPerSecond: summary.requestsPerSecond, latencyP99Ms: summary.latencyP99Ms, non2xx: summary.non2xx };
  }
  const script = join(dir, `post-${Math.random().toString(36).slice(2)}.lua`);
  const lua = [
    `wrk.method = "POST"`,
    `wrk.body = ${JSON.stringify(body)}`,
    `wrk.headers["Content-Type"] = "application/json"`,
    ...Object.entries(headers).map(([k, v]) => `wrk.headers[${JSON.stringify(k)}] = ${JSON.stringify(v)}`),
  ].join("\n");
  await Bun.write(script, lua);
  const child = resources.track(
    Bun.spawn(["wrk", "-t2", `-c${CONNECTIONS}`, `-d${seconds}s`, "--latency", "-s", script, url], { env: cleanEnv({}), stdout: "pipe", stderr: "pipe" }),
  );
  const [code, out] = await Promise.all([child.exited, new Response(child.stdout).text()]);
  if (code !== 0) throw new Error(`wrk failed (exit ${code}):\n${out}`);
  return parseWrk(out);
}

async function json(url: string, path: string, init: { body?: unknown; headers?: Record<string, string> } = {}): Promise<Record<string, any>> {
  const response = await fetch(url + path, {
    method: init.body === undefined ? "GET" : "POST",
    headers: { "content-type": "application/json", ...init.headers },
    body: init.body === undefined ? undefined : JSON.stringify(init.body),
  });
  const text = await response.text();
  if (response.status >= 300) throw new Error(`${path} answered ${response.status}: ${text}`);
  return JSON.parse(text) as Record<string, any>;
}

/** An owner signed in with a fresh key, a product and an API key, the owner set to unlimited. */
async function prepareOwner(url: string, serverCommand: string[], dataDir: string, dir: string): Promise<{ key: string; productId: string }> {
  const { publicKey, privateKey } = generateKeyPairSync("ed25519");
  const wallet = base58.encode(publicKey.export({ format: "der", type: "spki" }).subarray(12));
  const challenge = await json(url, `/auth/challenge?wallet=${wallet}`);
  const signature = sign(null, Buffer.from(challenge.message as string, "utf8"), privateKey).toString("base64");
  const { sessionToken } = await json(url, "/auth/verify", { body: { walletAddress: wallet, nonce: challenge.nonce, signature } });
  const auth = { authorization: `Bearer ${sessionToken}` };
  const product = await json(url, "/dashboard/api/products", { body: { title: "Bench", description: "", type: "access", price: "1" }, headers: auth });
  const { key } = await json(url, "/dashboard/api/keys", { body: { label: "bench" }, headers: auth });
  // The benchmark measures the check, not the limiter: the operator's tier for benchmarks.
  const tier = Bun.spawnSync([...serverCommand.slice(0, -1), "owners", "set-tier", wallet, "unlimited"], { cwd: dir, env: cleanEnv({ DATA_DIR: dataDir }) });
  if (tier.exitCode !== 0) throw new Error(`owners set-tier failed: ${tier.stderr}`);
  return { key: key as string, productId: product.productId as string };
}

/** Windows of one side put together: requests/s over all of them, the mean of their p99s. */
function combined(windows: Rate[]): Rate {
  const n = windows.length;
  return {
    // Unrounded: the ratios and their verdicts are taken from these.
    requestsPerSecond: windows.reduce((sum, w) => sum + w.requestsPerSecond, 0) / n,
    latencyP99Ms: windows.reduce((sum, w) => sum + w.latencyP99Ms, 0) / n,
    non2xx: windows.reduce((sum, w) => sum + w.non2xx, 0),
  };
}

/** A load run against one server: `seconds` of wrk at the row's 50 connections. */
export type AccessLoad = (seconds: number) => Promise<Rate>;

/** The baseline server (bench/access-baseline.ts) in `dir`, and its load. The caller stops `server`. */
export async function startAccessBaseline(resources: Resources, dir: string, generator: LoadGenerator = "wrk"): Promise<{ server: Subprocess; load: AccessLoad }> {
  const log = join(dir, "baseline.log");
  const server = resources.track(
    Bun.spawn([process.execPath, join(import.meta.dir, "access-baseline.ts"), dir], { cwd: dir, env: cleanEnv({}), stdout: Bun.file(log), stderr: "inherit" }),
  );
  try {
    const url = await waitForListeningInFile(log, server, 10_000);
    const body = JSON.stringify({ id: "pur_4242", walletAddress: "wallet_4242" });
    return { server, load: (seconds) => postLoad(resources, `${url}/check`, body, {}, seconds, dir, generator) };
  } catch (err) {
    await stopProcess(server, 5_000);
    throw err;
  }
}

/**
 * walletgate (`serverCommand`) in `dir` with an owner, a product and a key ready, and the load of the row:
 * the access check of a wallet that never bought. The caller stops `server`.
 */
export async function startAccessServer(resources: Resources, serverCommand: string[], dir: string, generator: LoadGenerator = "wrk"): Promise<{ server: Subprocess; load: AccessLoad }> {
  const { server, url, dataDir } = await startLoadServer(resources, serverCommand, dir);
  try {
    const { key, productId } = await prepareOwner(url, serverCommand, dataDir, dir);
    const buyer = base58.encode(generateKeyPairSync("ed25519").publicKey.export({ format: "der", type: "spki" }).subarray(12));
    const body = JSON.stringify({ productId, walletAddress: buyer });
    return { server, load: (seconds) => postLoad(resources, `${url}/public/access/check`, body, { "X-API-Key": key }, seconds, dir, generator) };
  } catch (err) {
    await stopProcess(server, 10_000);
    throw err;
  }
}

/**
 * Both servers run side by side (the idle one costs nothing) and are loaded in turn — baseline,
 * walletgate, walletgate, baseline, `seconds / 2` each — so that a drift in the machine's speed (a shared
 * VM's neighbours) falls on both sides alike instead of on whichever ran second.
 */
export async function measureAccessCheck(resources: Resources, options: AccessOptions): Promise<AccessResult> {
  const dir = resources.tempDir("access");
  const { server: baselineServer, load: baseline } = await startAccessBaseline(resources, dir, options.loadGenerator);
  try {
    const { server, load: walletgate } = await startAccessServer(resources, options.serverCommand, dir, options.loadGenerator);
    try {
      await baseline(1); // warm-up of both
      await walletgate(1);
      const half = Math.max(1, Math.round(options.seconds / 2));
      const windows = { baseline: [] as Rate[], walletgate: [] as Rate[] };
      windows.baseline.push(await baseline(half));
      windows.walletgate.push(await walletgate(half));
      windows.walletgate.push(await walletgate(half));
      windows.baseline.push(await baseline(half));
      const ours = combined(windows.walletgate);
      const theirs = combined(windows.baseline);
      return {
        walletgate: ours,
        baseline: theirs,
        windows,
        throughputRatio: ours.requestsPerSecond / theirs.requestsPerSecond, // unrounded: the verdict is on it
        p99Ratio: ours.latencyP99Ms / theirs.latencyP99Ms,
      };
    } finally {
      await stopProcess(server, 10_000);
    }
  } finally {
    await stopProcess(baselineServer, 5_000);
  }
}
