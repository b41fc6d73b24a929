// Tells whether a WAL database changed since the last look, from its WAL index, at no system call per look.
import { closeSync, fstatSync, openSync } from "node:fs";

/** Says whether anything was committed since the last call; `release` once its database is closed. */
export type ChangeWatcher = { changed(): boolean; release(): void };

/** The first 96 bytes of the WAL index: its header, twice (SQLite's file-format documentation, "WAL-index format"). */
const HEADER_BYTES = 96;
/**
 * Of each copy: mxFrame (the last committed frame) and the header's own checksum, which covers every other
 * field (salts, frame checksums, page count): a commit or a reset of the log changes them.
 */
const WORDS = [4, 10, 11, 16, 22, 23];

/**
 * One mapping of a `-shm` file per process, shared by every database opened on it here. Its descriptor
 * stays open until the last of them is closed, and that matters: closing *any* descriptor of a file drops
 * all of this process's POSIX locks on it, including the lock by which SQLite tells other processes the
 * WAL index is in use. Without that lock the next process to open the database (a CLI command) would
 * believe it was alone and truncate the file under this one (a bus error here). So the file is opened
 * once, kept open, and closed only after SQLite has let go of it — never opened and closed in passing
 * (as `Bun.mmap` does: it takes a path and closes its own descriptor).
 */
type Mapping = { header: Uint32Array | null; fd: number; address: number; users: number };
const mappings = new Map<string, Mapping>();

/** Page size or more: mmap maps whole pages; only the header is read. */
const MAPPED_BYTES = 4096;

type Libc = {
  mmap(address: null, length: number, protection: number, flags: number, fd: number, offset: number): number | null;
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
    libc = null;
  }
  return libc;
}

const PROT_READ = 1;
const MAP_SHARED = 1;

/** This process's mapping of `shmPath`, made on first use; null when the file cannot be opened. */
function mapHeader(shmPath: string): Mapping | null {
  const kept = mappings.get(shmPath);
  if (kept !== undefined) {
    kept.users++;
    return kept;
  }
  const lib = loadLibc();
  if (lib === null || lib === undefined) return null;
  let fd: number;
  try {
    fd = openSync(shmPath, "r");
  } catch {
    return null; // no WAL index (yet): callers read the database every time
  }
  // From here on the descriptor is closed only by unmap (see Mapping), mapped or not.
  const mapping: Mapping = { header: null, fd, address: 0, users: 1 };
  mappings.set(shmPath, mapping);
  if (fstatSync(fd).size < HEADER_BYTES) return mapping;
  const address = lib.symbols.mmap(null, MAPPED_BYTES, PROT_READ, MAP_SHARED, fd, 0);
  // MAP_FAILED is (void *) -1; user-space addresses are far below 2^62.
  if (typeof address !== "number" || address <= 0 || address >= 2 ** 62) return mapping;
  mapping.address = address;
  mapping.header = new Uint32Array(lib.toArrayBuffer(address, 0, HEADER_BYTES));
  return mapping;
}

function unmap(shmPath: string): void {
  const mapping = mappings.get(shmPath);
  if (mapping === undefined || --mapping.users > 0) return;
  mappings.delete(shmPath);
  if (mapping.address !== 0) libc?.symbols.munmap(mapping.address, MAPPED_BYTES);
  closeSync(mapping.fd);
}

/**
 * Watches the WAL index at `shmPath` (which SQLite rewrites on every commit and every reset of the log, from
 * any process). Read through the shared mapping: no lock, no system call; a header being rewritten reads as
 * a change. Null when the file cannot be opened; a watcher whose file cannot be mapped says "changed" every
 * time (either way callers read the database every time, as without a watcher). Call only
 * once SQLite has the file open, and `release()` only after closing the database: see Mapping.
 */
export function watchWalIndex(shmPath: string): ChangeWatcher | null {
  const mapping = mapHeader(shmPath);
  if (mapping === null) return null;
  const { header } = mapping;
  const seen = new Uint32Array(WORDS.length);
  let first = true;
  let released = false;
  return {
    changed() {
      if (released || header === null) return true;
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
    release() {
      if (released) return;
      released = true;
      unmap(shmPath);
    },
  };
}
