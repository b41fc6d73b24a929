// The file a path names once symbolic links are followed, also when that file is still to be made (pure helper).
import { lstatSync, readlinkSync, realpathSync } from "node:fs";
import { basename, dirname, join, resolve } from "node:path";

/** Links followed at most, as the kernel's own limit (ELOOP past it). */
const MAX_HOPS = 40;

/**
 * `realpathSync(path)` where the file exists. Where it does not, the links are followed by hand to the
 * name that is missing: a database path that is a link to a file still to be made (DATA_DIR/walletgate.db
 * linked to a volume before the first start) is made where the link points, under the name every later
 * start resolves to.
 */
export function fileBehind(path: string): string {
  try {
    return realpathSync(path);
  } catch (err) {
    if ((err as { code?: string }).code !== "ENOENT") throw err;
  }
  let current = resolve(path);
  for (let hop = 0; hop < MAX_HOPS; hop++) {
    let isLink: boolean;
    try {
      isLink = lstatSync(current).isSymbolicLink();
    } catch {
      isLink = false; // nothing there: this is the name to make
    }
    if (!isLink) break;
    current = resolve(dirname(current), readlinkSync(current));
  }
  try {
    return join(realpathSync(dirname(current)), basename(current));
  } catch {
    return current; // its folder is missing too: opening it says so
  }
}
