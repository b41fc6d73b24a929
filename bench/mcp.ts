// Row "MCP tools/call wallet_get_balance over an open session, calls/s" against a no-op tool on a bare
// SDK server with the same transport (operations.md), and against the same binary's /healthz.
import { join } from "node:path";
import { autocannonLoad, cleanEnv, parseWrkSummary, round, startLoadServer, stopProcess, waitForListeningInFile, type LoadGenerator, type Resources } from "./support.ts";

export type McpOptions = { serverCommand: string[]; seconds: number; connections: number; loadGenerator: LoadGenerator };

type Rate = { callsPerSecond: number; latencyP50Ms: number; latencyP99Ms: number; failed: number };

export type McpResult = {
  walletgate: Rate;
  /** Mean of the bare SDK server measured before and after (the machine's speed drifts). */
  baseline: Rate;
  baselineBeforeAfter: [number, number];
  healthz: Rate;
  ratioToBaseline: number;
  ratioToHealthz: number;
};

const PROTOCOL_VERSION = "2025-06-18";
const HEADERS = { "content-type": "application/json", accept: "application/json, text/event-stream" };

/** initialize + initialized, then (walletgate) wallet_create so the session is bound to a funded wallet. */
export async function openSession(url: string, bind: boolean): Promise<string> {
  const init = await fetch(`${url}/mcp`, {
    method: "POST",
    headers: HEADERS,
    body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "initialize", params: { protocolVersion: PROTOCOL_VERSION, capabilities: {}, clientInfo: { name: "bench", version: "1" } } }),
  });
  const session = init.headers.get("mcp-session-id");
  if (init.status !== 200 || session === null) throw new Error(`initialize answered ${init.status}: ${await init.text()}`);
  await init.arrayBuffer();
  const headers = { ...HEADERS, "mcp-session-id": session, "mcp-protocol-version": PROTOCOL_VERSION };
  await (await fetch(`${url}/mcp`, { method: "POST", headers, body: JSON.stringify({ jsonrpc: "2.0", method: "notifications/initialized" }) })).arrayBuffer();
  if (bind) {
    const created = await fetch(`${url}/mcp`, { method: "POST", headers, body: JSON.stringify({ jsonrpc: "2.0", id: 2, method: "tools/call", params: { name: "wallet_create", arguments: {} } }) });
    const text = await created.text();
    if (!text.includes('\\"success\\":true')) throw new Error(`wallet_create failed: ${text}`);
  }
  return session;
}

/** The same load through autocannon: each call its own JSON-RPC id; a failed call is a non-200 or an isError answer. */
async function autocannon(url: string, options: McpOptions, mcp: { session: string; tool: string } | null): Promise<Rate> {
  let id = 0;
  let failed = 0;
  const summary = await autocannonLoad({
    url: mcp === null ? `${url}/healthz` : `${url}/mcp`,
    connections: options.connections,
    seconds: options.seconds,
    ...(mcp === null
      ? {}
      : {
          headers: { ...HEADERS, "mcp-session-id": mcp.session, "mcp-protocol-version": PROTOCOL_VERSION },
          nextBody: () => JSON.stringify({ jsonrpc: "2.0", id: ++id, method: "tools/call", params: { name: mcp.tool, arguments: {} } }),
          onAnswer: (status: number, body: string) => {
            if (status !== 200 || body.includes('"isError":true')) failed++;
          },
        }),
  });
  return { callsPerSecond: summary.requestsPerSecond, latencyP50Ms: summary.latencyP50Ms, latencyP99Ms: summary.latencyP99Ms, failed: mcp === null ? summary.non2xx : failed };
}

async function load(resources: Resources, url: string, options: McpOptions, mcp: { session: string; tool: string } | null): Promise<Rate> {
  if (options.loadGenerator === "autocannon") return autocannon(url, options, mcp);
  const args = ["wrk", "-t2", `-c${options.connections}`, `-d${options.seconds}s`, "--timeout", "10s"];
  if (mcp !== null) args.push("-s", join(import.meta.dir, "mcp.lua"), `${url}/mcp`);
  else args.push("--latency", `${url}/healthz`);
  const env = cleanEnv(mcp === null ? {} : { WG_MCP_SESSION: mcp.session, WG_MCP_VERSION: PROTOCOL_VERSION, WG_MCP_TOOL: mcp.tool });
  const child = resources.track(Bun.spawn(args, { env, stdout: "pipe", stderr: "pipe" }));
  const [code, out] = await Promise.all([child.exited, new Response(child.stdout).text()]);
  if (code !== 0) throw new Error(`wrk failed (exit ${code}):\n${out}`);
  if (mcp === null) {
    const summary = parseWrkSummary(out);
    return { callsPerSecond: summary.requestsPerSecond, latencyP50Ms: summary.latencyP50Ms, latencyP99Ms: summary.latencyP99Ms, failed: summary.non2xx };
  }
  const line = out.split("\n").find((l) => l.startsWith("WRK_RESULT "));
  if (line === undefined) throw new Error(`wrk printed no result:\n${out}`);
  const r = JSON.parse(line.slice("WRK_RESULT ".length)) as Record<string, number>;
  return {
    callsPerSecond: Math.round(r.requests! / (r.durationUs! / 1e6)),
    latencyP50Ms: round(r.latencyP50Us! / 1000, 2),
    latencyP99Ms: round(r.latencyP99Us! / 1000, 2),
    failed: r.failed!, // mcp.lua counts every non-200 answer among its failures already
  };
}

async function measureBaseline(resources: Resources, options: McpOptions): Promise<Rate> {
  const dir = resources.tempDir("mcp-baseline");
  const log = join(dir, "out.log");
  const child = resources.track(
    Bun.spawn([process.execPath, join(import.meta.dir, "mcp-baseline.ts")], { cwd: dir, env: cleanEnv({}), stdout: Bun.file(log), stderr: "inherit" }),
  );
  try {
    const url = await waitForListeningInFile(log, child, 10_000);
    return await load(resources, url, options, { session: await openSession(url, false), tool: "noop" });
  } finally {
    await stopProcess(child, 5_000);
  }
}

export async function measureMcp(resources: Resources, options: McpOptions): Promise<McpResult> {
  const before = await measureBaseline(resources, options);
  const dir = resources.tempDir("mcp");
  const { server, url } = await startLoadServer(resources, options.serverCommand, dir);
  let walletgate: Rate;
  let healthz: Rate;
  try {
    const session = await openSession(url, true);
    await load(resources, url, { ...options, seconds: 1 }, { session, tool: "wallet_get_balance" }); // warm-up
    walletgate = await load(resources, url, options, { session, tool: "wallet_get_balance" });
    healthz = await load(resources, url, options, null);
  } finally {
    await stopProcess(server, 10_000);
  }
  const after = await measureBaseline(resources, options);
  const mean = (a: number, b: number) => (a + b) / 2;
  const baseline: Rate = {
    callsPerSecond: Math.round(mean(before.callsPerSecond, after.callsPerSecond)),
    latencyP50Ms: round(mean(before.latencyP50Ms, after.latencyP50Ms), 2),
    latencyP99Ms: round(mean(before.latencyP99Ms, after.latencyP99Ms), 2),
    failed: before.failed + after.failed,
  };
  return {
    walletgate,
    baseline,
    baselineBeforeAfter: [before.callsPerSecond, after.callsPerSecond],
    healthz,
    ratioToBaseline: walletgate.callsPerSecond / baseline.callsPerSecond, // unrounded: the verdict is on it
    ratioToHealthz: walletgate.callsPerSecond / healthz.callsPerSecond,
  };
}
