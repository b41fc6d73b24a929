// What one-shot commands share: the database of DATA_DIR (migrated), the secrets and a Deps object.
import { defaultBaseUrl, resolveSecrets, type Config } from "../config.ts";
import { createDeps, type Deps } from "../deps.ts";
import { migrate } from "../db/migrate.ts";
import { openDatabase } from "../db/open.ts";
import { systemClock } from "../lib/clock.ts";
import { cryptoRandom } from "../lib/ids.ts";
import { createLogger } from "../log.ts";

/** Runs `use` with Deps over DATA_DIR's database (the same one a running server uses, thanks to WAL). */
export async function withCommandDeps<T>(config: Config, use: (deps: Deps) => Promise<T>): Promise<T> {
  const db = openDatabase(config.databasePath, { synchronous: config.sqliteSynchronous });
  try {
    migrate(db.sqlite, systemClock.now());
    const deps = await createDeps({
      config,
      secrets: resolveSecrets(config),
      baseUrl: config.baseUrl ?? defaultBaseUrl(config.host, config.port),
      db,
      clock: systemClock,
      random: cryptoRandom,
      log: createLogger("silent", "json", () => {}), // stdout is the command's output alone
    });
    try {
      return await use(deps);
    } finally {
      await deps.ledger.stop();
    }
  } finally {
    db.close();
  }
}
