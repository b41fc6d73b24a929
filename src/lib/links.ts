// Where a path leads through symbolic links, also when the file at the end is still to be made (pure helper).
import { lstatSync, readlinkSync, realpathSync } from "node:fs";
import { basename, dirname, join, resolve } from "node:path";

/** Links followed at most, as the kernel's own limit (ELOOP past it). */
const MAX_LINKS = 40;

/** Why a chain of links leads nowhere: a loop, or a folder on the way that is missing or cannot be resolved. */
export class LinkError extends Error {
  constructor(
    readonly reason: "loop" | "missing-folder" | "unresolvable",
    /** The path the last link names, as written (joined to its link's folder when relative). */
    readonly leadsTo: string,
    message: string,
  ) {
    super(message);
  }
}

/**
 * Where a symlink whose target is missing points, through every link of a chain; null if `path` is no
 * link. Resolved as the kernel does: each link's text from the link's own folder, its folder part with
 * realpath(3) (links first, then ".."), its last name looked at by the next round. The folder must exist
 * (LinkError otherwise): a missing one is more likely a volume not mounted than a place to make.
 */
export function linkTarget(path: string): string | null {
  let target = path;
  for (let links = 0; ; links++) {
    let isLink: boolean;
    try {
      isLink = lstatSync(target).isSymbolicLink();
    } catch {
      break; // not there, under a file, or not ours to look at: the end of the chain, judged by what follows
    }
    if (!isLink) break;
    if (links === MAX_LINKS) throw new LinkError("loop", target, `${path} is a chain of more than ${MAX_LINKS} links (a loop?)`);
    const written = readlinkSync(target);
    const joined = written.startsWith("/") ? written : `${dirname(target)}/${written}`;
    try {
      target = join(realpathSync.native(dirname(joined)), basename(joined)); // native: realpath(3), not a textual "..".
    } catch (err) {
      if ((err as { code?: string }).code === "ENOENT") throw new LinkError("missing-folder", joined, `${path} leads to ${joined}, whose directory does not exist`);
      throw new LinkError("unresolvable", joined, `${path} leads to ${joined}, whose directory cannot be resolved (${(err as Error).message})`);
    }
  }
  return target === path ? null : target;
}

/**
 * `realpathSync(path)` where the file exists. Where it does not, the file to make: through the links to the
 * name that is missing (DATA_DIR/walletgate.db linked to a volume before the first start), its folder
 * resolved, so that it is the name every later start resolves to. A folder missing on the way fails as
 * opening there would (ENOENT naming it), which the callers word; a loop or a folder that cannot be
 * resolved keeps its LinkError's own sentence.
 */
export function fileBehind(path: string): string {
  try {
    return realpathSync(path);
  } catch (err) {
    if ((err as { code?: string }).code !== "ENOENT") throw err;
  }
  const absolute = resolve(path);
  let viaLinks: string | null;
  try {
    viaLinks = linkTarget(absolute);
  } catch (err) {
    if (err instanceof LinkError && err.reason === "missing-folder") throw Object.assign(new Error(err.message), { code: "ENOENT", path: err.leadsTo });
    throw err;
  }
  if (viaLinks !== null) return viaLinks; // its folder resolved already
  try {
    return join(realpathSync(dirname(absolute)), basename(absolute));
  } catch {
    return absolute; // its folder is missing: opening it says so
  }
}
