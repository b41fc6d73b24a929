// Tells whether a WAL database changed since the last look, from its WAL index, at no system call per look.
import { closeSync, fstatSync, openSync, readdirSync, readlinkSync, statSync } from "node:fs";

/** Says whether anything was committed since the last call. */
export type ChangeWatcher = { changed(): boolean };

/** A database's WAL index as this process holds it: one per database opened here, released after its close. */
export type WalIndex = {
  /** A watcher of the index (mapped on the first call for the file); null when it cannot be opened. */
  watch(): ChangeWatcher | null;
  /** Call once, after SQLite has closed the database (see Shared). */
  release(): void;
};

/** The first 96 bytes of the WAL index: its header, twice (SQLite's file-format documentation, "WAL-index format"). */
const HEADER_BYTES = 96;
/**
 * Of each copy: mxFrame (the last committed frame) and the header's own checksum, which covers every other
 * field (salts, frame checksums, page count): a commit or a reset of the log changes them.
 */
const WORDS = [4, 10, 11, 16, 22, 23];
/** Page size or more: mmap maps whole pages; only the header is read. */
const MAPPED_BYTES = 4096;

/**
 * One descriptor and mapping of a `-shm` file per process, shared by every database opened here on that
 * file (keyed by the database file's device, inode and path). The descriptor
 * stays open while any of those databases is open, whether or not it ever watched: closing *any*
 * descriptor of a file drops all of this process's POSIX locks on it, including the lock by which SQLite
 * tells other processes the index is in use. Without that lock the next process to open the database (a
 * CLI command) believes it is alone and truncates the file under this one (a bus error here). So the file
 * is opened once, never in passing (as `Bun.mmap` does: it takes a path and closes its own descriptor),
 * and closed only once SQLite has let go of it too.
 */
type Shared = {
  shmPath: string;
  /** Databases open here on this file. */
  open: number;
  /** Undefined until the first watch; null when the file could not be opened. */
  mapping: { fd: number; address: number | null; header: Uint32Array | null } | null | undefined;
};
const shared = new Map<string, Shared>();

type Libc = {
  mmap(address: null, length: number, protection: number, flags: number, fd: number, offset: number): number | bigint | null;
  munmap(address: number, length: number): number;
};
let libc: { symbols: Libc; toArrayBuffer(address: number, offset: number, length: number): ArrayBuffer } | null | undefined;

/** mmap/munmap through bun:ffi, loaded on first use (not at start-up); null where that is not possible. */
function loadLibc(): typeof libc {
  if (libc !== undefined) return libc;
  const name = process.platform === "linux" ? "libc.so.6" : process.platform === "darwin" ? "libSystem.B.dylib" : null;
  try {
    if (name === null) throw new Error("unsupported platform");
    const ffi = require("bun:ffi") as typeof import("bun:ffi");
    const { FFIType } = ffi;
    const opened = ffi.dlopen(name, {
      mmap: { args: [FFIType.ptr, FFIType.u64, FFIType.i32, FFIType.i32, FFIType.i32, FFIType.i64], returns: FFIType.ptr },
      munmap: { args: [FFIType.ptr, FFIType.u64], returns: FFIType.i32 },
    });
    libc = {
      symbols: opened.symbols as unknown as Libc,
      toArrayBuffer: (address, offset, length) => ffi.toArrayBuffer(address as never, offset, length),
    };
  } catch {
    libc = null; // e.g. musl: no libc.so.6. Then nothing is cached, as without a watcher.
  }
  return libc;
}

const PROT_READ = 1;
const MAP_SHARED = 1;

/** Opens and maps the header; the descriptor is kept even when the mapping fails (see Shared). */
function mapHeader(entry: Shared): Shared["mapping"] {
  const lib = loadLibc();
  if (lib === null || lib === undefined) return null;
  let fd: number;
  try {
    fd = openSync(entry.shmPath, "r");
  } catch {
    return null; // no WAL index: callers read the database every time
  }
  const mapping = { fd, address: null as number | null, header: null as Uint32Array | null };
  try {
    if (fstatSync(fd).size < HEADER_BYTES) return mapping;
    const address = lib.symbols.mmap(null, MAPPED_BYTES, PROT_READ, MAP_SHARED, fd, 0);
    // bun:ffi gives a mapped address as a number, and MAP_FAILED ((void *) -1, above 2^53) as a bigint.
    if (typeof address !== "number" || address <= 0) return mapping;
    mapping.address = address;
    mapping.header = new Uint32Array(lib.toArrayBuffer(address, 0, HEADER_BYTES));
  } catch {
    // kept unmapped: every look says "changed"
  }
  return mapping;
}

/**
 * Whether a descriptor of this process other than `ours` is open on `path` (Linux: /proc/self/fd). A close
 * of the database that SQLite only deferred (a statement was still live) leaves SQLite's descriptor, and
 * its locks, in place; closing ours then would drop them. Elsewhere, true: keep ours rather than guess.
 */
function othersHold(path: string, ours: number): boolean {
  let fds: string[];
  try {
    fds = readdirSync("/proc/self/fd");
  } catch {
    return true;
  }
  for (const fd of fds) {
    if (Number(fd) === ours) continue;
    try {
      const target = readlinkSync(`/proc/self/fd/${fd}`);
      if (target === path || target === `${path} (deleted)`) return true;
    } catch {
      // closed meanwhile
    }
  }
  return false;
}

/** The WAL index of the database at `dbPath` (its resolved path), for one database opened here. */
export function walIndexOf(dbPath: string): WalIndex {
  // The path too: an inode number is reused once a deleted file is gone, and an entry left by a database
  // never closed (tests) must not be taken for a new file's.
  const { dev, ino } = statSync(dbPath);
  const key = `${dev}:${ino}:${dbPath}`;
  let entry = shared.get(key);
  if (entry === undefined) shared.set(key, (entry = { shmPath: `${dbPath}-shm`, open: 0, mapping: undefined }));
  const mine = entry;
  mine.open++;
  let released = false;
  return {
    watch() {
      if (released) return null;
      if (mine.mapping === undefined) mine.mapping = mapHeader(mine);
      const mapping = mine.mapping;
      if (mapping === null || mapping === undefined) return null;
      return changeWatcher(mapping.header, () => released);
    },
    release() {
      if (released) return;
      released = true;
      if (--mine.open > 0) return;
      shared.delete(key);
      const mapping = mine.mapping;
      if (mapping === undefined || mapping === null) return;
      // Still held by SQLite (a deferred close): keep ours open for the life of the process instead.
      if (othersHold(mine.shmPath, mapping.fd)) return;
      if (mapping.address !== null) libc?.symbols.munmap(mapping.address, MAPPED_BYTES);
      closeSync(mapping.fd);
    },
  };
}

/**
 * Compares the header words with those seen at the last call. Read through the shared mapping: no lock, no
 * system call; a header being rewritten reads as a change. Without a mapped header, or once its database is
 * released, every call says "changed" (callers then read the database every time).
 */
function changeWatcher(header: Uint32Array | null, released: () => boolean): ChangeWatcher {
  const seen = new Uint32Array(WORDS.length);
  let first = true;
  return {
    changed() {
      if (header === null || released()) return true;
      let changed = first;
      first = false;
      for (let i = 0; i < WORDS.length; i++) {
        const now = header[WORDS[i]!]!;
        if (now !== seen[i]) {
          changed = true;
          seen[i] = now;
        }
      }
      return changed;
    },
  };
}
