// `walletgate wallets export <address>`: the operator's one way to take a custodial wallet's key out.
import { UsageError, type Config } from "../config.ts";
import { AppError } from "../errors.ts";
import { decodeAddress, encodeBase58, NOT_REPEATED } from "../lib/encoding.ts";
import { exportSecretKey } from "../wallets/custody.ts";
import { parseCommandArgs } from "./args.ts";
import { withCommandDeps } from "./context.ts";

const USAGE = "Usage: walletgate wallets export <address> [--format base58|json]";
const FORMATS = ["base58", "json"] as const;
type Format = (typeof FORMATS)[number];
const isFormat = (text: string): text is Format => (FORMATS as readonly string[]).includes(text);

const WARNING = `WARNING: the line printed on standard output is this wallet's PRIVATE KEY.
Anyone who holds it controls the wallet and can move all of its funds. Do not paste it into chats,
tickets or logs; store it offline, and delete any file you redirect it to once it is imported.
`;

/** The key as wallet apps import it: base58 (Phantom, Solflare) or solana-keygen's JSON array of 64 numbers. */
function formatSecretKey(secretKey: Uint8Array, format: Format): string {
  return format === "json" ? JSON.stringify(Array.from(secretKey)) : encodeBase58(secretKey);
}

export async function walletsCommand(config: Config, args: string[]): Promise<number> {
  const { values, positionals } = parseCommandArgs(args, { format: { type: "string" } }, { min: 1, max: 2 }, USAGE);
  const [subcommand, address] = positionals as [string, string | undefined];
  if (subcommand !== "export") throw new UsageError(`unknown wallets command "${subcommand}" (expected: wallets export <address>)`, USAGE);
  if (address === undefined) throw new UsageError("wallets export needs the wallet's address", USAGE);
  if (decodeAddress(address) === null) throw new UsageError(`the address given is not a Solana address ${NOT_REPEATED}`, USAGE);
  const format = values.format ?? "base58";
  if (!isFormat(format)) throw new UsageError(`--format must be base58 or json, got "${format}"`, USAGE);

  return withCommandDeps(config, async (deps) => {
    let secretKey: Uint8Array;
    try {
      secretKey = await exportSecretKey(deps, address);
    } catch (err) {
      if (!(err instanceof AppError)) throw err;
      const reason = err.code === "NOT_FOUND" ? `${address} is not a custodial wallet in ${config.databasePath}` : err.message;
      process.stderr.write(`walletgate: ${reason}\n`);
      return 1;
    }
    try {
      process.stderr.write(WARNING);
      process.stdout.write(formatSecretKey(secretKey, format) + "\n");
    } finally {
      secretKey.fill(0);
    }
    return 0;
  });
}
