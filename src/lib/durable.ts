// Files that must survive a crash or a power cut once written: their data, and their name in a directory.
import { randomUUID } from "node:crypto";
import { closeSync, fsyncSync, linkSync, mkdirSync, openSync, rmSync, writeFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { removeLeftovers } from "./leftovers.ts";
import { keepOwnerOf } from "./owner.ts";

/** Flushes a file, or a directory's entries, to disk. */
export function fsyncPath(path: string): void {
  const fd = openSync(path, "r");
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}

/**
 * Flushes a directory's entries. Some filesystems cannot (network and FUSE mounts answer EINVAL, a parent
 * may be execute-only): as SQLite does, that is not an error — the files' own data is still flushed.
 */
export function fsyncDir(path: string): void {
  try {
    fsyncPath(path);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code !== "EINVAL" && code !== "ENOTSUP" && code !== "EOPNOTSUPP" && code !== "EACCES" && code !== "EPERM") throw err;
  }
}

/**
 * `mkdir -p` (mode 0700) whose new directories stay made after a power cut: each one's name is flushed
 * in its parent, as SQLite and the secrets flush what they create inside.
 */
export function makeDirDurably(path: string): void {
  const created = mkdirSync(path, { recursive: true, mode: 0o700 });
  if (created === undefined) return;
  const first = resolve(created);
  for (let dir = resolve(path); dir !== dirname(dir); dir = dirname(dir)) {
    fsyncDir(dirname(dir));
    if (dir === first) return;
  }
}

/** The hidden names a file of createFilesDurably is written under before it is linked into place: prefix, id, suffix. */
const asidePrefix = (name: string) => `.${name}.`;
const ASIDE_SUFFIX = ".tmp";

/**
 * Removes what a createFilesDurably killed before its cleanup left of `names` in `dir` (a copy of a secret
 * under a hidden second name would outlive the secret's rotation), once stale (lib/leftovers.ts).
 */
export function removeAsideLeftovers(dir: string, names: readonly string[], now = Date.now()): void {
  removeLeftovers(dir, names.map(asidePrefix), now, ASIDE_SUFFIX);
}

/**
 * Creates the files of `dir` that do not exist yet, each whole or not at all: written aside (under a
 * name no other process can hold: processes in containers often share a pid), flushed, linked into
 * place (a name that exists by then is left as it is: two processes starting at once agree on one
 * file), then the directory flushed, whoever created the names. Returns the names it created.
 */
export function createFilesDurably(dir: string, files: readonly { name: string; data: string | Uint8Array; mode: number }[]): string[] {
  makeDirDurably(dir);
  const temps: string[] = [];
  const created: string[] = [];
  try {
    for (const f of files) {
      const temp = join(dir, `${asidePrefix(f.name)}${randomUUID()}${ASIDE_SUFFIX}`);
      temps.push(temp); // before writing: a write that fails part-way (disk full) leaves its file to remove
      writeFileSync(temp, f.data, { mode: f.mode, flag: "wx" });
      keepOwnerOf(dir, temp); // made by root in a DATA_DIR another user owns: that user's server reads it
    }
    for (const temp of temps) fsyncPath(temp);
    files.forEach((f, i) => {
      try {
        linkSync(temps[i]!, join(dir, f.name));
        created.push(f.name);
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== "EEXIST") throw err;
      }
    });
    fsyncDir(dir); // also when another process linked a name and has not flushed it yet
  } finally {
    for (const temp of temps) rmSync(temp, { force: true });
  }
  return created;
}
