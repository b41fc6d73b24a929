// `npm run build`: compiles src/main.ts into the single executable dist/walletgate (minified, source map, bytecode).
import { existsSync, readdirSync, realpathSync, rmSync, statSync } from "node:fs";
import { dirname, join, relative } from "node:path";
import { parseArgs } from "node:util";
import { encodeImage, freshDatabaseImage } from "../src/db/fresh.ts";

const ROOT = join(import.meta.dir, "..");
export const DEFAULT_OUTFILE = join(ROOT, "dist", "walletgate");

export type BuildOptions = {
  outfile?: string;
  /**
   * Precompiled JavaScriptCore bytecode embedded in the executable: the ~2 MB bundle is not parsed at
   * start-up. First /healthz 200 in ~41 ms instead of ~111 ms on the 2-core dev machine (BENCHMARKS.md).
   */
  bytecode?: boolean;
};

export type BuildResult = { outfile: string; bytes: number; sourcemaps: { count: number; bytes: number } };

/**
 * `bindings` (required by bigint-buffer, beneath @solana/spl-token) looks for a native addon by walking up
 * from the path its own file had at build time, resolved against the working directory at run time; with
 * a build whose node_modules lay outside the project (a symlink, a hoisted workspace) that walk never ended
 * (`../..`, `../../..`, …) and the executable hung at full CPU on the ledger's first use. The executable
 * carries no native addon: it gets a `bindings` that says so at once, and bigint-buffer takes its pure-JS
 * path, as it did after the walk.
 */
const noNativeAddons: import("bun").BunPlugin = {
  name: "no-native-addons",
  setup(build) {
    build.onResolve({ filter: /^bindings$/ }, () => ({ path: "bindings", namespace: "no-native-addons" }));
    build.onLoad({ filter: /.*/, namespace: "no-native-addons" }, () => ({
      contents: 'module.exports = function bindings(name) { throw new Error("no native addon " + name + " in the executable"); };',
      loader: "js",
    }));
  },
};

/** The checkout's commit, "+changes" when tracked files differ from it; "" outside a git checkout. */
export function sourceCommit(): string {
  const git = (...args: string[]) => Bun.spawnSync(["git", ...args], { cwd: ROOT, stdout: "pipe", stderr: "ignore" });
  try {
    // A source tree unpacked inside another repository is not that repository's commit.
    const top = git("rev-parse", "--show-toplevel");
    if (top.exitCode !== 0 || realpathSync(top.stdout.toString().trim()) !== realpathSync(ROOT)) return "";
    const head = git("rev-parse", "--short=12", "HEAD");
    if (head.exitCode !== 0) return "";
    const changed = git("diff", "--quiet", "HEAD").exitCode !== 0;
    return `${head.stdout.toString().trim()}${changed ? "+changes" : ""}`;
  } catch {
    return ""; // no git on this machine
  }
}

export async function buildExecutable(options: BuildOptions = {}): Promise<BuildResult> {
  const outfile = options.outfile ?? DEFAULT_OUTFILE;
  // Each build's chunks have new names: the source maps of earlier builds would pile up in dist/.
  if (outfile === DEFAULT_OUTFILE && existsSync(dirname(outfile))) {
    for (const name of readdirSync(dirname(outfile))) if (/^chunk-[0-9a-z]+\.js\.map$/.test(name)) rmSync(join(dirname(outfile), name));
  }
  const result = await Bun.build({
    // The migrated, empty database, written whole on a first start instead of migrated (src/db/fresh.ts).
    // applied_at 0 in it: the same source builds the same executable.
    define: {
      WALLETGATE_FRESH_DATABASE: JSON.stringify(encodeImage(freshDatabaseImage(undefined, 0))),
      // Which source the executable is: two builds of one package version can be migrations apart.
      WALLETGATE_BUILD_COMMIT: JSON.stringify(sourceCommit()),
    },
    // The verification worker is a further entrypoint: Bun embeds it and `new Worker(url)` finds it.
    entrypoints: [join(ROOT, "src", "main.ts"), join(ROOT, "src", "lib", "ed25519-worker.ts")],
    target: "bun",
    format: "esm",
    plugins: [noNativeAddons],
    minify: true,
    // Embedded in the executable (stack traces name src/ files) and also written beside it as `.map`.
    sourcemap: "linked",
    bytecode: options.bytecode ?? true,
    // Lazily imported modules (the ledgers with @solana/web3.js) become chunks inside the executable that
    // are loaded on first import, not with the entrypoint: without this, start-up took ~48 ms, not ~34.
    splitting: true,
    compile: {
      outfile,
      // A bunfig.toml in whatever directory the server is started from must not change how it runs;
      // `.env` is still read, as operations.md promises.
      autoloadBunfig: false,
      autoloadDotenv: true,
    },
  });
  if (!result.success) {
    throw new AggregateError(result.logs, `build failed:\n${result.logs.map(String).join("\n")}`);
  }
  // Written beside it: the executable's own map, the worker entrypoint's, and one per lazily loaded chunk.
  const sourcemaps = result.outputs.filter((o) => o.kind === "sourcemap");
  // Their sources list every module inside: none may look for files of the build tree at run time.
  for (const map of sourcemaps) {
    const sources = ((await Bun.file(map.path).json()) as { sources?: string[] }).sources ?? [];
    const found = sources.find((source) => /(^|\/)node_modules\/bindings\//.test(source));
    if (found !== undefined) throw new Error(`the executable would carry ${found}, which searches the disk for native addons`);
  }
  return {
    outfile,
    bytes: statSync(outfile).size,
    sourcemaps: { count: sourcemaps.length, bytes: sourcemaps.reduce((sum, o) => sum + statSync(o.path).size, 0) },
  };
}

function megabytes(bytes: number): string {
  return `${(bytes / 1024 / 1024).toFixed(1)} MB`;
}

async function cli(): Promise<number> {
  const { values } = parseArgs({
    args: Bun.argv.slice(2),
    options: { outfile: { type: "string" }, "no-bytecode": { type: "boolean", default: false } },
  });
  const started = performance.now();
  const built = await buildExecutable({ outfile: values.outfile, bytecode: !values["no-bytecode"] });
  // Smoke test: the executable runs on its own (it needs nothing from node_modules).
  const probe = Bun.spawnSync([built.outfile, "--version"], { cwd: "/", stdout: "pipe", stderr: "pipe" });
  if (probe.exitCode !== 0) {
    process.stderr.write(`build: ${built.outfile} --version failed:\n${probe.stderr.toString()}`);
    return 1;
  }
  const shown = relative(process.cwd(), built.outfile) || built.outfile;
  const { count, bytes } = built.sourcemaps;
  const map = count === 0 ? "" : ` (+ ${count} source maps beside it, ${megabytes(bytes)}, which it does not need)`;
  process.stdout.write(
    `${shown}  ${megabytes(built.bytes)}${map}  walletgate ${probe.stdout.toString().trim()}  ` +
      `in ${Math.round(performance.now() - started)} ms\n`,
  );
  return 0;
}

if (import.meta.main) {
  cli().then(
    (code) => process.exit(code),
    (err) => {
      process.stderr.write(`build: ${err instanceof Error ? err.message : String(err)}\n`);
      process.exit(1);
    },
  );
}
