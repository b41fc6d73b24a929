// Small pieces the pages share: error text, copy buttons, a confirm step, a busy button, dates.
import type { ComponentChildren } from "preact";
import { useEffect, useLayoutEffect, useRef, useState } from "preact/hooks";
import { ApiError, errorWords, SESSION_CODES } from "./api.ts";
import { lastConnectedWallet, onWalletsChanged, walletHolding, walletNames } from "./wallet.ts";

/**
 * A failure in words. `labels` turns the request's field names the server used (payTo) into the labels the
 * form shows (Pay to); `id` lets the fields at fault point at it (aria-describedby).
 */
export function ErrorText({ error, id, labels, session }: { error: unknown; id?: string; labels?: Record<string, string>; session?: boolean }) {
  if (error === null || error === undefined) return null;
  // A refusal for the session (ended, or now another wallet's) is said once, by the page's Signed out card or
  // its notice (`session`), not again under every action it refused, where it would outlive a sign-in again.
  if (session !== true && isSessionRefusal(error)) return null;
  let words = errorWords(error);
  // Only where the text names a field (at its start, or after ": " or "; "), with its item's index if it has
  // one (featureIds.0): never inside a value quoted back (an origin ending in /payTo stays as typed).
  for (const [field, label] of Object.entries(labels ?? {})) {
    words = words.replace(new RegExp(`(^|[:;] )${field}(?:\\.\\d+)?(?=[ :;.]|$)`, "g"), `$1${label}`);
  }
  return (
    <p class="error" role="alert" id={id}>
      {words}
    </p>
  );
}

/** The fields a failure names: the server's (`details.fields`), or a check of the page's own. */
export function fieldsOf(error: unknown): readonly string[] {
  return (error as { fields?: readonly string[] } | null)?.fields ?? [];
}

/** A failure of the page's own checks that names its field, marked as the server's are. */
export function fieldError(field: string, message: string): Error {
  return Object.assign(new Error(message), { fields: [field] });
}

/**
 * For a form's inputs (`inputIds`: request field → input id): the fields the last failure named are marked
 * invalid and described by its text (`errorId`), and the first of them gets the keyboard.
 */
export function useFieldErrors(error: unknown, inputIds: Record<string, string>, errorId: string) {
  // An item of a list is named by its path (featureIds.0): its field is the list's.
  const named = fieldsOf(error).map((field) => field.split(".")[0]!).filter((field) => field in inputIds);
  useLayoutEffect(() => {
    if (named.length > 0) document.getElementById(inputIds[named[0]!]!)?.focus();
  }, [error]);
  return (field: string) => (named.includes(field) ? { "aria-invalid": "true" as const, "aria-describedby": errorId } : {});
}

export function CopyButton({ text, label = "Copy", describedBy }: { text: string; label?: string; describedBy?: string }) {
  const [done, setDone] = useState(false);
  return (
    <button
      type="button"
      class="secondary"
      aria-describedby={describedBy}
      aria-live="polite"
      onClick={async () => {
        try {
          await navigator.clipboard.writeText(text);
          setDone(true);
          setTimeout(() => setDone(false), 1500);
        } catch {
          window.prompt("Copy this:", text);
        }
      }}
    >
      {done ? "Copied" : label}
    </button>
  );
}

/**
 * A form's submit: runs `action` one at a time (a second click while it runs does nothing: a double click
 * must not create two keys, products or endpoints), with `busy` to mark its button (aria-disabled, so the
 * keyboard stays on it) and `error` to show why it failed.
 */
export function useSubmit(action: () => Promise<void>) {
  const running = useRef(false);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(null);
  const submit = async (e?: Event) => {
    e?.preventDefault();
    if (running.current) return;
    running.current = true;
    setBusy(true);
    setError(null);
    try {
      await action();
    } catch (err) {
      setError(err);
    } finally {
      running.current = false;
      setBusy(false);
    }
  };
  /**
   * For a form's `onInvalidCapture`: a submit the browser's own checks stopped (a required field emptied)
   * is an attempt of its own, so the last attempt's failure, and the fields it marked, go.
   */
  const stopped = () => {
    if (!running.current) setError(null);
  };
  return { busy, error, submit, stopped };
}

/**
 * A button that runs `action`, is marked busy (aria-disabled, not disabled: a disabled button drops the
 * keyboard's focus to the page) and ignores clicks while it runs, and shows its failure in words.
 * `describedBy`: the id of what the button acts on (its row's first cell), for buttons repeated per row.
 */
export function ActionButton(props: { action: () => Promise<unknown>; children: ComponentChildren; class?: string; label?: string; describedBy?: string; id?: string }) {
  const { busy, error, submit } = useSubmit(async () => {
    await props.action();
  });
  return (
    <span>
      <button
        type="button"
        id={props.id}
        class={props.class}
        aria-label={props.label}
        aria-describedby={props.describedBy}
        aria-disabled={busy ? "true" : undefined}
        onClick={() => submit()}
      >
        {props.children}
      </button>
      <ErrorText error={error} />
    </span>
  );
}

