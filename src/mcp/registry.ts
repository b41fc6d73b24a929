// The one tool registry: each tool is defined once (name, description, input schema, handler) and
// served by every adapter — MCP over HTTP, MCP over stdio and the plain JSON envelope.
import { z } from "zod";
import type { ClientInfo } from "../auth/fingerprint.ts";
import type { Deps } from "../deps.ts";
import { AppError, type ErrorCode, type FieldProblem } from "../errors.ts";
import { firstCharacters } from "../lib/text.ts";

/** How a tool call's wallet was established (session_info's `restoredBy`). */
export type CallerSource = "token" | "binding" | "fingerprint";

/** The wallet a call runs as, or why there is none. */
export type Caller =
  | {
      kind: "wallet";
      walletAddress: string;
      sessionId: string;
      jti: string;
      /** The session token in the Authorization header; null when the wallet comes from the MCP session's binding. */
      token: string | null;
      issuedAtS: number;
      expiresAtS: number;
      source: CallerSource;
    }
  /**
   * `tokenError`: the header's token, or the binding's, was invalid, expired or revoked (reported by tools
   * that need a wallet). `deadBinding`: the session's binding whose token it was (wallet_disconnect forgets it).
   */
  | { kind: "anonymous"; tokenError: AppError | null; deadBinding?: Binding | undefined };

/** What a binding remembers: the wallet and the token (by jti) that proved it. */
/** `tokenExpiresAtS`: the bound token's `exp` (null for a record bound before it was kept). */
export type Binding = Readonly<{ walletAddress: string; sessionId: string; jti: string; tokenExpiresAtS: number | null; source: "binding" | "fingerprint" }>;

/** The MCP session a call belongs to; the plain JSON envelope has none (binding is then a no-op). */
export type ToolSession = {
  readonly id: string | null;
  bind(binding: Omit<Binding, "source">): Promise<void>;
  unbind(): Promise<void>;
  /** The wallet the session is bound to now (absent where there is no session to bind: the plain envelope). */
  bound?(): Binding | null;
  /**
   * Whether the token sent with each call (HTTP's Authorization header) goes on winning over a binding
   * (mcp.md). Over stdio WALLETGATE_TOKEN gives way to the first binding instead.
   */
  readonly tokenWinsOverBinding?: boolean;
};

/** `requestId`: the HTTP request the call came in (its X-Request-Id and access-log line); none over stdio. */
export type ToolContext = Readonly<{ deps: Deps; caller: Caller; session: ToolSession; client: ClientInfo; requestId?: string | undefined }>;

export type WalletCaller = Extract<Caller, { kind: "wallet" }>;

/** A call's context as an adapter gives it: the caller, or the lookup that finds it. */
export type CallContext = Omit<ToolContext, "caller"> & Readonly<{ caller: Caller | (() => Promise<Caller>) }>;

type Handler<S extends z.ZodRawShape> = (ctx: ToolContext, input: z.infer<z.ZodObject<S>>) => Promise<Record<string, unknown>>;

export type Tool = Readonly<{
  name: string;
  description: string;
  input: z.ZodObject<z.ZodRawShape>;
  /** When true, a call without a wallet answers UNAUTHENTICATED (or the header token's own error). */
  needsWallet: boolean;
  run: Handler<z.ZodRawShape>;
}>;

export function defineTool<S extends z.ZodRawShape>(tool: {
  name: string;
  description: string;
  input: S;
  needsWallet: boolean;
  run: Handler<S>;
}): Tool {
  return {
    name: tool.name,
    description: tool.description,
    input: z.object(tool.input).strict(),
    needsWallet: tool.needsWallet,
    run: tool.run as unknown as Handler<z.ZodRawShape>,
  };
}

/** An optional idempotency key a client chooses for one intended operation (checkout_pay, wallet_transfer). */
export const idempotencyKeyInput = (what: string) =>
  z
    .string()
    .min(1)
    .max(64)
    .regex(/^[A-Za-z0-9._:-]+$/, "letters, digits and . _ : - only")
    .optional()
    .describe(what);

export type Envelope = { success: true; data: Record<string, unknown> } | { success: false; error: string; code: ErrorCode; details?: unknown; retryAfter?: number };

export function failure(err: AppError): Envelope {
  const envelope: Envelope = { success: false, error: err.message, code: err.code };
  if (err.extra.details !== undefined) envelope.details = err.extra.details;
  if (err.extra.retryAfter !== undefined) envelope.retryAfter = err.extra.retryAfter;
  return envelope;
}

/**
 * What a tool that binds the session to `bound` adds to its answer when the calls' own token still decides
 * who they run as: an Authorization header naming another wallet, or one that is not valid. Without it an
 * agent would take the new wallet for the one its next calls use.
 */
