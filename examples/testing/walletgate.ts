// Starts a real walletgate for your app's `bun test` suite: the embedded ledger, a fresh DATA_DIR, a free
// port. Copy this file into your project. WALLETGATE_BIN names the executable (default: `walletgate` on
// PATH); a checkout's `src/main.ts` is run with Bun.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";

export type Walletgate = {
  /** Where it listens, e.g. http://127.0.0.1:40123. */
  url: string;
  dataDir: string;
  /** A command on its DATA_DIR (`ledger airdrop …`), with `--json`: what it printed, parsed. */
  cli(...args: string[]): Promise<any>;
  /** Stops it (SIGTERM, a graceful stop) and deletes its DATA_DIR. */
  stop(): Promise<void>;
};

export async function startWalletgate(settings: Record<string, string> = {}): Promise<Walletgate> {
  const given = process.env.WALLETGATE_BIN ?? "walletgate";
  const bin = given.includes("/") ? resolve(given) : given; // it runs in DATA_DIR
  const command = bin.endsWith(".ts") ? [process.execPath, bin] : [bin];
  const dataDir = mkdtempSync(join(tmpdir(), "walletgate-"));
  // Not process.env: `bun test` has loaded your app's .env into it, and names such as BASE_URL or
  // DATABASE_URL mean something to walletgate too. Its working directory is DATA_DIR for the same reason
  // (walletgate reads the .env files of the directory it runs in).
  const env = { PATH: process.env.PATH ?? "/usr/bin:/bin", HOME: process.env.HOME ?? dataDir, DATA_DIR: dataDir, LOG_FORMAT: "json", ...settings };
  let proc: ReturnType<typeof spawnServe>;
  try {
    proc = spawnServe(command, dataDir, env);
  } catch (err) {
    rmSync(dataDir, { recursive: true, force: true }); // e.g. no such executable
    throw err;
  }
  // The address is in its `"msg":"listening"` log line. The log is read to its end (with `lines.next()`:
  // leaving a for-await loop would close the pipe, and the server would go on with its log dropped).
  const lines = logLines(proc.stdout);
  let url = "";
  const deadline = setTimeout(() => proc.kill("SIGKILL"), 30_000); // never started: do not hang the suite
  for (let next = await lines.next(); !next.done; next = await lines.next()) {
    if (next.value.includes('"msg":"listening"')) {
      url = JSON.parse(next.value).url;
      break;
    }
  }
  clearTimeout(deadline);
  if (url === "") {
    const code = await proc.exited;
    rmSync(dataDir, { recursive: true, force: true });
    throw new Error(`walletgate exited with ${code} before listening (its reason is above)`);
  }
  void (async () => {
    while (!(await lines.next()).done);
  })();
  return {
    url,
    dataDir,
    async cli(...args) {
      const run = Bun.spawn([...command, ...args, "--json"], { cwd: dataDir, env, stdout: "pipe", stderr: "pipe" });
      const [out, err, code] = await Promise.all([new Response(run.stdout).text(), new Response(run.stderr).text(), run.exited]);
      if (code !== 0) throw new Error(`walletgate ${args.join(" ")}: ${err.trim()}`);
      return JSON.parse(out);
    },
    async stop() {
      proc.kill("SIGTERM");
      await proc.exited;
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

function spawnServe(command: string[], dataDir: string, env: Record<string, string>) {
  return Bun.spawn([...command, "serve"], {
    cwd: dataDir,
    // PORT=0: a free port, so test files can run side by side. EXIT_WITH_PARENT: it stops by itself when
    // this process (the test runner) ends, killed or not. ALLOW_PRIVATE_NETWORK_TARGETS: webhooks may reach
    // your test's receiver.
    env: { PORT: "0", EXIT_WITH_PARENT: String(process.pid), ALLOW_PRIVATE_NETWORK_TARGETS: "true", ...env },
    stdout: "pipe",
    stderr: "inherit",
  });
}

async function* logLines(stdout: ReadableStream<Uint8Array>): AsyncGenerator<string> {
  const decoder = new TextDecoder();
  let buffered = "";
  for await (const chunk of stdout) {
    buffered += decoder.decode(chunk, { stream: true });
    for (let end = buffered.indexOf("\n"); end >= 0; end = buffered.indexOf("\n")) {
      yield buffered.slice(0, end);
      buffered = buffered.slice(end + 1);
    }
  }
}
