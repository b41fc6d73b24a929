// What one-shot commands share: the database of DATA_DIR (migrated when new), the secrets and a Deps object.
import { existsSync } from "node:fs";
import { ConfigError, inDataDir, defaultBaseUrl, resolveSecrets, walletKeySource, type Config } from "../config.ts";
import { createDeps, type Deps } from "../deps.ts";
import { requireGenesisDecimals, requireNetwork } from "../ledger/create.ts";
import { latestOf, migrateFreshOnly } from "../db/migrate.ts";
import { watchSchema } from "../db/schema-watch.ts";
import { errorText } from "../errors.ts";
import { openDatabase } from "../db/open.ts";
import { holdOpenLock, restoringMessage } from "../db/file-lock.ts";
import { createFromImage } from "../db/fresh.ts";
import { holdsSealedData, requireSealingKey } from "../db/sealed.ts";
import { holdsLiveSessions, serversSigner } from "../auth/sessions.ts";
import { keyIdOf } from "../auth/tokens.ts";
import { systemClock } from "../lib/clock.ts";
import { cryptoRandom } from "../lib/ids.ts";
import { createLogger } from "../log.ts";

/**
 * Runs `use` with Deps over DATA_DIR's database (the same one a running server uses, thanks to WAL).
 * The database must exist unless `create` (`mcp`, which serves on its own): a command run from the wrong
 * directory, with DATA_DIR's default `./data`, would otherwise make a new database and secrets there and
 * report success about a server that never sees it.
 */
export async function withCommandDeps<T>(
  config: Config,
  use: (deps: Deps) => Promise<T>,
  /** `signsSessions`: `walletgate mcp`, which signs session tokens the server must accept (its JWT secret checked). */
  options: { logToStderr?: boolean; create?: boolean; signsSessions?: boolean } = {},
): Promise<T> {
  if (options.create !== true && !existsSync(config.databasePath)) {
    throw new ConfigError(
      `DATA_DIR ${config.dataDir} holds no database (no ${config.databasePath}): set DATA_DIR to the directory the server uses, or start \`walletgate serve\` there first`,
    );
  }
  const derivedBaseUrl = config.baseUrl ?? defaultBaseUrl(config.host, config.port);
  return withOpenLock(config, async () => {
    const db = inDataDir(config, () => {
      createFromImage(config.databasePath);
      return openDatabase(config.databasePath, { synchronous: config.sqliteSynchronous });
    });
    try {
      // The address links are made for (dashboard-link): BASE_URL, else the one the server recorded it serves
      // at (its HOST and PORT, which a command run beside it need not share: PORT=0 is known only once it listens).
      let baseUrl = derivedBaseUrl;
      const secrets = inDataDir(config, () => {
        migrateFreshOnly(db.sqlite, systemClock.now()); // never under a running server of an older version
        // What a command signing sessions (mcp) must agree with: the key id and issuer the server recorded it signs with.
        const recorded = serversSigner(db);
        if (options.signsSessions !== true && !config.baseUrlGiven && recorded?.issuer != null) baseUrl = recorded.issuer;
        const signer = options.signsSessions === true ? recorded : null;
        const serversKey = signer?.kid ?? null;
        // The network first (checked only; recorded below): a shell without the server's settings on a
        // mainnet DATA_DIR lacks its NETWORK as well as its keys, and the network is what to say.
        requireNetwork(config, db, false);
        const secrets = resolveSecrets(config, {
          holdsSealedData: () => holdsSealedData(config.databasePath),
          // Asked only when mcp would make a secret: a server that recorded its key signs with one not in this
          // DATA_DIR (its environment's), as do live sessions' signers where none recorded one yet.
          signedByAnother: () => {
            if (serversKey !== null) return `the server signs with key id ${serversKey}`;
            return holdsLiveSessions(db, systemClock.now()) ? "it holds live sessions" : null;
          },
          jwtSecretIfMissing: options.signsSessions === true ? "generate" : "this-run-only",
        });
        if (serversKey !== null && serversKey !== keyIdOf(secrets.jwtSecret)) {
          throw new ConfigError(
            `the server signs sessions with another JWT secret (key id ${serversKey}) than this command's (${config.jwtSecret !== null ? "JWT_SECRET" : `${config.dataDir}/jwt-secret`}): give it the server's JWT_SECRET, or the server's jwt-secret file; its tokens would be refused by the server, and the server's by it`,
          );
        }
        if (signer?.issuer != null && signer.issuer !== baseUrl) {
          throw new ConfigError(
            `the server signs sessions for BASE_URL ${signer.issuer}, this command for ${baseUrl}: set BASE_URL=${signer.issuer} for it (when BASE_URL is unset it comes from HOST and PORT); tokens name their issuer, so its tokens would be refused by the server, and the server's by it`,
          );
        }
        requireSealingKey(db, secrets.walletEncryptionKey, walletKeySource(config));
        requireGenesisDecimals(config, db);
        requireNetwork(config, db, options.signsSessions === true); // serve and mcp record it
        return secrets;
      });
      const deps = await createDeps({
        config,
        secrets,
        baseUrl,
        db,
        clock: systemClock,
        random: cryptoRandom,
        // stdout is the command's output alone; a long-running command (mcp) logs warnings and errors to stderr.
        log: options.logToStderr
          ? createLogger(config.logLevel === "debug" || config.logLevel === "info" ? "warn" : config.logLevel, "json", (line) => process.stderr.write(line))
          : createLogger("silent", "json", () => {}),
      });
      // A command that stays running (`mcp`) must not write on under a newer version's schema.
      const schemaWatch = watchSchema(db, latestOf(), deps.log, (err) => deps.log.error("schema watch failed", { error: errorText(err) }));
      try {
        return await use(deps);
      } finally {
        await schemaWatch.stop();
        await deps.ledger.stop();
      }
    } finally {
      db.close();
    }
  });
}

/**
 * Runs `use` holding the database's shared open lock (db/file-lock.ts), taken before anything of it is read:
 * no restore replaces the database under the command meanwhile, and one running waits for it (10 s at most).
 */
export async function withOpenLock<T>(config: Config, use: () => Promise<T>, options: { readOnlyUse?: boolean } = {}): Promise<T> {
  const lock = inDataDir(config, () => holdOpenLock(config.databasePath, () => new ConfigError(restoringMessage(config.databasePath)), options));
  try {
    return await use();
  } finally {
    lock?.release();
  }
}
