// Locks between walletgate processes on one database (flock(2) on files beside it): every process that
// uses the database holds a shared "open" lock, `restore` holds it exclusively while it replaces the file,
// and `serve` holds a "serve" lock of its own exclusively (one server per database). The kernel drops a
// process's locks when it ends, however it ends.
import { closeSync, existsSync, openSync, realpathSync } from "node:fs";
import { dirname } from "node:path";
import { sleepSync } from "bun";
import { makeDirDurably } from "../lib/durable.ts";

export type FileLock = { release(): void };

/** What an attempt found: the lock, another process holding it, or no locks on this system (then none are kept). */
export type LockAttempt = { lock: FileLock } | { held: true } | { unsupported: string };

const LOCK_SH = 1;
const LOCK_EX = 2;
const LOCK_NB = 4;

type Flock = { flock(fd: number, operation: number): number; errno(): number; wouldBlock: number };
let flockLib: Flock | null | undefined;

/** flock(2) and errno through bun:ffi, loaded on first use; null where that is not possible (then nothing is locked). */
function loadFlock(): Flock | null {
  if (flockLib !== undefined) return flockLib;
  const platform =
    process.platform === "linux"
      ? { lib: "libc.so.6", errno: "__errno_location", wouldBlock: 11 }
      : process.platform === "darwin"
        ? { lib: "libSystem.B.dylib", errno: "__error", wouldBlock: 35 }
        : null;
  try {
    if (platform === null) throw new Error("unsupported platform");
    const ffi = require("bun:ffi") as typeof import("bun:ffi");
    const { FFIType } = ffi;
    const opened = ffi.dlopen(platform.lib, {
      flock: { args: [FFIType.i32, FFIType.i32], returns: FFIType.i32 },
      [platform.errno]: { args: [], returns: FFIType.ptr },
    });
    const symbols = opened.symbols as unknown as Record<string, (...args: number[]) => number>;
    flockLib = {
      flock: (fd, operation) => symbols.flock!(fd, operation),
      errno: () => ffi.read.i32(symbols[platform.errno]!() as never, 0),
      wouldBlock: platform.wouldBlock,
    };
  } catch {
    flockLib = null; // e.g. musl (no libc.so.6): the checks restore makes at its start still stand
  }
  return flockLib;
}

/** The lock files of a database: beside the file its path leads to (through a symlink), so every name for it shares them. */
export function lockPathOf(databasePath: string, kind: "open" | "serve"): string {
  const real = existsSync(databasePath) ? realpathSync(databasePath) : databasePath;
  return `${real}.${kind}-lock`;
}

/**
 * Tries once to take the lock on `path`, made empty if missing. Readable by all (0644 less the umask): it holds
 * nothing, and a lock file another user made (root running a command once) can then still be locked through
 * a read. One that exists but cannot be opened at all throws (EACCES, naming it) rather than lock nothing.
 */
export function tryLock(path: string, mode: "shared" | "exclusive"): LockAttempt {
  const lib = loadFlock();
  if (lib === null) return { unsupported: "no flock(2) here" };
  let fd: number;
  try {
    fd = openSync(path, "a", 0o644);
  } catch (err) {
    try {
      fd = openSync(path, "r"); // flock takes either kind of lock through a descriptor opened for reading
    } catch (readErr) {
      if ((readErr as { code?: string }).code !== "ENOENT") throw readErr;
      return { unsupported: `${path}: ${(err as Error).message}` }; // cannot be made here (a read-only DATA_DIR)
    }
  }
  if (lib.flock(fd, (mode === "shared" ? LOCK_SH : LOCK_EX) | LOCK_NB) === 0) {
    let released = false;
    return {
      lock: {
        release() {
          if (released) return;
          released = true;
          closeSync(fd); // closing the descriptor drops its lock
        },
      },
    };
  }
  const errno = lib.errno();
  closeSync(fd);
  // Held by another process; any other failure (a filesystem without locks, say NFS with ENOLCK) means this
  // system cannot lock, and the process goes on without, as before.
  return errno === lib.wouldBlock ? { held: true } : { unsupported: `flock failed (errno ${errno})` };
}

/**
 * The shared open lock of a database, taken before anything of it is read or written: waits up to `waitMs`
 * while a restore holds it exclusively, then throws `whileRestoring()`. Null where locks are unsupported.
 */
export function holdOpenLock(databasePath: string, whileRestoring: () => Error, options: { waitMs?: number; readOnlyUse?: boolean } = {}): FileLock | null {
  const path = lockPathOf(databasePath, "open");
  const deadline = Date.now() + (options.waitMs ?? 10_000);
  // A reader (backup by a user who may only read DATA_DIR) makes nothing there, and goes without a lock file it cannot open.
  if (options.readOnlyUse !== true) makeDirDurably(dirname(databasePath)); // a first start: the lock file goes where the database will
  for (;;) {
    let attempt: LockAttempt;
    try {
      attempt = tryLock(path, "shared");
    } catch (err) {
      if (options.readOnlyUse === true) return null;
      throw err;
    }
    if ("lock" in attempt) return attempt.lock;
    if ("unsupported" in attempt) return null;
    if (Date.now() >= deadline) throw whileRestoring();
    sleepSync(25);
  }
}

/** The message of a process that found the database being restored. */
export const restoringMessage = (databasePath: string) =>
  `${databasePath} is being restored (walletgate restore is running): start again once it has finished`;

/**
 * `serve`'s locks, taken before anything of the database is read: its own serve lock (a second server is
 * refused with `alreadyServed()`), then the shared open lock (see holdOpenLock). One release drops both.
 */
export function holdServeLocks(databasePath: string, errors: { alreadyServed: () => Error; restoring: () => Error }): FileLock {
  makeDirDurably(dirname(databasePath));
  const serve = tryLock(lockPathOf(databasePath, "serve"), "exclusive");
  if ("held" in serve) throw errors.alreadyServed();
  let open: FileLock | null;
  try {
    open = holdOpenLock(databasePath, errors.restoring);
  } catch (err) {
    if ("lock" in serve) serve.lock.release();
    throw err;
  }
  return {
    release() {
      open?.release();
      if ("lock" in serve) serve.lock.release();
    },
  };
}
