// `walletgate backup`: a consistent copy of the live database, taken online (operations.md "CLI").
import type { Database } from "bun:sqlite";
import { closeSync, linkSync, openSync, renameSync, rmSync, statSync } from "node:fs";
import { basename, dirname, join } from "node:path";
import { fsyncDir, fsyncPath } from "../lib/durable.ts";
import { removeLeftovers } from "../lib/leftovers.ts";

export class BackupTargetError extends Error {
  override name = "BackupTargetError";
}

const targetExists = (target: string) => new BackupTargetError(`${target} exists; back up to a new file`);

/**
 * Copies the database to `target` with `VACUUM INTO`: one read transaction, so the copy is the state of
 * one moment while the server keeps serving (WAL readers never block the writer). The copy is made in a
 * new file beside the target (mode 0600: it holds every token row and sealed secret), flushed, then
 * linked to `target` at once, so `target` never holds half a copy, even after a crash. An existing
 * `target` is never replaced (on a filesystem without hard links, the name is taken by an exclusive
 * create and the copy renamed over that empty file). Returns the copy's size in bytes.
 */
export function backupDatabase(sqlite: Database, target: string): { bytes: number } {
  const prefix = `.${basename(target)}.partial-`;
  removeLeftovers(dirname(target), prefix); // copies of runs killed mid-way
  const partial = join(dirname(target), `${prefix}${process.pid}-${Date.now()}`);
  try {
    closeSync(openSync(partial, "wx", 0o600)); // VACUUM INTO writes into an empty file, keeping its mode
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    const dir = dirname(target);
    if (code === "ENOENT" || code === "ENOTDIR") throw new BackupTargetError(`${dir} is not a directory that exists: make it first, or back up elsewhere`);
    if (code === "EACCES" || code === "EPERM" || code === "EROFS") throw new BackupTargetError(`${dir} cannot be written by this user (${code})`);
    throw err;
  }
  try {
    sqlite.run("VACUUM INTO ?", [partial]);
    fsyncPath(partial);
    try {
      linkSync(partial, target); // fails if target exists: never replaced
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (code === "EEXIST") throw targetExists(target);
      // A filesystem without hard links (FAT, some network mounts): a rename, after a check of its own.
      if (code !== "EPERM" && code !== "ENOTSUP" && code !== "EOPNOTSUPP") throw err;
      // The name is taken first with an exclusive create, so the rename replaces only our own empty file.
      try {
        closeSync(openSync(target, "wx", 0o600));
      } catch (e) {
        if ((e as NodeJS.ErrnoException).code === "EEXIST") throw targetExists(target);
        throw e;
      }
      try {
        renameSync(partial, target);
      } catch (e) {
        rmSync(target, { force: true }); // our own empty placeholder
        throw e;
      }
    }
    fsyncDir(dirname(target)); // the new name is durable too
    return { bytes: statSync(target).size };
  } finally {
    rmSync(partial, { force: true });
  }
}
