// Turns a domain call into its outcome: "OK", or the catalogue code of the AppError it threw.
import { AppError } from "../../src/errors.ts";

export async function codeOf(p: Promise<unknown>): Promise<string> {
  try {
    await p;
    return "OK";
  } catch (e) {
    if (e instanceof AppError) return e.code;
    throw e;
  }
}

/** The outcome with the refusal's `details.reason`: "OK", or "CODE:reason" ("CODE:" without one). */
export async function reasonOf(p: Promise<unknown>): Promise<string> {
  try {
    await p;
    return "OK";
  } catch (e) {
    if (!(e instanceof AppError)) throw e;
    return `${e.code}:${(e.extra.details as { reason?: string } | undefined)?.reason ?? ""}`;
  }
}