export function headerStillWins({ session, caller }: Pick<ToolContext, "session" | "caller">, bound: string): { note?: string } {
  if (session.tokenWinsOverBinding !== true) return {};
  const header =
    caller.kind === "wallet" && caller.source === "token" && caller.walletAddress !== bound
      ? `names ${caller.walletAddress}; calls on this connection that carry it run as it`
      : caller.kind === "anonymous" && caller.tokenError !== null && caller.deadBinding === undefined
        ? `carries a token that is not valid (${caller.tokenError.code}); calls that carry it fail`
        : null;
  if (header === null) return {};
  return {
    note: `this connection's Authorization header ${header}, since a token in the header wins over a binding: send the new sessionToken in the header, or drop the header, to act as ${bound}`,
  };
}

/** The caller of a tool that needs one; else the reason there is none. */
export function requireWallet(caller: Caller): WalletCaller {
  if (caller.kind === "wallet") return caller;
  throw caller.tokenError ?? new AppError("UNAUTHENTICATED", "no wallet in this session: call wallet_create, wallet_connect or session_restore, or send a session token (Authorization: Bearer <token> over HTTP, WALLETGATE_TOKEN for walletgate mcp)");
}

/** A refusal names at most this many fields, each cut to FIELD_NAME_CHARS (as the HTTP edge does): params are the caller's. */
const NAMED_FIELDS = 10;
const FIELD_NAME_CHARS = 100;

function validationError(error: z.ZodError): AppError {
  const fields: FieldProblem[] = error.issues
    .slice(0, NAMED_FIELDS)
    .map((issue) => ({ field: firstCharacters(issue.path.join(".") || "(params)", FIELD_NAME_CHARS), message: firstCharacters(issue.message, 500) }));
  const more = error.issues.length > NAMED_FIELDS ? `; and ${error.issues.length - NAMED_FIELDS} more` : "";
  const summary = fields.map((f) => `${f.field}: ${f.message}`).join("; ") + more;
  return new AppError("VALIDATION_ERROR", `invalid params: ${summary}`, { details: { fields } });
}

export type Registry = Readonly<{
  tools: readonly Tool[];
  /** Whether a tool of this name exists. */
  has(name: string): boolean;
  /**
   * Checks for a wallet where needed, validates the params, runs the tool; every outcome is an envelope.
   * `ctx.caller` may be given as the lookup that finds it: a lookup that fails (storage) is then answered
   * INTERNAL_ERROR and logged like a tool's own failure.
   */
  call(ctx: CallContext, name: string, params: unknown): Promise<Envelope>;
  /** tools/list entries: name, description and JSON Schema of the input. */
  listing: readonly { name: string; description: string; inputSchema: Record<string, unknown> }[];
}>;

/**
 * `onUnexpected` hears of a failure that is not an AppError (answered INTERNAL_ERROR), with the request id
 * to log it under: the HTTP request's, or a fresh one for a call without (stdio).
 */
export function createRegistry(tools: readonly Tool[], onUnexpected: (tool: string, err: unknown, requestId: string) => void): Registry {
  const byName = new Map(tools.map((t) => [t.name, t]));
  if (byName.size !== tools.length) throw new Error("two tools share a name");
  const listing = tools.map((t) => {
    const { $schema: _, ...inputSchema } = z.toJSONSchema(t.input, { io: "input" }) as Record<string, unknown>;
    return { name: t.name, description: t.description, inputSchema: { ...inputSchema, type: "object" } };
  });
  return {
    tools,
    listing,
    has: (name) => byName.has(name),
    async call(given, name, params) {
      const tool = byName.get(name);
      if (tool === undefined) {
        return failure(new AppError("NOT_FOUND", `unknown tool "${firstCharacters(name, FIELD_NAME_CHARS)}"; tools/list names them`));
      }
      try {
        const caller = typeof given.caller === "function" ? await given.caller() : given.caller;
        // Who is calling before what is asked (as the HTTP routes do): a call without a wallet, or with a token
        // that failed, hears that (the plain envelope's 401) rather than of a parameter it would fix in vain.
        if (tool.needsWallet) requireWallet(caller);
        const parsed = tool.input.safeParse(params ?? {});
        if (!parsed.success) throw validationError(parsed.error);
        return { success: true, data: await tool.run({ ...given, caller }, parsed.data) };
      } catch (err) {
        if (err instanceof AppError) {
          if (err.code === "RATE_LIMITED") given.deps.metrics.toolRateLimited(name); // a known tool's name: bounded labels
          return failure(err);
        }
        onUnexpected(name, err, given.requestId ?? crypto.randomUUID());
        return failure(new AppError("INTERNAL_ERROR", "internal error"));
      }
    },
  };
}
