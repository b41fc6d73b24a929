// `npm run bench`: builds dist/walletgate if missing, measures rows of operations.md "Performance" against
// their baselines in the same run, prints a table and writes bench/results.json.
//
// Options: --only signin|startup|mcp|access|memory   --seconds 5 (load)   --connections 48
//          --capacity-connections 256 (a second sign-in load, for information)   --runs 10 (start-ups)
//          --baseline-seconds 2    --rebuild
//          --server "/abs/cmd serve"  (default: dist/walletgate serve; e.g. a scratch build, or bun --cpu-prof-md)
// BENCH_LOAD_GENERATOR=autocannon forces the load generator used when wrk is not installed.
import { existsSync, readdirSync, statSync, writeFileSync } from "node:fs";
import { cpus, release } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { buildExecutable } from "../scripts/build.ts";
import { measureSignIn, type SignInResult } from "./sign-in.ts";
import { measureStartup, type StartupResult } from "./startup.ts";
import { measureMcp, type McpResult } from "./mcp.ts";
import { measureAccessCheck, type AccessResult } from "./access-check.ts";
import { measureMemory, type MemoryResult } from "./memory.ts";
import { BINARY, REPO_ROOT, createResources } from "./support.ts";

const TARGETS = { signInRatioAtLeast: 0.5, startupRatioAtMost: 5, mcpRatioAtLeast: 0.8, accessRatioAtLeast: 0.8, accessP99RatioAtMost: 1.5, rssMbAtMost: 300 };

type Row = { figure: string; measured: string; baseline: string; ratio: string; target: string; verdict: string };

/** `value` with two decimals, or as many more as it takes not to read as `target` when it is not (0.4999 is not 0.50). */
function near(value: number, target: number, decimals = 2): string {
  let text = value.toFixed(decimals);
  for (let d = decimals + 1; value !== target && Number(text) === target && d <= 12; d++) text = value.toFixed(d);
  return text;
}

function formatRatio(ratio: number, target: number): string {
  return `${near(ratio, target)}x`;
}

function formatRate(perSecond: number): string {
  return `${Math.round(perSecond).toLocaleString("en-US")}/s`;
}

function rows(
  signIn: SignInResult | null,
  startup: StartupResult | null,
  mcp: McpResult | null,
  access: AccessResult | null,
  memory: MemoryResult | null,
): Row[] {
  const out: Row[] = [];
  if (access !== null) {
    out.push({
      figure: "POST /public/access/check req/s (50 conns)",
      measured: formatRate(access.walletgate.requestsPerSecond),
      baseline: `Elysia + 1 PK lookup ${formatRate(access.baseline.requestsPerSecond)}`,
      ratio: formatRatio(access.throughputRatio, TARGETS.accessRatioAtLeast),
      target: `>= ${TARGETS.accessRatioAtLeast}x`,
      verdict: access.throughputRatio >= TARGETS.accessRatioAtLeast ? "met" : "MISSED",
    });
    out.push({
      figure: "  its p99 latency",
      measured: `${access.walletgate.latencyP99Ms.toFixed(2)} ms`,
      baseline: `${access.baseline.latencyP99Ms.toFixed(2)} ms`,
      ratio: formatRatio(access.p99Ratio, TARGETS.accessP99RatioAtMost),
      target: `<= ${TARGETS.accessP99RatioAtMost}x`,
      verdict: access.p99Ratio <= TARGETS.accessP99RatioAtMost ? "met" : "MISSED",
    });
  }
  if (mcp !== null) {
    out.push({
      figure: "MCP tools/call wallet_get_balance, one open session",
      measured: formatRate(mcp.walletgate.callsPerSecond),
      baseline: `bare SDK no-op ${formatRate(mcp.baseline.callsPerSecond)}`,
      ratio: formatRatio(mcp.ratioToBaseline, TARGETS.mcpRatioAtLeast),
      target: `>= ${TARGETS.mcpRatioAtLeast}x`,
      verdict: mcp.ratioToBaseline >= TARGETS.mcpRatioAtLeast ? "met" : "MISSED",
    });
    out.push({
      figure: "  the same, against this binary's /healthz",
      measured: formatRate(mcp.walletgate.callsPerSecond),
      baseline: `/healthz ${formatRate(mcp.healthz.callsPerSecond)}`,
      ratio: `${mcp.ratioToHealthz.toFixed(2)}x`,
      target: "-",
      verdict: "",
    });
  }
  if (signIn !== null) {
    out.push({
      figure: `POST /auth/verify sign-ins/s (${signIn.loadGenerator}, ${signIn.connections} conns; p50 ${signIn.load.latencyP50Ms.toFixed(1)} ms)`,
      measured: formatRate(signIn.signInsPerSecond),
      baseline: `native verify ${formatRate(signIn.nativeVerifiesPerSecond)}`,
      ratio: formatRatio(signIn.ratio, TARGETS.signInRatioAtLeast),
      target: `>= ${TARGETS.signInRatioAtLeast}x`,
      verdict: signIn.ratio >= TARGETS.signInRatioAtLeast ? "met" : "MISSED",
    });
    out.push({
      figure: `  capacity: the same at ${signIn.capacity.connections} conns (p50 ${signIn.capacity.load.latencyP50Ms.toFixed(1)} ms)`,
      measured: formatRate(signIn.capacity.signInsPerSecond),
      baseline: `native verify ${formatRate(signIn.nativeVerifiesPerSecond)}`,
      ratio: `${signIn.capacity.ratio.toFixed(2)}x`,
      target: "-",
      verdict: "",
    });
  }
  if (memory !== null) {
    const mb = memory.rssAfterSessionsKb / 1024;
    out.push({
      figure: `RSS after ${memory.signIns.toLocaleString("en-US")} sign-ins + ${memory.sessions.toLocaleString("en-US")} idle MCP sessions`,
      measured: `${near(mb, TARGETS.rssMbAtMost, 0)} MB`,
      baseline: `at start ${(memory.rssAtStartKb / 1024).toFixed(0)} MB`,
      ratio: "-",
      target: `<= ${TARGETS.rssMbAtMost} MB`,
      verdict: mb <= TARGETS.rssMbAtMost ? "met" : "MISSED",
    });
    out.push({
      figure: "  per idle MCP session",
      measured: `${memory.kbPerSession} KB`,
      baseline: `after sign-ins ${(memory.rssAfterSignInsKb / 1024).toFixed(0)} MB`,
      ratio: "-",
      target: "-",
      verdict: "",
    });
  }
  if (startup !== null) {
    const baseline = `hello ${startup.helloMs.toFixed(1)} ms`;
    for (const [figure, ms, ratio] of [
      ["start -> first /healthz 200, migrated DATA_DIR", startup.migratedMs, startup.migratedRatio],
      ["start -> first /healthz 200, empty DATA_DIR", startup.firstRunMs, startup.firstRunRatio],
    ] as const) {
      out.push({
        figure: `${figure} (median of ${startup.runs})`,
        measured: `${ms.toFixed(1)} ms`,
        baseline,
        ratio: formatRatio(ratio, TARGETS.startupRatioAtMost),
        target: `<= ${TARGETS.startupRatioAtMost}x`,
        verdict: ratio <= TARGETS.startupRatioAtMost ? "met" : "MISSED",
      });
    }
  }
  return out;
}

