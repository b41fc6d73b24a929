// `walletgate restore <file> [--json]`: a backup of `walletgate backup` put back as DATA_DIR's database.
import { dataDirError, type Config } from "../config.ts";
import { RestoreError, restoreDatabase } from "../db/restore.ts";
import { parseCommandArgs } from "./args.ts";

export async function restoreCommand(config: Config, args: string[]): Promise<number> {
  const { values, positionals } = parseCommandArgs(args, { json: { type: "boolean" } }, { min: 1, max: 1 }, "Usage: walletgate restore <file> [--json]");
  try {
    // Said before each step, on stderr (stdout holds the answer): on a big database each takes seconds.
    const result = restoreDatabase(config.databasePath, positionals[0]!, new Date(), undefined, (step) => process.stderr.write(`${step}\n`));
    process.stdout.write(values.json ? `${JSON.stringify(result)}\n` : `${result.restored}\n`);
    if (result.movedAside !== null) process.stderr.write(`the database it replaced, with its log, is now ${result.movedAside}\n`);
    const carried = result.revocations;
    if (carried !== null && "skipped" in carried) {
      process.stderr.write(`warning: revocations made after the backup were NOT carried over (${carried.skipped}): revoke leaked tokens and keys again, and delete webhook endpoints deleted since again\n`);
    } else if (carried !== null) {
      const { sessionTokens, walletCutoffs, apiKeys, featureTokens, spentProofs, webhookSecrets, mcpSessions, webhookEndpoints, agentEndpoints } = carried;
      process.stderr.write(
        `revocations made after the backup, carried over: ${sessionTokens} session tokens, ${walletCutoffs} revoke-alls, ${apiKeys} API keys, ` +
          `${featureTokens} feature tokens, ${spentProofs} spent challenges and sign-in links, ${webhookSecrets} rotated webhook secrets, ` +
          `${mcpSessions} ended MCP sessions, ${webhookEndpoints} webhook endpoints disabled, moved or deleted, ${agentEndpoints} marketplace agents' endpoints or status changed\n`,
      );
    }
    const keys = result.walletKeys;
    if (keys !== null && "skipped" in keys) {
      process.stderr.write(
        `warning: custodial wallets made after the backup were NOT carried over (${keys.skipped}): their keys are only in ${result.movedAside}; keep that file\n`,
      );
    } else if (keys !== null) {
      if (keys.custodialWallets > 0) {
        process.stderr.write(`custodial wallets made after the backup, their keys carried over: ${keys.custodialWallets} (${keys.escrows} escrow records)\n`);
      }
      if (keys.notCarried.length > 0) {
        process.stderr.write(
          `warning: ${keys.notCarried.length} custodial wallets made after the backup were NOT carried over (sealed under another WALLET_ENCRYPTION_KEY than the backup's): ` +
            `their keys are only in ${result.movedAside}; keep that file and its key. They are: ${keys.notCarried.join(", ")}\n`,
        );
      }
    }
    process.stderr.write("restored; start the server with the secret files (or JWT_SECRET, WALLET_ENCRYPTION_KEY) of the backup's DATA_DIR\n");
    return 0;
  } catch (err) {
    if (!(err instanceof RestoreError) && (err as NodeJS.ErrnoException).code === undefined) throw err;
    // A failure of DATA_DIR's files names DATA_DIR and says what is wrong, not only the system's word.
    const path = (err as { path?: unknown }).path;
    const ofDataDir = typeof path !== "string" || path.startsWith(config.dataDir); // not the backup file's
    const said = err instanceof RestoreError || !ofDataDir ? err : (dataDirError(config, err) ?? err);
    process.stderr.write(`walletgate: restore failed: ${said instanceof Error ? said.message : String(said)}\n`);
    return 1;
  }
}
