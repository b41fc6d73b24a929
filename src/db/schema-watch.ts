// A newer walletgate (`migrate`, or a second `serve`) may migrate the database under a running process
// of this version, which would then go on writing to a schema it does not know. Every process that
// stays running (the server, `walletgate mcp`) looks every few seconds; once the schema is newer, every
// write is refused (and the server's /readyz fails) until the process is replaced by the newer version.
import type { Db } from "./open.ts";
import { schemaVersion } from "./migrate.ts";
import { startRepeating, type Repeating } from "../lib/repeat.ts";
import type { Logger } from "../log.ts";

/** How often the schema version is read. */
export const SCHEMA_WATCH_MS = 2_000;

/** Watches `db` for a schema newer than `known` (the version this process migrated to or checked). */
export function watchSchema(db: Db, known: number, log: Logger, onError: (err: unknown) => void, periodMs = SCHEMA_WATCH_MS): Repeating {
  let outdated = false;
  return startRepeating(
    async () => {
      if (outdated) return;
      const version = db.read(() => schemaVersion(db.sqlite));
      if (version <= known) return;
      outdated = true;
      db.refuseWrites(new Error(`the database was migrated to schema ${version} by a newer walletgate; this one knows ${known}: restart with the newer version`));
      log.error("database migrated by a newer walletgate: writes are refused", { version, known });
    },
    periodMs,
    onError,
  );
}
