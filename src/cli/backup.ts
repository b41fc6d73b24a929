// `walletgate backup <file> [--json]`: a consistent online copy of DATA_DIR's database, while a server
// may be running on it. The secrets in DATA_DIR (JWT secret, wallet encryption key) are separate files.
import { existsSync } from "node:fs";
import { inDataDir, type Config } from "../config.ts";
import { withOpenLock } from "./context.ts";
import { BackupTargetError, backupDatabase } from "../db/backup.ts";
import { openDatabase } from "../db/open.ts";
import { parseCommandArgs } from "./args.ts";

export async function backupCommand(config: Config, args: string[]): Promise<number> {
  const { values, positionals } = parseCommandArgs(args, { json: { type: "boolean" } }, { min: 1, max: 1 }, "Usage: walletgate backup <file> [--json]");
  const target = positionals[0]!;
  if (!existsSync(config.databasePath)) {
    process.stderr.write(`walletgate: DATA_DIR ${config.dataDir} holds no database (no ${config.databasePath}): nothing to back up\n`);
    return 1;
  }
  return withOpenLock(config, async () => copyTo(config, target, values.json === true), { readOnlyUse: true });
}

async function copyTo(config: Config, target: string, json: boolean): Promise<number> {
  const db = inDataDir(config, () => openDatabase(config.databasePath, { synchronous: config.sqliteSynchronous, readOnlyUse: true }));
  try {
    process.stderr.write(`copying ${config.databasePath} to ${target} ...\n`); // progress: stdout is the result alone
    const started = performance.now();
    const { bytes } = backupDatabase(db.sqlite, target);
    const ms = Math.round(performance.now() - started);
    process.stdout.write(json ? `${JSON.stringify({ file: target, bytes, ms })}\n` : `${target}\n`);
    process.stderr.write(`backed up ${bytes} bytes in ${ms} ms; keep DATA_DIR's secret files with it\n`);
    return 0;
  } catch (err) {
    if (!(err instanceof BackupTargetError) && (err as NodeJS.ErrnoException).code === undefined) throw err;
    process.stderr.write(`walletgate: backup failed: ${err instanceof Error ? err.message : String(err)}\n`);
    return 1;
  } finally {
    db.close();
  }
}
