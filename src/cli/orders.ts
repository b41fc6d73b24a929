// `walletgate orders resolve <orderId> --release|--refund [--json]`: the operator ends a marketplace dispute.
import { UsageError, type Config } from "../config.ts";
import { AppError } from "../errors.ts";
import { importQuietly } from "../lib/quiet-import.ts";
import { parseCommandArgs } from "./args.ts";
import { withCommandDeps } from "./context.ts";

const USAGE = "Usage: walletgate orders resolve <orderId> --release|--refund [--json]";

export async function ordersCommand(config: Config, args: string[]): Promise<number> {
  const { values, positionals } = parseCommandArgs(
    args,
    { release: { type: "boolean" }, refund: { type: "boolean" }, json: { type: "boolean" } },
    { min: 2, max: 2 },
    USAGE,
  );
  const [sub, orderId] = positionals as [string, string];
  if (sub !== "resolve") throw new UsageError(`unknown orders command "${sub}"`, USAGE);
  if (values.release === values.refund) throw new UsageError("orders resolve needs exactly one of --release and --refund", USAGE);
  return withCommandDeps(config, async (deps) => {
    const { resolveDispute } = await importQuietly(() => import("../marketplace/orders/orders.ts"));
    try {
      const order = await resolveDispute(deps, orderId, values.release ? "release" : "refund");
      const tx = order.releaseTx ?? order.refundTx;
      process.stdout.write(values.json ? `${JSON.stringify({ order })}\n` : `${order.orderId}\t${order.status}\t${tx}\n`);
      return 0;
    } catch (err) {
      if (!(err instanceof AppError)) throw err;
      process.stderr.write(`walletgate: ${err.message}\n`);
      return 1;
    }
  });
}
