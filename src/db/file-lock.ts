// Locks between walletgate processes on one database, held on an empty file beside it with SQLite's own
// file locks: every process that uses the database holds a shared lock from before it reads anything of
// it, `serve` holds the file's one reserved lock as well (one server per database), and `restore` holds it
// exclusively while it replaces the database. The kernel drops a process's locks when it ends, however it
// ends. SQLite rather than flock(2): it is loaded already, where bun:ffi would cost every start about a
// millisecond, and its locks work wherever the database's own do.
import { Database } from "bun:sqlite";
import { accessSync, constants, existsSync, statSync } from "node:fs";
import { fileBehind } from "../lib/links.ts";
import { dirname } from "node:path";
import { sleepSync } from "bun";
import { makeDirDurably } from "../lib/durable.ts";
import { keepOwnerOf } from "../lib/owner.ts";

export type FileLock = { release(): void };

/** What an attempt found: the lock, another process holding it, or a lock file that cannot be made here (then none is kept). */
export type LockAttempt = { lock: FileLock } | { held: true } | { unsupported: string };

/**
 * `shared`: a read transaction (SQLite's SHARED lock), held by every process using the database; `serve`:
 * a write transaction never written to (SHARED and RESERVED: other readers go on, a second one is refused);
 * `exclusive`: EXCLUSIVE, which no other lock of any kind may share.
 */
export type LockMode = "shared" | "serve" | "exclusive";

const codeOf = (err: unknown) => String((err as { code?: unknown } | null)?.code ?? "");

/** A failure naming the lock file, with a code DATA_DIR's messages know (config.ts dataDirError): a directory in its place, or no access. */
function lockFileError(path: string, why: string): Error {
  let isDirectory = false;
  try {
    isDirectory = statSync(path).isDirectory();
  } catch {
    // gone meanwhile: the access error stands
  }
  return isDirectory
    ? Object.assign(new Error(`${path} is a directory, not a file`), { code: "EISDIR", path })
    : Object.assign(new Error(`${path} ${why}`), { code: "EACCES", path });
}

/**
 * The locks held, kept reachable until released: a connection nothing refers to any more would be closed
 * by the garbage collector, and its lock with it, while the process still relies on it.
 */
const held = new Set<Database>();

/** The lock file of a database: beside the file its path leads to (through a symlink), so every name for it shares one. */
export function lockPathOf(databasePath: string): string {
  return `${fileBehind(databasePath)}.locks`;
}

/**
 * Tries once to take `mode` on `path`, made (empty) if missing. Made readable by all (0644 less the umask: it
 * holds nothing), a lock file another user made (root running a command once) still takes shared locks
 * through a read. One that cannot be opened, or not written for a lock that excludes others, throws naming
 * it rather than lock nothing.
 */
export function tryLock(path: string, mode: LockMode): LockAttempt {
  // SQLite opens a file it cannot write read-only without a word, and a read-only connection answers BEGIN
  // IMMEDIATE or EXCLUSIVE holding no such lock at all: so those want the file writable, asked first.
  const made = !existsSync(path);
  if (mode !== "shared" && !made) {
    try {
      accessSync(path, constants.W_OK);
    } catch {
      throw lockFileError(path, "cannot be written by this user, which its lock needs");
    }
  }
  let db: Database;
  try {
    db = new Database(path, { create: true, readwrite: true });
    if (made) keepOwnerOf(dirname(path), path); // made by root: DATA_DIR's owner, whose server must lock it too
  } catch {
    if (!existsSync(path)) return { unsupported: `${path} cannot be made here` }; // a read-only DATA_DIR
    try {
      db = new Database(path, { readonly: true });
    } catch {
      throw lockFileError(path, "cannot be opened by this user");
    }
  }
  try {
    db.run("PRAGMA busy_timeout = 0");
    // A write transaction on an empty file makes its first page; kept in memory, it leaves no journal file
    // beside the lock (a left one would be deleted by the next process, briefly taking a lock to do so).
    db.run("PRAGMA journal_mode = MEMORY");
    if (mode === "shared") {
      db.run("BEGIN");
      db.query("SELECT count(*) FROM sqlite_master").get(); // the shared lock, kept until the transaction ends
    } else {
      db.run(mode === "serve" ? "BEGIN IMMEDIATE" : "BEGIN EXCLUSIVE"); // never committed: the file stays empty
    }
  } catch (err) {
    db.close();
    if (codeOf(err).startsWith("SQLITE_BUSY")) return { held: true };
    throw err;
  }
  held.add(db);
  return {
    lock: {
      release() {
        if (!held.delete(db)) return;
        db.close(); // ends the transaction, and with it the lock
      },
    },
  };
}

/** The message of a process that found the database being restored. */
export const restoringMessage = (databasePath: string) =>
  `${databasePath} is being restored (walletgate restore is running): start again once it has finished`;

type Waits = { waitMs?: number; readOnlyUse?: boolean };

/** How long a server's lock must be found held, beside readers, before another server is the answer. */
const SECOND_SERVER_MS = 200;

/**
 * Takes `mode` of the database's lock before anything of it is read or written, waiting up to `waitMs` (10 s)
 * while a restore holds it exclusively, then throwing `whileRestoring()`; `held` answers a lock another
 * process holds that is no restore (a second server). Null where no lock file can be made. A reader
 * (`readOnlyUse`: a backup by a user who may only read DATA_DIR) makes nothing there, and goes without a lock
 * file it cannot open.
 */
function holdLock(databasePath: string, mode: "shared" | "serve", errors: { whileRestoring: () => Error; held?: () => Error }, options: Waits): FileLock | null {
  const path = lockPathOf(databasePath);
  const deadline = Date.now() + (options.waitMs ?? 10_000);
  if (options.readOnlyUse !== true) makeDirDurably(dirname(databasePath)); // a first start: the lock file goes where the database will
  let readerSince: number | null = null;
  for (;;) {
    let attempt: LockAttempt;
    try {
      attempt = tryLock(path, mode);
    } catch (err) {
      // A reader who may not open the file goes without it; a directory in its place is refused all the same.
      if (options.readOnlyUse === true && codeOf(err) === "EACCES") return null;
      throw err;
    }
    if ("lock" in attempt) return attempt.lock;
    if ("unsupported" in attempt) return null;
    // Held by a restore (exclusive: nothing else gets in), or, for `serve`, by another server (a reader still
    // gets in). A restore that was refused holds a lock for an instant only: another server holds its lock
    // for good, so it is the answer only once the probe has found the file so for a while.
    if (mode === "serve") {
      const probe = tryLock(path, "shared");
      if ("lock" in probe) {
        probe.lock.release();
        readerSince ??= Date.now();
        if (Date.now() - readerSince >= SECOND_SERVER_MS) throw errors.held!();
      } else {
        readerSince = null;
      }
    }
    if (Date.now() >= deadline) throw errors.whileRestoring();
    sleepSync(mode === "serve" && readerSince !== null ? 5 : 25);
  }
}

/** Every process's shared lock: see holdLock. */
export function holdOpenLock(databasePath: string, whileRestoring: () => Error, options: Waits = {}): FileLock | null {
  return holdLock(databasePath, "shared", { whileRestoring }, options);
}

/** `serve`'s lock: shared with the commands, refused to a second server (`alreadyServed()`); see holdLock. */
export function holdServeLock(databasePath: string, errors: { alreadyServed: () => Error; restoring: () => Error }, options: Waits = {}): FileLock {
  return holdLock(databasePath, "serve", { whileRestoring: errors.restoring, held: errors.alreadyServed }, options) ?? { release() {} };
}