function printTable(table: Row[]): void {
  const header: Row = { figure: "figure", measured: "measured", baseline: "baseline (same run)", ratio: "ratio", target: "target", verdict: "" };
  const keys = Object.keys(header) as (keyof Row)[];
  const widths = keys.map((k) => Math.max(...[header, ...table].map((r) => r[k].length)));
  const line = (r: Row) => keys.map((k, i) => r[k].padEnd(widths[i]!)).join("  ").trimEnd();
  process.stdout.write(`\n${line(header)}\n${widths.map((w) => "-".repeat(w)).join("  ")}\n${table.map(line).join("\n")}\n`);
}

function positive(name: string, raw: string): number {
  const value = Number(raw);
  if (!Number.isFinite(value) || value <= 0) throw new Error(`--${name} must be a positive number, got "${raw}"`);
  return value;
}

/** Newest modification time (ms) of any file under `dir`. */
function newestMtimeMs(dir: string): number {
  let newest = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true, recursive: true })) {
    if (entry.isFile()) newest = Math.max(newest, statSync(join(entry.parentPath, entry.name)).mtimeMs);
  }
  return newest;
}

async function main(): Promise<number> {
  const { values } = parseArgs({
    args: Bun.argv.slice(2),
    options: {
      only: { type: "string" },
      seconds: { type: "string", default: "5" },
      connections: { type: "string", default: "48" },
      "capacity-connections": { type: "string", default: "256" },
      runs: { type: "string", default: "10" },
      "baseline-seconds": { type: "string", default: "2" },
      rebuild: { type: "boolean", default: false },
      server: { type: "string" },
    },
  });
  const only = values.only;
  const seconds = positive("seconds", values.seconds);
  const connections = Math.round(positive("connections", values.connections));
  const capacityConnections = Math.round(positive("capacity-connections", values["capacity-connections"]));
  const runs = Math.round(positive("runs", values.runs));
  const baselineSeconds = positive("baseline-seconds", values["baseline-seconds"]);
  if (only !== undefined && !["signin", "startup", "mcp", "access", "memory"].includes(only)) {
    throw new Error(`--only must be signin, startup, mcp, access or memory, got ${only}`);
  }

  const resources = createResources();
  const interrupted = (signal: NodeJS.Signals) => {
    process.stderr.write(`\nbench: ${signal}, cleaning up\n`);
    void resources.close().finally(() => process.exit(130));
  };
  process.once("SIGINT", interrupted);
  process.once("SIGTERM", interrupted);

  const started = performance.now();
  try {
    const serverCommand = values.server?.split(" ").filter((part) => part !== "") ?? [BINARY, "serve"];
    if (values.server === undefined && (values.rebuild || !existsSync(BINARY))) {
      process.stdout.write(`building ${BINARY} ...\n`);
      const built = await buildExecutable();
      process.stdout.write(`built ${built.outfile} (${(built.bytes / 1024 / 1024).toFixed(1)} MB)\n`);
    } else if (values.server === undefined && statSync(BINARY).mtimeMs < newestMtimeMs(join(REPO_ROOT, "src"))) {
      process.stderr.write(`bench: note: ${BINARY} is older than src/; add --rebuild to measure the current code\n`);
    }
    const loadGenerator =
      process.env.BENCH_LOAD_GENERATOR === "autocannon" || Bun.which("wrk") === null ? ("autocannon" as const) : ("wrk" as const);

    let startup: StartupResult | null = null;
    if (only === undefined || only === "startup") {
      process.stdout.write(`start-up: compiled hello vs ${serverCommand.join(" ")}, ${runs} runs each ...\n`);
      startup = await measureStartup(resources, runs, serverCommand);
    }
    let mcp: McpResult | null = null;
    if (only === undefined || only === "mcp") {
      process.stdout.write(`mcp: bare SDK baseline, walletgate tools/call and /healthz, ${seconds} s each ...\n`);
      mcp = await measureMcp(resources, { serverCommand, seconds, connections, loadGenerator });
      if (mcp.walletgate.failed > 0 || mcp.baseline.failed > 0) {
        process.stderr.write(`bench: WARNING failed MCP calls during the load: walletgate ${mcp.walletgate.failed}, baseline ${mcp.baseline.failed}\n`);
      }
    }
    let access: AccessResult | null = null;
    if (only === undefined || only === "access") {
      process.stdout.write(`access check: Elysia + one primary-key lookup and walletgate in turn, ${seconds} s each ...\n`);
      access = await measureAccessCheck(resources, { serverCommand, seconds, loadGenerator });
      if (access.walletgate.non2xx > 0 || access.baseline.non2xx > 0) {
        process.stderr.write(`bench: WARNING non-2xx answers: walletgate ${access.walletgate.non2xx}, baseline ${access.baseline.non2xx}\n`);
      }
    }
    let signIn: SignInResult | null = null;
    if (only === undefined || only === "signin") {
      process.stdout.write(
        `sign-in: native baseline ${baselineSeconds} s, ${loadGenerator} for ${seconds} s at ${connections} connections, ` +
          `again at ${capacityConnections}, native baseline again ...\n`,
      );
      signIn = await measureSignIn(resources, { serverCommand, seconds, connections, capacityConnections, loadGenerator, baselineSeconds });
      for (const [which, load] of [[`${connections}-connection (the row's)`, signIn.load], [`${capacityConnections}-connection (capacity)`, signIn.capacity.load]] as const) {
        if (load.exhaustedRequests > 0) {
          process.stderr.write(`bench: WARNING the ${which} sign-in load ran out of signed bodies (${load.exhaustedRequests} extra requests); its rate is a lower bound\n`);
        } else if (load.non2xx > 0 || load.socketErrors > 0) {
          process.stderr.write(`bench: WARNING ${load.non2xx} non-2xx answers and ${load.socketErrors} socket errors during the ${which} sign-in load\n`);
        }
      }
    }

    let memory: MemoryResult | null = null;
    if (only === undefined || only === "memory") {
      process.stdout.write("memory: 10,000 sign-ins, then 1,000 idle MCP sessions ...\n");
      memory = await measureMemory(resources, { serverCommand, signIns: 10_000, sessions: 1_000 });
    }

    const table = rows(signIn, startup, mcp, access, memory);
    printTable(table);
    const results = {
      date: new Date().toISOString(),
      command: `npm run bench${Bun.argv.length > 2 ? ` -- ${Bun.argv.slice(2).join(" ")}` : ""}`,
      machine: { cpus: cpus().length, cpu: cpus()[0]?.model ?? "unknown", kernel: release(), bun: Bun.version },
      loadGenerator,
      server: serverCommand.join(" "),
      targets: TARGETS,
      signIn,
      startup,
      mcp,
      access,
      memory,
      table,
      benchSeconds: Math.round((performance.now() - started) / 100) / 10,
    };
    writeFileSync(join(import.meta.dir, "results.json"), `${JSON.stringify(results, null, 2)}\n`);
    process.stdout.write(`\nwrote bench/results.json in ${results.benchSeconds} s\n`);
    return 0;
  } finally {
    await resources.close();
  }
}

main().then(
  (code) => process.exit(code),
  (err) => {
    process.stderr.write(`bench: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    process.exit(1);
  },
);
