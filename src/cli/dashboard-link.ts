// `walletgate dashboard-link --keypair <file> [--json]`: for headless servers, prints a one-time link that
// signs the keypair's wallet in to the web dashboard (dashboard.md "Sign-in"). The secret key is never printed.
import { readFileSync } from "node:fs";
import { UsageError, type Config } from "../config.ts";
import { createDashboardLink } from "../dashboard/links.ts";
import { AppError } from "../errors.ts";
import { toIso } from "../lib/clock.ts";
import { parseCommandArgs } from "./args.ts";
import { withCommandDeps } from "./context.ts";

const USAGE = `Usage: walletgate dashboard-link --keypair <file> [--json]
  <file> is a Solana CLI keypair file (a JSON array of 64 numbers, as solana-keygen writes)`;

const KEYPAIR_FILE_MAX_CHARS = 4096; // a keypair file is ~230 characters; anything far longer is not one

/** Why a keypair file cannot be read, in words (the file's content never goes into a message). */
function readFailure(err: unknown): string {
  const code = (err as NodeJS.ErrnoException).code;
  if (code === "ENOENT") return "no such file";
  if (code === "EACCES") return "permission denied";
  if (code === "EISDIR") return "is a directory";
  return code ?? "unreadable";
}

/** The 64 bytes of a Solana CLI keypair file's text; any other shape is a UsageError (exit 2). */
function parseKeypair(text: string, path: string): Uint8Array {
  const notKeypair = new UsageError(`--keypair: ${path} is not a Solana keypair file (a JSON array of 64 numbers, 0–255)`, USAGE);
  if (text.length > KEYPAIR_FILE_MAX_CHARS) throw notKeypair;
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    throw notKeypair; // not the parser's message: it may quote the file
  }
  if (!Array.isArray(parsed)) throw notKeypair;
  try {
    if (parsed.length !== 64 || !parsed.every((n) => Number.isInteger(n) && n >= 0 && n <= 255)) throw notKeypair;
    return Uint8Array.from(parsed as number[]);
  } finally {
    parsed.fill(0);
  }
}

export async function dashboardLinkCommand(config: Config, args: string[]): Promise<number> {
  const { values } = parseCommandArgs(args, { keypair: { type: "string" }, json: { type: "boolean" } }, { min: 0, max: 0 }, USAGE);
  if (values.keypair === undefined) throw new UsageError(`--keypair <file> is required`, USAGE);
  let text: string;
  try {
    text = readFileSync(values.keypair, "utf8");
  } catch (err) {
    process.stderr.write(`walletgate: cannot read keypair file ${values.keypair}: ${readFailure(err)}\n`);
    return 1;
  }
  const secretKey = parseKeypair(text, values.keypair);
  try {
    return await withCommandDeps(config, async (deps) => {
      try {
        const link = await createDashboardLink(deps, secretKey);
        const json = { url: link.url, walletAddress: link.walletAddress, expiresAt: toIso(link.expiresAt) };
        process.stdout.write(values.json ? `${JSON.stringify(json)}\n` : `${link.url}\n`);
        return 0;
      } catch (err) {
        if (!(err instanceof AppError)) throw err;
        const reason =
          err.code === "INVALID_SIGNATURE" ? `${values.keypair}: its public key is not the one of its secret key (a damaged or hand-edited keypair file?)` : err.message;
        process.stderr.write(`walletgate: ${reason}\n`);
        return err.code === "VALIDATION_ERROR" ? 2 : 1;
      }
    });
  } finally {
    secretKey.fill(0);
  }
}
