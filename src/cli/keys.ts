// `walletgate keys create --owner <wallet> --label <text> | list --owner <wallet> | revoke <keyId>` [--json]:
// API keys for headless servers. `create` prints the key once (the value alone, or JSON with --json).
import { UsageError, type Config } from "../config.ts";
import { AppError } from "../errors.ts";
import { decodeAddress, NOT_REPEATED } from "../lib/encoding.ts";
import { createApiKey, listApiKeys, revokeApiKeyAsOperator } from "../paygate/keys.ts";
import { parseCommandArgs } from "./args.ts";
import { withCommandDeps } from "./context.ts";

const USAGE = `Usage: walletgate keys create --owner <wallet> --label <text> [--json]
       walletgate keys list --owner <wallet> [--json]
       walletgate keys revoke <keyId> [--json]`;

function requireOwner(owner: string | undefined): string {
  if (owner === undefined) throw new UsageError(`--owner <wallet> is required`, USAGE);
  if (decodeAddress(owner) === null) throw new UsageError(`--owner: not a Solana address ${NOT_REPEATED}`, USAGE);
  return owner;
}

export async function keysCommand(config: Config, args: string[]): Promise<number> {
  const { values, positionals } = parseCommandArgs(
    args,
    { owner: { type: "string" }, label: { type: "string" }, json: { type: "boolean" } },
    { min: 1, max: 2 },
    USAGE,
  );
  const [sub, keyId] = positionals as [string, string | undefined];
  const print = (json: unknown, text: string) => process.stdout.write(values.json ? `${JSON.stringify(json)}\n` : `${text}\n`);
  const run = (work: Parameters<typeof withCommandDeps<number>>[1]) =>
    withCommandDeps(config, async (deps) => {
      try {
        return await work(deps);
      } catch (err) {
        if (!(err instanceof AppError)) throw err;
        process.stderr.write(`walletgate: ${err.message}\n`);
        return err.code === "VALIDATION_ERROR" ? 2 : 1;
      }
    });
  if (sub === "create" && keyId === undefined) {
    const owner = requireOwner(values.owner);
    if (values.label === undefined) throw new UsageError(`--label <text> is required`, USAGE);
    const label = values.label;
    return run(async (deps) => {
      const created = await createApiKey(deps, owner, label);
      print(created, created.key);
      // The key alone on stdout (KEY=$(walletgate keys create …)); what revokes it beside, for the reader.
      if (!values.json) process.stderr.write(`key id ${created.keyId} (walletgate keys revoke ${created.keyId}); the key is shown only this once\n`);
      return 0;
    });
  }
  if (sub === "list" && keyId === undefined) {
    const owner = requireOwner(values.owner);
    return run(async (deps) => {
      const keys = await listApiKeys(deps, owner);
      print({ keys }, keys.map((k) => `${k.keyId}\t${k.prefix}\t${k.label}\t${k.revokedAt === null ? "active" : "revoked"}\t${k.lastUsedAt ?? "-"}`).join("\n"));
      return 0;
    });
  }
  if (sub === "revoke" && keyId !== undefined) {
    return run(async (deps) => {
      print(await revokeApiKeyAsOperator(deps, keyId), `revoked ${keyId}`);
      return 0;
    });
  }
  throw new UsageError(sub === "create" || sub === "list" || sub === "revoke" ? `keys ${sub}: wrong arguments` : `unknown keys command "${sub}"`, USAGE);
}
