// Turns a domain call into its outcome: "OK", or the catalogue code of the AppError it threw.
import { expect } from "bun:test";
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

/**
 * An HTTP error answer's status and code, after checking its body has the catalogue's shape (spec/README.md
 * "Errors"): `{error, code}` with a human text, plus only `retryAfter` and `details` (and `success: false`
 * where a revoke answers in the source document's shape).
 */
export function statusAndCode(res: { status: number; body: Record<string, unknown> }): [number, unknown] {
  if (res.status >= 400) {
    expect({ status: res.status, error: typeof res.body.error, code: typeof res.body.code }).toEqual({ status: res.status, error: "string", code: "string" });
    expect((res.body.error as string).length).toBeGreaterThan(0);
    const extra = Object.keys(res.body).filter((key) => !["error", "code", "retryAfter", "details"].includes(key) && !(key === "success" && res.body.success === false));
    expect(extra).toEqual([]);
  }
  return [res.status, res.body.code];
}
