// `walletgate ledger airdrop --to <address> [--sol N] [--usdc N] [--token N] [--json]`: play money on localnet.
// `walletgate ledger tokens [--json]`: the tokens the server knows on its network, with their mints.
import { UsageError, type Config } from "../config.ts";
import { AppError } from "../errors.ts";
import { parseAmount } from "../lib/amounts.ts";
import { decodeAddress, NOT_REPEATED } from "../lib/encoding.ts";
import { parseCommandArgs } from "./args.ts";
import { withCommandDeps } from "./context.ts";

export const LEDGER_USAGE = `Usage: walletgate ledger airdrop --to <address> [--sol N] [--usdc N] [--token N] [--json]
       walletgate ledger tokens [--json]
  airdrop: sends SOL (at most 2 a call), USDC and the service token from the embedded ledger's faucet
  (NETWORK=localnet only) and prints one transaction signature per token sent.
  tokens: prints each token the server takes on its network: its name, decimals and mint address
  (on localnet, the mints the embedded ledger made at genesis).`;

export async function ledgerCommand(config: Config, args: string[]): Promise<number> {
  const { values, positionals } = parseCommandArgs(
    args,
    { to: { type: "string" }, sol: { type: "string" }, usdc: { type: "string" }, token: { type: "string" }, json: { type: "boolean" } },
    { min: 1, max: 1 },
    LEDGER_USAGE,
  );
  if (positionals[0] === "tokens") {
    const given = (["to", "sol", "usdc", "token"] as const).find((flag) => values[flag] !== undefined);
    if (given !== undefined) throw new UsageError(`--${given} belongs to airdrop, not tokens`, LEDGER_USAGE);
    return listTokens(config, values.json === true);
  }
  if (positionals[0] !== "airdrop") throw new UsageError(`unknown ledger command "${positionals[0]}"`, LEDGER_USAGE);
  if (values.to === undefined) throw new UsageError(`--to <address> is required`, LEDGER_USAGE);
  if (decodeAddress(values.to) === null) throw new UsageError(`--to: not a Solana address, base58 of 32 bytes ${NOT_REPEATED}`, LEDGER_USAGE);
  if (config.network !== "localnet") {
    process.stderr.write(`walletgate: airdrops come from the embedded ledger: NETWORK=localnet only (this is ${config.network})\n`);
    return 1;
  }
  const to = values.to;
  return withCommandDeps(config, async (deps) => {
    const tokens = await deps.ledger.tokens();
    const amount = (flag: "sol" | "usdc" | "token", key: string): bigint => {
      const raw = values[flag];
      if (raw === undefined) return 0n;
      const parsed = parseAmount(raw, tokens.find((t) => t.key === key)!.decimals, { allowZero: true });
      if ("error" in parsed) throw new UsageError(`--${flag}: ${parsed.error}`, LEDGER_USAGE);
      return parsed.value;
    };
    const amounts = { sol: amount("sol", "sol"), usdc: amount("usdc", "usdc"), token: amount("token", config.serviceToken.symbol) };
    if (amounts.sol === 0n && amounts.usdc === 0n && amounts.token === 0n) {
      throw new UsageError(`say how much: --sol, --usdc and/or --token`, LEDGER_USAGE);
    }
    try {
      const signatures = await deps.ledger.airdrop(to, amounts);
      process.stdout.write(values.json ? `${JSON.stringify({ to, signatures })}\n` : `${signatures.join("\n")}\n`);
      return 0;
    } catch (err) {
      if (!(err instanceof AppError)) throw err;
      process.stderr.write(`walletgate: ${err.message}\n`);
      return err.code === "VALIDATION_ERROR" ? 2 : 1; // an amount out of bounds is a usage error, as in keys
    }
  });
}

/** One line per token, `<name> <decimals> <mint>` (`-` for SOL, and for a service token without a mint). */
async function listTokens(config: Config, json: boolean): Promise<number> {
  return withCommandDeps(config, async (deps) => {
    const tokens = await deps.ledger.tokens();
    if (json) {
      process.stdout.write(`${JSON.stringify({ network: config.network, tokens: tokens.map(({ key, kind, decimals, mint }) => ({ token: key, kind, decimals, mint })) })}\n`);
    } else {
      const width = Math.max(...tokens.map((t) => t.key.length));
      process.stdout.write(tokens.map((t) => `${t.key.padEnd(width)}  ${String(t.decimals).padStart(2)}  ${t.mint ?? "-"}\n`).join(""));
    }
    return 0;
  });
}
