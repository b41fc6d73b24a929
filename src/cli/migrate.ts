// `walletgate migrate`: applies pending migrations to the database in DATA_DIR and reports the version.
import { inDataDir, type Config } from "../config.ts";
import { withOpenLock } from "./context.ts";
import { parseCommandArgs } from "./args.ts";
import { openDatabase } from "../db/open.ts";
import { createFromImage } from "../db/fresh.ts";
import { migrate, settleMigrations } from "../db/migrate.ts";
import { systemClock } from "../lib/clock.ts";

export async function migrateCommand(config: Config, args: string[]): Promise<number> {
  parseCommandArgs(args, {}, { min: 0, max: 0 });
  return withOpenLock(config, () => migrateNow(config));
}

async function migrateNow(config: Config): Promise<number> {
  // Failures of DATA_DIR's files (a file where the directory should be, a read-only or full disk) name DATA_DIR.
  const { created, db } = inDataDir(config, () => {
    const created = createFromImage(config.databasePath);
    return { created, db: openDatabase(config.databasePath, { synchronous: config.sqliteSynchronous }) };
  });
  try {
    // Progress on stderr, before work that can take a while; stdout keeps the result alone.
    const result = inDataDir(config, () => {
      const result = migrate(db.sqlite, systemClock.now(), undefined, (versions) =>
        process.stderr.write(`applying migration${versions.length > 1 ? "s" : ""} ${versions.join(", ")} …\n`),
      );
      if (result.applied.length > 0) settleMigrations(db);
      return result;
    });
    const applied =
      result.applied.length > 0 ? `applied ${result.applied.join(", ")}` : created ? "created from the executable's built-in schema" : "nothing to apply";
    process.stdout.write(`schema version ${result.version} (${applied}) in ${config.databasePath}\n`);
    return 0;
  } finally {
    db.close();
  }
}
