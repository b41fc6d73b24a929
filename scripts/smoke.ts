// Smoke-tests a built binary from an empty folder: its version line, start, /healthz, the pages in Chromium, one sign-in, /mcp,
// the ledger (readiness and a CLI airdrop, which load @solana/web3.js from inside the binary), stop. `bun scripts/smoke.ts dist/walletgate`
import { copyFileSync, mkdtempSync, rmSync, readdirSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { launchChromium } from "../test/helpers/browser.ts";
import { latestOf } from "../src/db/migrate.ts";
import { sourceCommit } from "./build.ts";
import pkg from "../package.json" with { type: "json" };

const binary = resolve(process.argv[2] ?? "dist/walletgate");
const dir = mkdtempSync(join(tmpdir(), "walletgate-smoke-"));
const fail = (why: string): never => {
  throw new Error(`smoke test failed: ${why}`);
};

/**
 * The pages as a browser runs them from the executable: their scripts are chunks of the executable's own
 * bundle (some shared with the server's code), so each page is opened in Chromium and must render what its
 * script draws, with no script error and no asset missing. Without Chromium (outside CI) this is skipped.
 */
async function pagesInChromium(url: string): Promise<void> {
  const browser = await launchChromium();
  if (browser === null) {
    console.log("smoke test: no Chromium here, the pages were not opened in a browser");
    return;
  }
  try {
    const pages: [string, string][] = [
      ["/dashboard", "Connect wallet"],
      ["/pay/no-such-product", "This product does not exist."],
    ];
    for (const [path, drawn] of pages) {
      const page = await browser.newPage();
      const problems: string[] = [];
      page.on("pageerror", (err) => problems.push(`script error: ${err.message}`));
      page.on("requestfailed", (request) => problems.push(`request failed: ${request.url()}`));
      page.on("response", (response) => {
        const type = response.request().resourceType();
        if ((type === "script" || type === "stylesheet") && response.status() !== 200) problems.push(`${response.url()} answered ${response.status()}`);
      });
      await page.goto(`${url}${path}`);
      const shown = await page
        .getByText(drawn, { exact: true })
        .first()
        .waitFor({ timeout: 15_000 })
        .then(() => true, () => false);
      await page.close();
      if (!shown || problems.length > 0) fail(`${path} in Chromium: ${shown ? "" : `"${drawn}" was never drawn; `}${problems.join("; ")}`);
    }
  } finally {
    await browser.close();
  }
}

let proc: ReturnType<typeof Bun.spawn> | null = null;
/** All the server writes on stderr, read from its start (so the pipe never fills); whole once it has exited. */
let serverStderr: Promise<string> = Promise.resolve("");
try {
  copyFileSync(binary, join(dir, "walletgate"));
  // The version line names the schema and the commit the executable was built from (this checkout's).
  const version = Bun.spawnSync([join(dir, "walletgate"), "--version"], { cwd: dir, env: { PATH: "/usr/bin:/bin" } }).stdout.toString().trim();
  const commit = sourceCommit();
  const expected = `${pkg.version} (schema ${latestOf()}, ${commit === "" ? "built outside git" : `commit ${commit}`})`;
  if (version !== expected) fail(`--version printed "${version}", not "${expected}"`);
  const started = performance.now();
  // Only PATH is passed: nothing from this checkout (no node_modules, no .env) is visible to it.
  proc = Bun.spawn([join(dir, "walletgate"), "serve"], {
    cwd: dir,
    env: { PATH: "/usr/bin:/bin", PORT: "0", LOG_FORMAT: "json" },
    stdout: "pipe",
    // Nothing is written there when all is well (the log is on stdout): it is checked at the end.
    stderr: "pipe",
  });
  serverStderr = new Response(proc.stderr as ReadableStream<Uint8Array>).text();
  let out = "";
  const decoder = new TextDecoder();
  const reader = (proc.stdout as ReadableStream<Uint8Array>).getReader();
  let url = "";
  const deadline = Date.now() + 15_000;
  while (url === "" && Date.now() < deadline) {
    const { done, value } = await reader.read();
    if (done) fail(`exited before listening (its stderr is shown above):\n${out}`);
    out += decoder.decode(value);
    const line = out.split("\n").find((l) => l.includes('"msg":"listening"'));
    if (line) url = JSON.parse(line).url;
  }
  if (url === "") fail("no listening line within 15 s");
  // An empty folder: the binary writes the database it carries (src/db/fresh.ts), it does not migrate.
  if (!out.includes('"msg":"database created","version":')) fail(`the first start did not create the database from its image:\n${out}`);
  const health = await fetch(`${url}/healthz`);
  if (health.status !== 200) fail(`/healthz answered ${health.status}`);
  // The pages are embedded: the dashboard's HTML, and the script it loads, come from the binary alone.
  const page = await fetch(`${url}/dashboard`);
  const html = await page.text();
  const script = /<script[^>]+src="([^"]+)"/.exec(html)?.[1];
  if (page.status !== 200 || script === undefined) fail(`/dashboard answered ${page.status} without its script`);
  const bundle = await fetch(new URL(script!, url));
  if (bundle.status !== 200 || !(await bundle.text()).includes("Connect wallet")) fail(`the dashboard's script ${script} is missing`);
  // Served as from source: kept for good (the name changes with the content), under a valid entity tag.
  const etag = bundle.headers.get("etag") ?? "";
  if (bundle.headers.get("cache-control") !== "public, max-age=31536000, immutable" || !/^"[^"]+"$/.test(etag)) {
    fail(`the dashboard's script ${script} came with Cache-Control ${bundle.headers.get("cache-control")} and ETag ${etag}`);
  }
  const revalidated = await fetch(new URL(script!, url), { headers: { "if-none-match": etag } });
  if (revalidated.status !== 304) fail(`revalidating ${script} under its ETag answered ${revalidated.status}`);
  const startMs = performance.now() - started;
  // The OpenAPI document and its page are built on first request from lazily loaded modules.
  const openapi = await fetch(`${url}/openapi.json`);
  const document = openapi.status === 200 ? ((await openapi.json()) as { paths?: Record<string, unknown> }) : null;
  if (document?.paths?.["/auth/verify"] === undefined) fail(`/openapi.json answered ${openapi.status} without /auth/verify`);
  const docs = await fetch(`${url}/docs`);
  if (docs.status !== 200 || !(docs.headers.get("content-type") ?? "").startsWith("text/html")) fail(`/docs answered ${docs.status}`);

  await pagesInChromium(url);

  const example = Bun.spawnSync([process.execPath, join(import.meta.dir, "../examples/sign-in.ts"), url]);
  const signedIn = JSON.parse(example.stdout.toString());
  if (typeof signedIn.sessionToken !== "string") fail(`sign-in did not return a token: ${example.stdout}${example.stderr}`);
  const session = await fetch(`${url}/auth/session`, { headers: { authorization: `Bearer ${signedIn.sessionToken}` } });
  if (session.status !== 200) fail(`/auth/session answered ${session.status}`);
  const ready = (await (await fetch(`${url}/readyz`)).json()) as { checks?: { ledger?: string } };
  if (ready.checks?.ledger !== "ok") fail(`/readyz: ${JSON.stringify(ready)}`);

  // /mcp loads the MCP SDK and the tools from the executable on first use: the plain envelope and a real
  // MCP initialize must both work.
  const envelope = await fetch(`${url}/mcp`, {
    method: "POST",
    headers: { "content-type": "application/json", authorization: `Bearer ${signedIn.sessionToken}` },
    body: JSON.stringify({ tool: "wallet_get_balance" }),
  });
  const balance = (await envelope.json()) as { success?: boolean; data?: { address?: string } };
  if (envelope.status !== 200 || balance.data?.address !== signedIn.walletAddress) fail(`/mcp envelope: ${envelope.status} ${JSON.stringify(balance)}`);
  const init = await fetch(`${url}/mcp`, {
    method: "POST",
    headers: { "content-type": "application/json", accept: "application/json, text/event-stream" },
    body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "initialize", params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "smoke", version: "1" } } }),
  });
  if (init.status !== 200 || init.headers.get("mcp-session-id") === null) fail(`/mcp initialize: ${init.status} ${await init.text()}`);

  // The CLI beside the running server, on the same DATA_DIR: the embedded ledger's faucet.
  const airdrop = Bun.spawnSync([join(dir, "walletgate"), "ledger", "airdrop", "--to", signedIn.walletAddress, "--sol", "1", "--usdc", "5", "--json"], {
    cwd: dir,
    env: { PATH: "/usr/bin:/bin" },
  });
  const dropped = airdrop.exitCode === 0 ? (JSON.parse(airdrop.stdout.toString()) as { signatures: string[] }) : null;
  if (dropped?.signatures.length !== 2) fail(`ledger airdrop: exit ${airdrop.exitCode}\n${airdrop.stdout}${airdrop.stderr}`);
  if (airdrop.stderr.length > 0) fail(`ledger airdrop printed on stderr:\n${airdrop.stderr}`);

  proc.kill("SIGTERM");
  const code = await proc.exited;
  if (code !== 0) fail(`exit code ${code} after SIGTERM`);
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    out += decoder.decode(value);
  }
  // The embedded verification worker must have run: a failure is logged (and the work falls back).
  if (out.includes("verification worker failed")) fail(`the verification worker did not run:\n${out}`);
  if (!out.includes('"msg":"stopped"')) fail(`no clean stop in the log:\n${out}`);
  if ((await serverStderr).length > 0) fail("the server printed on stderr (shown above)");
  const files = readdirSync(join(dir, "data")).sort();
  if (!files.includes("walletgate.db")) fail(`no database in DATA_DIR: ${files.join(", ")}`);
  console.log(`smoke test passed: ${binary} started in ${startMs.toFixed(0)} ms, drew its pages, signed in, called /mcp, airdropped, stopped cleanly`);
} catch (err) {
  // What the server said on stderr tells why a check failed (and is what the stderr check found).
  if (proc !== null && proc.exitCode === null) proc.kill(9);
  const said = await serverStderr.catch(() => "");
  if (said !== "") console.error(`the server's stderr:\n${said}`);
  throw err;
} finally {
  if (proc !== null && proc.exitCode === null) proc.kill(9);
  rmSync(dir, { recursive: true, force: true });
}
