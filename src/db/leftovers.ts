// Temporary copies a `backup` or `restore` killed mid-way left behind: each a whole database (token rows,
// sealed secrets) under a hidden name no later run would reuse, so each run clears those of dead runs.
import { readdirSync, rmSync } from "node:fs";
import { join } from "node:path";

/** Whether a process with this id is running (one of another user's counts: it cannot be signalled, but is there). */
function running(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === "EPERM";
  }
}

/**
 * Deletes the files of `dir` named `<prefix><pid>` or `<prefix><pid>-<anything>` whose process is no longer
 * running; returns their names. A file of a running process (this one, or a run going on beside it) stays.
 */
export function removeLeftovers(dir: string, prefix: string): string[] {
  let names: string[];
  try {
    names = readdirSync(dir);
  } catch {
    return []; // no directory: nothing left over in it
  }
  const removed: string[] = [];
  for (const name of names) {
    if (!name.startsWith(prefix)) continue;
    const pid = Number(/^(\d+)(?:-|$)/.exec(name.slice(prefix.length))?.[1]);
    if (!Number.isSafeInteger(pid) || pid <= 0 || running(pid)) continue;
    rmSync(join(dir, name), { force: true });
    removed.push(name);
  }
  return removed;
}
