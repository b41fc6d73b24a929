#!/usr/bin/env bun
// CLI entry: parse argv, dispatch to a command in cli/. Exit codes: 0 ok, 1 failure, 2 usage.
import { ConfigError, UsageError, configHelp, loadConfig, processEnv, type Config } from "./config.ts";
import { splitArgs } from "./cli/args.ts";
import { importQuietly } from "./lib/quiet-import.ts";
import { SchemaBehindError, SchemaTooNewError, latestOf } from "./db/migrate.ts";
import pkg from "../package.json" with { type: "json" };

const USAGE = `walletgate ${pkg.version} — wallet sign-in, sessions and payment gating in one executable

Usage: walletgate [command] [--option value ...]

Commands:
  serve      run the HTTP server (default)
  migrate    apply database migrations and exit
  mcp        serve the tools over stdio (desktop MCP hosts); WALLETGATE_TOKEN optional
  ledger airdrop --to <address> [--sol N] [--usdc N] [--token N] [--json]
             send play money from the embedded ledger's faucet (localnet)
  ledger tokens [--json]
             the tokens of this network: name, decimals, mint address
  owners list | set-tier <wallet> free|pro|unlimited [--json]
             the operator's owners and tiers
  keys create --owner <wallet> --label <text> | list --owner <wallet> | revoke <keyId> [--json]
             API keys of /public/* for headless servers
  wallets export <address> [--format base58|json]
             print a custodial wallet's secret key (operator only; warns on stderr)
  orders resolve <orderId> --release|--refund [--json]
             end a marketplace dispute: pay the provider or refund the consumer
  dashboard-link --keypair <file> [--json]
             print a one-time dashboard sign-in link for the keypair's wallet (headless servers)
  backup <file> [--json]
             a consistent copy of the database, taken while the server runs (never overwrites <file>)
  restore <file> [--json]
             put a backup in place of the database (server stopped; the old one is kept aside)

Options, each with its default (each is also an environment variable, --data-dir as DATA_DIR, and is
read from the working directory's .env files too; the README's configuration table says more):
${configHelp()}

  --help                           show this help (walletgate <command> --help: that command's)
  --version                        print the version, the schema version and the commit it was built from
`;

/** A command gets the config and its own arguments (everything after its name that is not a config flag). */
export type Command = (config: Config, args: string[]) => Promise<number>;

const COMMANDS: Record<string, () => Promise<Command>> = {
  serve: async () => (await import("./cli/serve.ts")).serveCommand,
  migrate: async () => (await import("./cli/migrate.ts")).migrateCommand,
  ledger: async () => (await import("./cli/ledger.ts")).ledgerCommand,
  wallets: async () => (await import("./cli/wallets.ts")).walletsCommand,
  mcp: async () => (await import("./cli/mcp.ts")).mcpCommand,
  owners: async () => (await import("./cli/owners.ts")).ownersCommand,
  keys: async () => (await import("./cli/keys.ts")).keysCommand,
  orders: async () => (await import("./cli/orders.ts")).ordersCommand,
  "dashboard-link": async () => (await import("./cli/dashboard-link.ts")).dashboardLinkCommand,
  backup: async () => (await import("./cli/backup.ts")).backupCommand,
  restore: async () => (await import("./cli/restore.ts")).restoreCommand,
};

/**
 * A command's own lines of USAGE (each synopsis, such as `ledger airdrop` and `ledger tokens`, and what it
 * does), for `walletgate <command> --help`.
 */
function commandUsage(name: string): string | null {
  const lines = USAGE.split("\n");
  const blocks: string[] = [];
  lines.forEach((line, first) => {
    if (!line.startsWith(`  ${name} `)) return;
    let end = first + 1;
    while (end < lines.length && lines[end]!.startsWith("             ")) end++;
    blocks.push(lines.slice(first, end).map((l) => l.trim().replace(/\s{2,}/, " — ")).join("\n  "));
  });
  if (blocks.length === 0) return null;
  return `Usage: walletgate ${blocks.join("\n   or: walletgate ")}\n\nOptions and the other commands: walletgate --help\n`;
}

/** `0.1.0 (schema 49, commit 3f1d2bc1a2b3)`: the package version, the schema it migrates to, the build's commit. */
export function versionLine(): string {
  const build =
    typeof WALLETGATE_BUILD_COMMIT !== "string" ? "run from source" : WALLETGATE_BUILD_COMMIT === "" ? "built outside git" : `commit ${WALLETGATE_BUILD_COMMIT}`;
  return `${pkg.version} (schema ${latestOf()}, ${build})`;
}

export async function main(argv: string[], env: Record<string, string | undefined>): Promise<number> {
  if (argv.includes("--help") || argv.includes("-h") || argv[0] === "help") {
    const named = argv[0] !== undefined && argv[0] in COMMANDS ? commandUsage(argv[0]) : null;
    process.stdout.write(named ?? USAGE);
    return 0;
  }
  if (argv.includes("--version") || argv.includes("-v")) {
    process.stdout.write(`${versionLine()}\n`);
    return 0;
  }
  const [first, ...rest] = argv;
  const named = first !== undefined && !first.startsWith("-");
  const name = named ? first : "serve";
  const load = COMMANDS[name];
  if (load === undefined) {
    process.stderr.write(`walletgate: unknown command "${name}"\n\n${USAGE}`);
    return 2;
  }
  try {
    const { configFlags, commandArgs } = splitArgs(named ? rest : argv);
    const config = loadConfig(env, configFlags);
    return await (await importQuietly(load))(config, commandArgs);
  } catch (err) {
    if (err instanceof UsageError) {
      process.stderr.write(`walletgate: ${err.message}\n\n${err.usage === undefined ? USAGE : `${err.usage}\n`}`);
      await answerMcpHost(name, err.message);
      return 2;
    }
    if (err instanceof ConfigError || err instanceof SchemaTooNewError || err instanceof SchemaBehindError) {
      process.stderr.write(`walletgate: ${err.message}\n`);
      await answerMcpHost(name, err.message);
      return 1;
    }
    throw err;
  }
}

/** A refused `walletgate mcp` also answers its host's first request with the refusal (mcp/stdio-refusal.ts). */
async function answerMcpHost(command: string, message: string): Promise<void> {
  if (command === "mcp") await (await import("./mcp/stdio-refusal.ts")).answerFirstRequest(`walletgate: ${message}`);
}

if (import.meta.main) {
  main(Bun.argv.slice(2), processEnv()).then(
    (code) => process.exit(code),
    (err) => {
      process.stderr.write(`walletgate: ${err instanceof Error ? err.message : String(err)}\n`);
      process.exit(1);
    },
  );
}