/** Two steps: the first click asks, the second does (keyboard-friendly, no browser dialog). */
export function ConfirmButton(props: { action: () => Promise<unknown>; children: ComponentChildren; question: string; describedBy?: string }) {
  const [asking, setAsking] = useState(false);
  // Focus follows the buttons that replace one another, so a keyboard user stays where they were.
  const focusNext = useRef<"question" | "button" | null>(null);
  const group = useRef<HTMLSpanElement>(null);
  const button = useRef<HTMLButtonElement>(null);
  useLayoutEffect(() => {
    if (focusNext.current === "question") group.current?.querySelector<HTMLButtonElement>("button.danger")?.focus();
    if (focusNext.current === "button") button.current?.focus();
    focusNext.current = null;
  }, [asking]);
  // Removed while it had the focus (a confirmed action that retires its row's button: a revoked key, an
  // archived product), it hands the focus to its section's heading instead of letting it fall to the page.
  useEffect(() => {
    const heading = (button.current ?? group.current)?.closest("section")?.querySelector<HTMLElement>("h1") ?? null;
    return () => {
      const own = button.current ?? group.current;
      if (heading === null || own === null || !own.contains(document.activeElement)) return;
      setTimeout(() => {
        if (!heading.isConnected || (document.activeElement !== null && document.activeElement !== document.body)) return;
        heading.tabIndex = -1;
        heading.focus();
      });
    };
  }, []);
  /**
   * The confirmed action is under way: neither Escape nor Cancel takes the question back, so the action
   * cannot be asked for a second time while the first runs (a second Yes would be a fresh button, without
   * the first one's guard). The ref answers at once; the state shows Cancel as unavailable.
   */
  const acting = useRef(false);
  const [busy, setBusy] = useState(false);
  const ask = (on: boolean) => {
    focusNext.current = on ? "question" : "button";
    setAsking(on);
  };
  if (!asking) {
    return (
      <button type="button" class="secondary" ref={button} aria-describedby={props.describedBy} onClick={() => ask(true)}>
        {props.children}
      </button>
    );
  }
  return (
    <span
      class="row"
      role="group"
      aria-label={props.question}
      ref={group}
      // Escape answers No, as Cancel does (and as it closes the forms), unless Yes is already at work.
      onKeyDown={(event) => {
        if (event.key !== "Escape" || acting.current) return;
        event.preventDefault();
        event.stopPropagation(); // the question's, not also a form's around it
        ask(false);
      }}
    >
      <span>{props.question}</span>
      <ActionButton
        class="danger"
        action={async () => {
          acting.current = true;
          setBusy(true);
          try {
            await props.action();
          } finally {
            acting.current = false;
            setBusy(false);
          }
          ask(false);
        }}
      >
        Yes
      </ActionButton>
      <button type="button" class="secondary" aria-disabled={busy ? "true" : undefined} onClick={() => !acting.current && ask(false)}>
        Cancel
      </button>
    </span>
  );
}

export function when(iso: string | null | undefined): string {
  if (!iso) return "—";
  return new Date(iso).toLocaleString(undefined, { dateStyle: "medium", timeStyle: "short" });
}

export function short(text: string, keep = 6): string {
  return text.length <= keep * 2 + 1 ? text : `${text.slice(0, keep)}…${text.slice(-keep)}`;
}

/** An explorer link for a transaction, off localnet (whose transactions live in this server only). */
/**
 * A long value (an address, a token, a hash) shortened on screen, whole on hover (title) and for screen readers,
 * which read the whole value instead of the shortened one.
 */
export function Short({ text, keep = 6 }: { text: string; keep?: number }) {
  const shown = short(text, keep);
  if (shown === text) return <code>{text}</code>;
  return (
    <code title={text}>
      <span aria-hidden="true">{shown}</span>
      <span class="visually-hidden">{text}</span>
    </code>
  );
}

export function TxLink({ txHash, network }: { txHash: string; network: string }) {
  if (network !== "devnet" && network !== "mainnet" && network !== "mainnet-beta") return <Short text={txHash} />;
  const cluster = network === "devnet" ? "?cluster=devnet" : "";
  return (
    <a href={`https://explorer.solana.com/tx/${txHash}${cluster}`} target="_blank" rel="noopener noreferrer" title={txHash}>
      <Short text={txHash} />
    </a>
  );
}

/**
 * The wallet to connect, when the browser has several (Phantom and Solflare, say): a "Wallet" choice, the
 * likeliest for `chain` first; nothing is shown for one wallet or none.
 */
export function useWalletChoice(chain: string, holding: string | null = null): { name: string | undefined; picker: ComponentChildren } {
  const [names, setNames] = useState(() => walletNames(chain));
  useEffect(() => {
    setNames(walletNames(chain));
    return onWalletsChanged(() => setNames(walletNames(chain)));
  }, [chain]);
  // The one connected last on this page first (a sign-in again after the session ended there), else one that
  // already holds the account asked for (a checkout link's ?wallet=; looked for again as wallets announce
  // themselves), else the likeliest.
  const [chosen, setChosen] = useState<string | null>(() => lastConnectedWallet());
  const holder = holding === null ? null : walletHolding(holding);
  const name = chosen !== null && names.includes(chosen) ? chosen : holder !== null && names.includes(holder) ? holder : names[0];
  const picker =
    names.length > 1 ? (
      <p>
        <label for="wallet-choice">Wallet</label>
        <select id="wallet-choice" value={name} onChange={(e) => setChosen((e.target as HTMLSelectElement).value)}>
          {names.map((n) => <option value={n}>{n}</option>)}
        </select>
      </p>
    ) : null;
  return { name, picker };
}

/** A 401 of the session itself (not one that says what else to do, such as two session cookies). */
function isSessionRefusal(error: unknown): boolean {
  return error instanceof ApiError && error.status === 401 && SESSION_CODES.has(error.code) && (error.reason === null || error.reason === "other_wallet");
}
