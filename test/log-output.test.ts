// The server's log is its standard output. When that cannot be written any more (the reader of a pipe
// went away, as with `walletgate serve | head`, or stays without reading), the server drops lines and goes on answering.
import { expect, test } from "bun:test";
import { readFileSync, rmSync } from "node:fs";
import { join } from "node:path";
import { tempDir } from "./helpers/server.ts";
import { newWallet, signIn } from "./helpers/wallet.ts";

const ROOT = join(import.meta.dir, "..");

/** `walletgate serve` from source with its log on a pipe, read up to the listening line; its URL. */
async function serveOnPipe(dataDir: string) {
  const proc = Bun.spawn([process.execPath, join(ROOT, "src/main.ts"), "serve"], {
    cwd: ROOT,
    env: { PATH: process.env.PATH ?? "", HOME: process.env.HOME ?? "/tmp", PORT: "0", HOST: "127.0.0.1", DATA_DIR: dataDir, LOG_FORMAT: "json" },
    stdout: "pipe",
    stderr: "pipe",
  });
  const reader = (proc.stdout as ReadableStream<Uint8Array>).getReader();
  let out = "";
  while (!out.includes('"msg":"listening"')) {
    const { value, done } = await reader.read();
    if (done) throw new Error(`server exited before listening:\n${out}`);
    out += new TextDecoder().decode(value);
  }
  const url = JSON.parse(out.split("\n").find((l) => l.includes('"msg":"listening"'))!).url as string;
  return { proc, reader, url };
}


test("the log's reader goes away: every request is still answered, stderr says so once, SIGTERM exits 0", async () => {
  const dataDir = tempDir();
  const { proc, reader, url } = await serveOnPipe(dataDir);
  try {
    await reader.cancel(); // the pipe's reading end closes: the next log write fails (EPIPE)

    const statuses: number[] = [];
    for (let i = 0; i < 40; i++) {
      statuses.push((await fetch(`${url}/healthz`)).status);
      await Bun.sleep(5); // across several of the log's flushes
    }
    expect(statuses).toEqual(Array(40).fill(200));
    // A burst: its lines go out as one large write, which Bun refuses later, not at once (a rejected Promise).
    for (let round = 0; round < 3; round++) {
      const burst = await Promise.all(Array.from({ length: 200 }, () => fetch(`${url}/healthz`).then((r) => r.status)));
      expect(burst).toEqual(Array(200).fill(200));
      await Bun.sleep(50);
    }
    expect((await signIn(url, newWallet())).sessionToken).toBeString(); // a write path too
    expect(proc.exitCode).toBeNull();

    proc.kill("SIGTERM");
    expect(await proc.exited).toBe(0);
    const stderr = await new Response(proc.stderr as ReadableStream).text();
    expect(stderr.match(/walletgate: the log cannot be written \(.*\); its lines are dropped until it can/g)?.length).toBe(1);
  } finally {
    if (proc.exitCode === null) proc.kill(9);
    await proc.exited;
    rmSync(dataDir, { recursive: true, force: true });
  }
}, 60_000);

test("a reader that stays but never reads: memory stays bounded, stderr says lines are dropped, SIGTERM still exits 0", async () => {
  const dataDir = tempDir();
  const { proc, reader, url } = await serveOnPipe(dataDir);
  try {
    // From here on nothing reads the pipe: requests with 4 KB paths, ~20 MB of request lines.
    const rss = () => Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${proc.pid}/status`, "utf8"))![1]) / 1024;
    for (let i = 0; i < 5000; i += 50) {
      const statuses = await Promise.all(Array.from({ length: 50 }, () => fetch(`${url}/nope/${"p".repeat(4000)}`).then((r) => r.status)));
      expect(statuses.every((s) => s === 404)).toBe(true);
    }
    expect(rss()).toBeLessThan(400); // the lines beyond the bound were dropped, not held
    const started = performance.now();
    proc.kill("SIGTERM");
    expect(await proc.exited).toBe(0);
    expect(performance.now() - started).toBeLessThan(8_000); // not held by the log nobody reads
    const stderr = await new Response(proc.stderr as ReadableStream).text();
    expect(stderr).toContain("walletgate: the log's reader is not keeping up; lines are dropped until it does");
  } finally {
    if (proc.exitCode === null) proc.kill(9);
    await proc.exited;
    rmSync(dataDir, { recursive: true, force: true });
  }
}, 60_000);
