// `walletgate restore <file> [--json]`: a backup of `walletgate backup` put back as DATA_DIR's database.
import type { Config } from "../config.ts";
import { RestoreError, restoreDatabase } from "../db/restore.ts";
import { parseCommandArgs } from "./args.ts";

export async function restoreCommand(config: Config, args: string[]): Promise<number> {
  const { values, positionals } = parseCommandArgs(args, { json: { type: "boolean" } }, { min: 1, max: 1 }, "Usage: walletgate restore <file> [--json]");
  try {
    const result = restoreDatabase(config.databasePath, positionals[0]!, new Date());
    process.stdout.write(values.json ? `${JSON.stringify(result)}\n` : `${result.restored}\n`);
    if (result.movedAside !== null) process.stderr.write(`the database it replaced, with its log, is now ${result.movedAside}\n`);
    process.stderr.write("restored; start the server with the secret files (or JWT_SECRET, WALLET_ENCRYPTION_KEY) of the backup's DATA_DIR\n");
    return 0;
  } catch (err) {
    if (!(err instanceof RestoreError) && (err as NodeJS.ErrnoException).code === undefined) throw err;
    process.stderr.write(`walletgate: restore failed: ${err instanceof Error ? err.message : String(err)}\n`);
    return 1;
  }
}
