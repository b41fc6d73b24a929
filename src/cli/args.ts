// Command-line arguments: config flags (`--data-dir`) go to loadConfig, the rest to the command.
import { parseArgs } from "node:util";
import { CONFIG_VARIABLES, UsageError, flagName } from "../config.ts";

const CONFIG_FLAGS = new Set(CONFIG_VARIABLES.map(flagName));

/** Splits argv after the command name into config flags and the command's own arguments, order kept. */
export function splitArgs(argv: string[]): { configFlags: string[]; commandArgs: string[] } {
  const configFlags: string[] = [];
  const commandArgs: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    const match = /^--([a-z0-9-]+)(=.*)?$/.exec(arg);
    if (match !== null && CONFIG_FLAGS.has(match[1]!)) {
      configFlags.push(arg);
      if (match[2] === undefined && i + 1 < argv.length) configFlags.push(argv[++i]!);
    } else {
      commandArgs.push(arg);
    }
  }
  return { configFlags, commandArgs };
}

export type OptionSpec = Record<string, { type: "string" | "boolean" }>;

/** Parses a command's own arguments strictly: an unknown option or a missing value is a UsageError. */
export function parseCommandArgs<O extends OptionSpec>(
  args: string[],
  options: O,
  positionals: { min: number; max: number },
  /** The command's usage, shown after a refusal (else the program's). */
  usage?: string,
): { values: { [K in keyof O]?: O[K]["type"] extends "boolean" ? boolean : string }; positionals: string[] } {
  let parsed;
  try {
    parsed = parseArgs({ args, options, allowPositionals: true, strict: true, tokens: true });
  } catch (err) {
    // node:util's words ("Unknown option '--x'"), begun in lower case as every other message of the CLI.
    const said = err instanceof Error ? err.message.replace(/\. To specify.*$/s, "") : String(err);
    throw new UsageError(said.charAt(0).toLowerCase() + said.slice(1), usage);
  }
  // An option given twice would keep only its last value (`keys create --owner A --owner B` for B).
  const seen = new Set<string>();
  for (const token of parsed.tokens) {
    if (token.kind !== "option") continue;
    if (seen.has(token.name)) throw new UsageError(`option --${token.name} is given twice`, usage);
    seen.add(token.name);
  }
  if (parsed.positionals.length < positionals.min) throw new UsageError("missing argument", usage);
  if (parsed.positionals.length > positionals.max) throw new UsageError(`unexpected argument "${parsed.positionals[positionals.max]}"`, usage);
  return { values: parsed.values, positionals: parsed.positionals } as never;
}
