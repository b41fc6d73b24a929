// `walletgate serve`: runs the HTTP server until SIGINT or SIGTERM (or, with EXIT_WITH_PARENT, until the
// process that started it ends), then shuts down gracefully.
import type { Config } from "../config.ts";
import { parseCommandArgs } from "./args.ts";
import { startServer } from "../server.ts";

/** How often EXIT_WITH_PARENT looks at the parent process id (it changes when the parent ends). */
const PARENT_CHECK_MS = 500;

export async function serveCommand(config: Config, args: string[]): Promise<number> {
  parseCommandArgs(args, {}, { min: 0, max: 0 });
  // Read before the start (migrations may take a while): a parent that ends meanwhile is seen too.
  const parent = process.ppid;
  const server = await startServer(config);
  const { promise: done, resolve } = Promise.withResolvers<number>();
  let parentWatch: ReturnType<typeof setInterval> | undefined;
  let stopping = false;
  const shutdown = (why: Record<string, string>) => {
    if (stopping) return;
    stopping = true;
    clearInterval(parentWatch);
    server.deps.log.info("shutting down", why);
    server.stop().then(
      () => resolve(0),
      () => resolve(1),
    );
  };
  process.once("SIGINT", () => shutdown({ signal: "SIGINT" }));
  process.once("SIGTERM", () => shutdown({ signal: "SIGTERM" }));
  if (config.exitWithParent !== false) {
    // An orphan is adopted by init or a subreaper: its parent id changes. (A test runner killed with
    // SIGKILL sends no signal to the server it started.) Looked at once right away, for a parent that ended
    // during the start.
    const watched = config.exitWithParent;
    const lookAtParent = () => {
      if (typeof watched === "number" ? !alive(watched) : process.ppid !== parent) shutdown({ cause: "the process that started it ended (EXIT_WITH_PARENT)" });
    };
    parentWatch = setInterval(lookAtParent, PARENT_CHECK_MS);
    lookAtParent();
  }
  return done;
}

/** Whether a process of this id exists (one of another user's answers EPERM: it does). */
function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as { code?: string }).code === "EPERM";
  }
}
