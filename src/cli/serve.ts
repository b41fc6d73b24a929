// `walletgate serve`: runs the HTTP server until SIGINT or SIGTERM, then shuts down gracefully.
import type { Config } from "../config.ts";
import { parseCommandArgs } from "./args.ts";
import { startServer } from "../server.ts";

export async function serveCommand(config: Config, args: string[]): Promise<number> {
  parseCommandArgs(args, {}, { min: 0, max: 0 });
  const server = await startServer(config);
  const { promise: done, resolve } = Promise.withResolvers<number>();
  const shutdown = (signal: string) => {
    server.deps.log.info("shutting down", { signal });
    server.stop().then(
      () => resolve(0),
      () => resolve(1),
    );
  };
  process.once("SIGINT", () => shutdown("SIGINT"));
  process.once("SIGTERM", () => shutdown("SIGTERM"));
  return done;
}
