// `walletgate owners list|set-tier <wallet> free|pro|unlimited [--json]`: the operator's view of owners.
import { UsageError, type Config } from "../config.ts";
import { AppError } from "../errors.ts";
import { listOwners, setOwnerTier, TIERS } from "../paygate/owners.ts";
import { parseCommandArgs } from "./args.ts";
import { withCommandDeps } from "./context.ts";

const USAGE = `Usage: walletgate owners list [--json]
       walletgate owners set-tier <wallet> ${TIERS.join("|")} [--json]`;

export async function ownersCommand(config: Config, args: string[]): Promise<number> {
  const { values, positionals } = parseCommandArgs(args, { json: { type: "boolean" } }, { min: 1, max: 3 }, USAGE);
  const [sub, wallet, tier] = positionals as [string, string | undefined, string | undefined];
  if (sub === "list" && positionals.length === 1) {
    return withCommandDeps(config, async (deps) => {
      const owners = await listOwners(deps);
      process.stdout.write(values.json ? `${JSON.stringify({ owners })}\n` : owners.map((o) => `${o.walletAddress}\t${o.tier}\t${o.createdAt}\n`).join(""));
      return 0;
    });
  }
  if (sub === "set-tier" && wallet !== undefined && tier !== undefined) {
    return withCommandDeps(config, async (deps) => {
      try {
        const owner = await setOwnerTier(deps, wallet, tier);
        process.stdout.write(values.json ? `${JSON.stringify(owner)}\n` : `${owner.walletAddress}\t${owner.tier}\n`);
        return 0;
      } catch (err) {
        if (!(err instanceof AppError)) throw err;
        process.stderr.write(`walletgate: ${err.message}\n`);
        return err.code === "VALIDATION_ERROR" || err.code === "INVALID_ADDRESS" ? 2 : 1;
      }
    });
  }
  throw new UsageError(sub === "list" || sub === "set-tier" ? `owners ${sub}: wrong arguments` : `unknown owners command "${sub}"`, USAGE);
}
