// Row "compiled binary: start to first /healthz 200" against a compiled Bun hello server, median of N runs.
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { cleanEnv, median, round, stopProcess, waitForListeningOnStream, type Resources } from "./support.ts";

export type StartupResult = {
  runs: number;
  helloMs: number;
  migratedMs: number;
  firstRunMs: number;
  migratedRatio: number;
  firstRunRatio: number;
  samples: { helloMs: number[]; migratedMs: number[]; firstRunMs: number[] };
};

const START_TIMEOUT_MS = 10_000;

/** Compiles bench/hello-server.ts with `bun build --compile` into `dir`. */
async function compileHello(dir: string): Promise<string> {
  const outfile = join(dir, "hello");
  const build = Bun.spawn(
    [process.execPath, "build", "--compile", "--minify", join(import.meta.dir, "hello-server.ts"), "--outfile", outfile],
    { stdout: "pipe", stderr: "pipe" },
  );
  const [code, stderr] = await Promise.all([build.exited, new Response(build.stderr).text()]);
  if (code !== 0) throw new Error(`compiling the hello server failed:\n${stderr}`);
  return outfile;
}

/** Spawn → listening line on stdout → GET /healthz answered 200. Milliseconds. */
async function timeToFirstOk(resources: Resources, argv: string[], env: Record<string, string>, cwd: string): Promise<number> {
  const started = performance.now();
  const child = resources.track(Bun.spawn(argv, { cwd, env, stdin: "ignore", stdout: "pipe", stderr: "inherit" }));
  try {
    const url = await waitForListeningOnStream(child, START_TIMEOUT_MS);
    const response = await fetch(`${url}/healthz`);
    await response.arrayBuffer();
    if (response.status !== 200) throw new Error(`${argv[0]}: /healthz answered ${response.status}`);
    return performance.now() - started;
  } finally {
    await stopProcess(child, 2_000);
  }
}

/** `serverCommand` is walletgate's argv up to and including `serve` (absolute paths: it runs in a temp dir). */
export async function measureStartup(resources: Resources, runs: number, serverCommand: string[]): Promise<StartupResult> {
  const work = resources.tempDir("startup");
  const hello = await compileHello(work);
  const migratedDir = join(work, "migrated");
  const serverEnv = (dataDir: string) => cleanEnv({ PORT: "0", DATA_DIR: dataDir, LOG_FORMAT: "json", LOG_LEVEL: "info" });
  const helloRun = () => timeToFirstOk(resources, [hello], cleanEnv({}), work);
  const migratedRun = () => timeToFirstOk(resources, serverCommand, serverEnv(migratedDir), work);
  let fresh = 0;
  const firstRun = () => {
    const dataDir = join(work, `empty-${fresh++}`);
    mkdirSync(dataDir);
    return timeToFirstOk(resources, serverCommand, serverEnv(dataDir), work);
  };

  // Warm-up, not counted: pages the executables in, and migrates the "already migrated" data dir
  // (database, schema and generated secrets).
  await helloRun();
  await migratedRun();
  await firstRun();

  const samples = { helloMs: [] as number[], migratedMs: [] as number[], firstRunMs: [] as number[] };
  // Interleaved, so a slow stretch of the machine hits every kind alike.
  for (let i = 0; i < runs; i++) {
    samples.helloMs.push(await helloRun());
    samples.migratedMs.push(await migratedRun());
    samples.firstRunMs.push(await firstRun());
  }
  const helloMs = median(samples.helloMs);
  const migratedMs = median(samples.migratedMs);
  const firstRunMs = median(samples.firstRunMs);
  const r = (xs: number[]) => xs.map((x) => round(x, 1));
  return {
    runs,
    helloMs: round(helloMs, 1),
    migratedMs: round(migratedMs, 1),
    firstRunMs: round(firstRunMs, 1),
    migratedRatio: migratedMs / helloMs, // unrounded: the verdict is on it
    firstRunRatio: firstRunMs / helloMs,
    samples: { helloMs: r(samples.helloMs), migratedMs: r(samples.migratedMs), firstRunMs: r(samples.firstRunMs) },
  };
}
