// The one error vocabulary (spec/README.md): AppError carries a catalogue code; the table maps it to HTTP.
import { characters } from "./lib/text.ts";
import { parseAmount } from "./lib/amounts.ts";
import { jsonNestsDeeperThan } from "./lib/json.ts";

export const ERROR_STATUS = {
  VALIDATION_ERROR: 400,
  INVALID_ADDRESS: 400,
  INVALID_SIGNATURE: 401,
  NONCE_NOT_FOUND: 401,
  NONCE_USED: 401,
  CHALLENGE_EXPIRED: 401,
  UNAUTHENTICATED: 401,
  TOKEN_INVALID: 401,
  TOKEN_EXPIRED: 401,
  TOKEN_REVOKED: 401,
  MISSING_API_KEY: 401,
  INVALID_API_KEY: 401,
  PAYMENT_REQUIRED: 402,
  FORBIDDEN: 403,
  NOT_FOUND: 404,
  CONFLICT: 409,
  INVALID_STATE: 409,
  PAYLOAD_TOO_LARGE: 413,
  INSUFFICIENT_FUNDS: 422,
  PAYMENT_MISMATCH: 422,
  TRANSACTION_REJECTED: 422,
  NOT_SUPPORTED: 422,
  RATE_LIMITED: 429,
  INTERNAL_ERROR: 500,
  CHAIN_UNAVAILABLE: 503,
} as const;

export type ErrorCode = keyof typeof ERROR_STATUS;

export type ErrorExtra = { retryAfter?: number; details?: unknown };

/** One field a refusal names: `details.fields` is a list of these wherever an error names fields. */
export type FieldProblem = { field: string; message: string };

export class AppError extends Error {
  readonly code: ErrorCode;
  readonly extra: ErrorExtra;
  constructor(code: ErrorCode, message: string, extra: ErrorExtra = {}) {
    super(message);
    this.name = "AppError";
    this.code = code;
    this.extra = extra;
  }
  get status(): number {
    return ERROR_STATUS[this.code];
  }
}

/**
 * A refusal naming one field (VALIDATION_ERROR unless `code` says otherwise): `message` is the error's
 * text and the field's; `extra` joins `details` (e.g. `reason`).
 */
export function fieldError(field: string, message: string, extra: Record<string, unknown> = {}, code: ErrorCode = "VALIDATION_ERROR"): AppError {
  return new AppError(code, message, { details: { fields: [{ field, message }] satisfies FieldProblem[], ...extra } });
}

/** The HTTP error body: `{error, code}` plus `retryAfter` / `details` when present. */
export function errorBody(err: AppError): Record<string, unknown> {
  const body: Record<string, unknown> = { error: err.message, code: err.code };
  if (err.extra.retryAfter !== undefined) body.retryAfter = err.extra.retryAfter;
  if (err.extra.details !== undefined) body.details = err.extra.details;
  return body;
}

/** The `details.reason` an error carries (TRANSACTION_REJECTED, PAYMENT_MISMATCH…); undefined when none. */
export function reasonOf(err: unknown): string | undefined {
  if (!(err instanceof AppError)) return undefined;
  const reason = (err.extra.details as { reason?: unknown } | undefined)?.reason;
  return typeof reason === "string" ? reason : undefined;
}

/** A request body that does not parse as JSON (wherever bodies are parsed). */
export function invalidJsonBody(): AppError {
  return fieldError("body", "request body is not valid JSON");
}

/** How deep a request body's arrays and objects may nest: every body of the API needs four levels at most. */
export const MAX_BODY_DEPTH = 32;

/**
 * A JSON request body, parsed; VALIDATION_ERROR when it is not JSON or nests deeper than MAX_BODY_DEPTH.
 * The depth is checked first: a 60 KB body nested 10,000 deep parses, but then costs seconds and gigabytes
 * in the schema's error report (and 30,000 deep overflows the stack), on a route anyone may call.
 */
export function parseJsonBody(text: string): unknown {
  if (jsonNestsDeeperThan(text, MAX_BODY_DEPTH)) {
    throw fieldError("body", `request body nests arrays and objects deeper than ${MAX_BODY_DEPTH} levels`);
  }
  try {
    return JSON.parse(text);
  } catch {
    throw invalidJsonBody();
  }
}

/**
 * The parser (Elysia's `parse`) of a route whose body is JSON: parsed by parseJsonBody. Forms are refused:
 * Elysia's form parser reads a field that starts with `{` or `[` as JSON, with no depth limit, and no such
 * route takes a form. Other content types go on to Elysia's own parsers (text stays text, which the route's
 * schema refuses). Set on each route with a body, not on a group: routes without one never read it.
 */
export async function jsonBodyParser({ request, contentType }: { request: Request; contentType: string }): Promise<unknown> {
  const type = contentType.toLowerCase();
  if (type.startsWith("application/json")) return parseJsonBody(await request.text());
  refuseForm(type);
  return undefined;
}

function refuseForm(type: string): void {
  if (type.startsWith("multipart/form-data") || type.startsWith("application/x-www-form-urlencoded")) {
    throw fieldError("body", "request bodies are JSON: send content-type: application/json");
  }
}

