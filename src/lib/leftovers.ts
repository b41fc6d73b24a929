// Temporary files a process killed mid-way left behind: copies of `backup` and `restore` (each a whole
// database: token rows, sealed secrets), and the files a first start writes aside before linking them into
// place (DATA_DIR's secrets, the new database), each under a hidden name no later run would reuse, so
// later runs clear the stale ones.
import { readdirSync, rmSync, statSync } from "node:fs";
import { join } from "node:path";

/**
 * A copy not written for this long is no run's any more. Judged by the file, not by its process id: in a
 * container every run may be process 1, and a run in another container on the same volume is not seen.
 */
export const LEFTOVER_AFTER_MS = 3_600_000;

/**
 * Deletes the files of `dir` whose names start with `prefix` (or one of them) and end with `suffix`, and
 * that were last written LEFTOVER_AFTER_MS ago or more; returns their names.
 */
export function removeLeftovers(dir: string, prefix: string | readonly string[], now = Date.now(), suffix = ""): string[] {
  const prefixes = typeof prefix === "string" ? [prefix] : prefix;
  let names: string[];
  try {
    names = readdirSync(dir);
  } catch {
    return []; // no directory: nothing left over in it
  }
  const removed: string[] = [];
  for (const name of names) {
    if (!prefixes.some((p) => name.startsWith(p)) || !name.endsWith(suffix)) continue;
    const path = join(dir, name);
    try {
      if (now - statSync(path).mtimeMs < LEFTOVER_AFTER_MS) continue;
    } catch {
      continue; // gone meanwhile
    }
    rmSync(path, { force: true });
    removed.push(name);
  }
  return removed;
}
