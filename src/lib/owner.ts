// Files a process run as root (a command run with sudo) writes into a directory the server's own user owns:
// given to that user, or the server could not open them any more.
import { chownSync, statSync } from "node:fs";

/**
 * Gives `file` to the owner of `reference` (what it replaces, or the directory it is made in) when this
 * process is root and `reference` is not root's; otherwise does nothing (another user cannot give files
 * away, and its own are the server's).
 */
export function keepOwnerOf(reference: string, file: string): void {
  if (process.getuid?.() !== 0) return;
  const { uid, gid } = statSync(reference);
  if (uid !== 0 || gid !== 0) chownSync(file, uid, gid);
}