/**
 * Parses, in place, a body a route read as text (`parse: "text"`), for a group whose caller is checked before
 * any body is parsed: JSON by its content type, as jsonBodyParser would have read it; a form refused; other
 * text left as text, which the route's schema refuses.
 */
export function parseBodyReadAsText(context: { request: Request; body: unknown }): void {
  if (typeof context.body !== "string") return;
  const type = (context.request.headers.get("content-type") ?? "").toLowerCase();
  if (type.startsWith("application/json")) context.body = parseJsonBody(context.body);
  else refuseForm(type);
}

/** A route's parser that reads the body as JSON whatever its content type says (parseJsonBody's limits included). */
export async function jsonAnyBodyParser({ request }: { request: Request }): Promise<unknown> {
  return parseJsonBody(await request.text());
}

export function internalError(): AppError {
  return new AppError("INTERNAL_ERROR", "internal error");
}

/** The catalogue's HTTP answer for an AppError: status, JSON body, `Retry-After` when it has one. */
export function errorResponse(err: AppError, headers: Record<string, string> = {}): Response {
  const h: Record<string, string> = { "content-type": "application/json", ...headers };
  if (err.extra.retryAfter !== undefined) h["retry-after"] = String(err.extra.retryAfter);
  return new Response(JSON.stringify(errorBody(err)), { status: err.status, headers: h });
}

/**
 * True for an error that decides nothing about what it was doing — the chain did not answer, or something
 * unexpected failed — so the outcome is unknown and worth asking again; false for a refusal (any other code).
 */
export function outcomeUnknown(err: unknown): boolean {
  return !(err instanceof AppError) || err.code === "CHAIN_UNAVAILABLE" || err.code === "INTERNAL_ERROR";
}

/** How an unexpected error is named in a log line (never sent to a client). */
export function errorText(err: unknown): string {
  return err instanceof Error ? `${err.name}: ${err.message}` : String(err);
}

/** VALIDATION_ERROR for one field, worded `<field>: <problem>`. */
export function invalidField(field: string, problem: string): AppError {
  return fieldError(field, `${field}: ${problem}`);
}

/** C0 control characters and DEL, but tab, line feed and carriage return. */
const CONTROL_CHARACTERS = /[\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f]/;

/** `text` without the control characters textField refuses: for text from elsewhere, kept rather than refused. */
export function withoutControlCharacters(text: string): string {
  return text.replace(new RegExp(CONTROL_CHARACTERS.source, "g"), "");
}

/**
 * Free text at an edge (titles, descriptions, messages): trimmed; `required` ones not empty; at most `max`
 * characters (code points); no control characters but tab and line breaks (a NUL would cut the text
 * short in SQLite's checks and in full-text search, and no one types one); and well-formed Unicode: a lone
 * surrogate (a JSON `\ud800` without its pair) has no UTF-8 form, and SQLite would store U+FFFD in its
 * place, so what was saved would not be what was sent.
 */
export function textField(value: string | undefined, field: string, max: number, required: boolean): string {
  const text = (value ?? "").trim();
  if (required && text.length === 0) throw invalidField(field, "required");
  if (text.length > max && characters(text) > max) throw invalidField(field, `at most ${max} characters`);
  if (CONTROL_CHARACTERS.test(text)) throw invalidField(field, "must not contain control characters (tabs and line breaks are fine)");
  requireWellFormed(text, field);
  return text;
}

/**
 * VALIDATION_ERROR naming `field` unless `text` is well-formed Unicode: a lone surrogate has no UTF-8 form, so
 * SQLite, or a transaction's memo, would carry U+FFFD in its place.
 */
export function requireWellFormed(text: string, field: string): void {
  if (!text.isWellFormed()) throw invalidField(field, "must be well-formed Unicode: a surrogate (\\uD800–\\uDFFF) needs its pair");
}

/** How a list pages: the `limit` when none is asked, and the most one page may hold. */
export type PageRange = Readonly<{ default: number; max: number }>;

/**
 * The page asked of a list, defaults filled in: `limit` a whole number from 1 to `range.max`, `offset` one
 * from 0 (to the largest exact integer); outside is VALIDATION_ERROR naming the field, never clamped.
 */
export function requirePage(page: { limit?: number | undefined; offset?: number | undefined }, range: PageRange): { limit: number; offset: number } {
  const limit = page.limit ?? range.default;
  const offset = page.offset ?? 0;
  if (!Number.isInteger(limit) || limit < 1 || limit > range.max) throw invalidField("limit", `must be a whole number from 1 to ${range.max}`);
  if (!Number.isSafeInteger(offset) || offset < 0) throw invalidField("offset", `must be a whole number from 0 to ${Number.MAX_SAFE_INTEGER}`);
  return { limit, offset };
}

/**
 * `value` as base units of a token with `decimals`, or VALIDATION_ERROR naming `field`: parseAmount refuses
 * zero (unless `allowZero`), too many decimals and more than 2^63-1 (spec README "Amounts").
 */
export function amountField(value: unknown, decimals: number, field: string, options: { allowZero?: boolean } = {}): bigint {
  const parsed = parseAmount(value, decimals, options);
  if ("error" in parsed) throw invalidField(field, parsed.error);
  return parsed.value;
}
