// Spawns the real server (`bun src/main.ts serve`) on port 0 with its own DATA_DIR, and cleans up.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Subprocess } from "bun";
import { Database } from "bun:sqlite";

const ROOT = join(import.meta.dir, "../..");

export type TestServer = {
  url: string;
  /** The server's process id. */
  pid: number;
  dataDir: string;
  env: Record<string, string>;
  /** Everything the server printed so far. */
  output(): string;
  /** SIGTERM (or `signal`) and wait; resolves with the exit code. */
  stop(signal?: "SIGTERM" | "SIGINT"): Promise<number>;
  /** SIGKILL: no chance to flush or close anything. */
  kill9(): Promise<void>;
  /** Starts a new process on the same DATA_DIR (and env, with overrides). */
  restart(overrides?: Record<string, string>): Promise<TestServer>;
  /** Stops the process and deletes its DATA_DIR. */
  dispose(): Promise<void>;
};

const live = new Set<Subprocess>();
process.on("exit", () => {
  for (const p of live) p.kill(9);
});

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * The server's JSON log lines once `predicate` holds for them (or `timeoutMs` passes): request lines reach
 * the pipe a little after their responses (the log sink writes every 50 ms).
 */
export async function logged(server: TestServer, predicate: (lines: Record<string, unknown>[]) => boolean, timeoutMs = 2000): Promise<Record<string, unknown>[]> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const lines = server
      .output()
      .split("\n")
      .filter((line) => line.startsWith("{"))
      .map((line) => JSON.parse(line) as Record<string, unknown>);
    if (predicate(lines) || Date.now() > deadline) return lines;
    await sleep(25);
  }
}

export function tempDir(prefix = "walletgate-test-"): string {
  return mkdtempSync(join(tmpdir(), prefix));
}

/**
 * The database of a DATA_DIR a server may be running on, opened as every process of ours opens it: a write
 * waits up to 5 s for the server's own write to end instead of failing with SQLITE_BUSY.
 */
export function openServerDatabase(dataDir: string): Database {
  const db = new Database(join(dataDir, "walletgate.db"));
  db.run("PRAGMA busy_timeout = 5000");
  return db;
}

/** Whether `command` runs and exits 0 on this machine (for tests that need a privilege or a tool). */
export function commandSucceeds(command: string[]): boolean {
  try {
    return Bun.spawnSync(command).exitCode === 0;
  } catch {
    return false;
  }
}

/** Runs the CLI to completion: `walletgate <args>`. */
/** `walletgate <args>` from the checkout; `prefix` runs it under another program (e.g. `unshare`). */
export async function runCli(args: string[], env: Record<string, string> = {}, prefix: string[] = []) {
  const proc = Bun.spawn([...prefix, process.execPath, join(ROOT, "src/main.ts"), ...args], {
    cwd: ROOT,
    env: { PATH: process.env.PATH ?? "", HOME: process.env.HOME ?? "/tmp", LOG_FORMAT: "json", ...env },
    stdout: "pipe",
    stderr: "pipe",
    // A command that should have exited but did not (a `serve` that started) fails its test, not hangs it.
    timeout: 30_000,
    killSignal: "SIGKILL",
  });
  const [stdout, stderr, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
  return { stdout, stderr, code };
}

/** `prefix` runs the server under another program that ends by exec'ing it (e.g. `unshare`), so it keeps the pid. */
export async function startTestServer(env: Record<string, string> = {}, givenDataDir?: string, prefix: string[] = []): Promise<TestServer> {
  const dataDir = givenDataDir ?? tempDir();
  const fullEnv: Record<string, string> = {
    PATH: process.env.PATH ?? "",
    HOME: process.env.HOME ?? "/tmp",
    PORT: "0",
    HOST: "127.0.0.1",
    DATA_DIR: dataDir,
    LOG_FORMAT: "json",
    LOG_LEVEL: "info",
    ...env,
  };
  const proc = Bun.spawn([...prefix, process.execPath, join(ROOT, "src/main.ts"), "serve"], {
    cwd: ROOT,
    env: fullEnv,
    stdout: "pipe",
    stderr: "pipe",
  });
  live.add(proc);
  let out = "";
  const listening = new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`server did not start:\n${out}`)), 15_000);
    const decoder = new TextDecoder();
    (async () => {
      for await (const chunk of proc.stdout as ReadableStream<Uint8Array>) {
        out += decoder.decode(chunk);
        const line = out.split("\n").find((l) => l.includes('"msg":"listening"'));
        if (line) {
          clearTimeout(timer);
          resolve(JSON.parse(line).url);
        }
      }
      clearTimeout(timer);
      reject(new Error(`server exited before listening:\n${out}\n${await new Response(proc.stderr as ReadableStream).text()}`));
    })().catch(reject);
  });
  let url: string;
  try {
    url = await listening;
  } catch (err) {
    // Nobody gets a TestServer to dispose of: the process and a DATA_DIR made here go now.
    proc.kill(9);
    await proc.exited;
    live.delete(proc);
    if (givenDataDir === undefined) rmSync(dataDir, { recursive: true, force: true });
    throw err;
  }
  const server: TestServer = {
    url,
    pid: proc.pid,
    dataDir,
    env: fullEnv,
    output: () => out,
    async stop(signal = "SIGTERM") {
      proc.kill(signal);
      const code = await proc.exited;
      live.delete(proc);
      return code;
    },
    async kill9() {
      proc.kill(9);
      await proc.exited;
      live.delete(proc);
    },
    async restart(overrides = {}) {
      if (!proc.killed && proc.exitCode === null) await server.stop();
      const next = { ...env, ...overrides };
      return startTestServer(next, dataDir);
    },
    async dispose() {
      if (proc.exitCode === null && !proc.killed) {
        proc.kill(9);
        await proc.exited;
      }
      live.delete(proc);
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
  return server;
}
