// The pages' one way to the server: JSON over fetch (same origin, so the session cookie and Origin go
// along), and every error answer turned into a sentence a person can read.

export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    /** `details.reason`, where the server gives one: its message then says what to do, not the code's words. */
    readonly reason: string | null = null,
    /** The request's fields the server named as wrong (`details.fields`), for a form to mark them. */
    readonly fields: readonly string[] = [],
    /** The answer's `details`, as the server gave them (e.g. a shortfall's `held` and `needed`). */
    readonly details: Readonly<Record<string, unknown>> = {},
  ) {
    super(message);
  }
}

/** Words for the codes a person meets on these pages; others show the server's own message. */
const WORDS: Record<string, string> = {
  UNAUTHENTICATED: "You are signed out. Connect your wallet to sign in again.",
  TOKEN_EXPIRED: "Your session has expired. Connect your wallet to sign in again.",
  TOKEN_REVOKED: "Your session was ended. Connect your wallet to sign in again.",
  RATE_LIMITED: "Too many attempts. Wait a moment and try again.",
  CHAIN_UNAVAILABLE: "The Solana network did not answer. Try again in a moment.",
  INTERNAL_ERROR: "Something went wrong on the server. Try again.",
};

export function errorWords(err: unknown): string {
  if (err instanceof ApiError) return (err.reason === null ? WORDS[err.code] : undefined) ?? err.message;
  if (err instanceof TypeError) return "The server could not be reached. Check your connection and try again.";
  return err instanceof Error ? err.message : String(err);
}

/** Fired when the server says the page's session is gone (expired, revoked, missing); `detail` is its ApiError. */
export const SIGNED_OUT_EVENT = "walletgate:signed-out";
/** Fired when the browser's session is now another wallet's than the one the page shows (nothing was done). */
export const WALLET_CHANGED_EVENT = "walletgate:wallet-changed";

/**
 * The wallet the page shows, named in every request (routes.ts SHOWN_WALLET_HEADER): the browser has one
 * session cookie, which a sign-in in another tab sets for another wallet; the server then refuses this
 * page's requests instead of acting on that wallet's account under this one's address. Null: none named.
 */
let shownWallet: string | null = null;
export function showWallet(address: string | null): void {
  shownWallet = address;
}
export function shownWalletAddress(): string | null {
  return shownWallet;
}
/** The codes of a refusal for the session itself (gone, or none). */
export const SESSION_CODES: ReadonlySet<string> = new Set(["UNAUTHENTICATED", "TOKEN_EXPIRED", "TOKEN_REVOKED", "TOKEN_INVALID"]);

/** `asWhoever`: asked as whoever the browser's session is, naming no wallet (the page learning who that is). */
export async function api<T>(path: string, options: { method?: string; body?: unknown; asWhoever?: boolean } = {}): Promise<T> {
  const response = await fetch(path, {
    method: options.method ?? (options.body === undefined ? "GET" : "POST"),
    headers: {
      ...(options.body === undefined ? {} : { "content-type": "application/json" }),
      ...(shownWallet === null || options.asWhoever === true ? {} : { "x-walletgate-wallet": shownWallet }),
    },
    body: options.body === undefined ? undefined : JSON.stringify(options.body),
    credentials: "same-origin",
  });
  const text = await response.text();
  let data: any = null;
  try {
    data = text === "" ? null : JSON.parse(text);
  } catch {
    if (response.ok) throw new ApiError(response.status, "INTERNAL_ERROR", "The server answered something this page cannot read. Try again.");
  }
  if (!response.ok) {
    const message = typeof data?.error === "string" ? data.error : `The server answered ${response.status}. Try again in a moment.`;
    // details.fields says what was wrong with which field: each is added when the text does not say it already.
    const named: unknown = data?.details?.fields;
    const entries = (Array.isArray(named) ? named : []).filter((d): d is { field: string; message?: unknown } => typeof d?.field === "string");
    const fields = entries
      .map((d) => {
        if (typeof d.message !== "string" || d.message === "") return message.includes(d.field) ? null : d.field;
        if (message.includes(d.message)) return null;
        return d.message.includes(d.field) ? d.message : `${d.field} ${d.message}`;
      })
      .filter((f): f is string => f !== null);
    const reason = typeof data?.details?.reason === "string" ? (data.details.reason as string) : null;
    const fieldNames = entries.map((d) => d.field);
    const details = typeof data?.details === "object" && data.details !== null ? (data.details as Record<string, unknown>) : {};
    const error = new ApiError(response.status, data?.code ?? "INTERNAL_ERROR", fields.length > 0 ? `${message}: ${fields.join("; ")}` : message, reason, fieldNames, details);
    if (reason === "other_wallet") window.dispatchEvent(new CustomEvent(WALLET_CHANGED_EVENT, { detail: error }));
    else if (response.status === 401 && SESSION_CODES.has(data?.code)) window.dispatchEvent(new CustomEvent(SIGNED_OUT_EVENT, { detail: error }));
    throw error;
  }
  return data as T;
}

export function query(params: Record<string, string | number | undefined>): string {
  const entries = Object.entries(params).filter((e): e is [string, string | number] => e[1] !== undefined && e[1] !== "");
  return entries.length === 0 ? "" : `?${new URLSearchParams(entries.map(([k, v]) => [k, String(v)]))}`;
}
