// Files that must survive a crash or a power cut once written: their data, and their name in a directory.
import { closeSync, fsyncSync, mkdirSync, openSync } from "node:fs";
import { dirname, resolve } from "node:path";

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
 * `mkdir -p` (mode 0700) whose new directories stay made after a power cut: each one's name is flushed
 * in its parent, as SQLite and the secrets flush what they create inside.
 */
export function makeDirDurably(path: string): void {
  const created = mkdirSync(path, { recursive: true, mode: 0o700 });
  if (created === undefined) return;
  for (let dir = resolve(path); ; dir = dirname(dir)) {
    fsyncPath(dirname(dir));
    if (dir === resolve(created)) return;
  }
}
