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
  const proc = Bun.spawn([...command, "serve"], {
    cwd: dataDir,
    // PORT=0: a free port, so test files can run side by side. EXIT_WITH_PARENT: it stops by itself when
    // the test runner is killed. ALLOW_PRIVATE_NETWORK_TARGETS: webhooks may reach your test's receiver.
    env: { PORT: "0", EXIT_WITH_PARENT: "true", ALLOW_PRIVATE_NETWORK_TARGETS: "true", ...env },
    stdout: "pipe",
    stderr: "inherit",
  });
  // The address is in its `"msg":"listening"` log line; the log is read to its end so the pipe never fills.
  const lines = (async function* () {
    let buffered = "";
    for await (const chunk of proc.stdout) {
      buffered += new TextDecoder().decode(chunk);
      for (let end = buffered.indexOf("\n"); end >= 0; end = buffered.indexOf("\n")) {
        yield buffered.slice(0, end);
        buffered = buffered.slice(end + 1);
      }
    }
  })();
  let url = "";
  for await (const line of lines) {
    if (line.includes('"msg":"listening"')) {
      url = JSON.parse(line).url;
      break;
    }
  }
  if (url === "") {
    rmSync(dataDir, { recursive: true, force: true });
    throw new Error(`walletgate exited with ${await proc.exited} before listening (its reason is above)`);
  }
  void (async () => {
    for await (const _ of lines);
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
