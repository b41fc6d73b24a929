// The buyer's checkout page (dashboard.md "Checkout page"): connect the browser wallet, open a checkout,
// sign its transaction, submit and confirm, then show the access token or "Access granted" and go back.
import { render } from "preact";
import { useEffect, useRef, useState } from "preact/hooks";
import { api, ApiError, errorWords } from "./api.ts";
import { chainOf, connectWallet, fromBase64, toBase64, WalletMissing, WalletRejected } from "./wallet.ts";
import { signWithProvider } from "./provider-sign.ts";
import { CopyButton, ErrorText, TxLink, useWalletChoice } from "./ui.tsx";

type Product = { productId: string; title: string; description: string; type: "feature_unlock" | "access"; price: string; currency: string; network: string; accessDays: number | null; redirectOrigins: string[]; status: string };
type Checkout = { checkoutId: string; transaction: string; amount: string; currency: string; expiresAt: string };
type Result = { status: "completed" | "pending"; txHash?: string; purchaseId?: string; accessToken?: string; checkoutId?: string };
/** `checking`: a retry asking whether the checkout already signed in this tab was paid meanwhile. */
type Step = "idle" | "checking" | "connecting" | "signing" | "confirming" | "done";

const productId = (() => {
  try {
    return decodeURIComponent(location.pathname.split("/")[2] ?? "");
  } catch {
    return "";
  }
})();
const params = new URLSearchParams(location.search);

/** The `redirect` parameter when it is safe: this server's origin or one the product lists. */
function safeRedirect(product: Product): URL | null {
  const raw = params.get("redirect");
  if (raw === null) return null;
  try {
    const url = new URL(raw, location.origin);
    if (url.protocol !== "https:" && url.protocol !== "http:") return null;
    return url.origin === location.origin || product.redirectOrigins.includes(url.origin) ? url : null;
  } catch {
    return null;
  }
}

const WORDS: Record<string, string> = {
  INSUFFICIENT_FUNDS: "Your wallet does not hold enough to pay this price plus the network fee.",
  INVALID_STATE: "This checkout can no longer be paid (it expired, the product was archived, or too many attempts failed). Start again.",
  PAYMENT_MISMATCH: "The signed payment does not match this checkout. Start again.",
  CONFLICT: "This payment was already used for a purchase.",
};

/** The price changed since the page showed it: nothing was signed. */
class PriceChanged extends Error {
  constructor(now: Product) {
    super(`The price changed to ${now.price} ${now.currency}. Nothing was paid. Press Try again to pay ${now.price} ${now.currency}.`);
  }
}

/**
 * A shortfall as the server found it (`details`): SOL for the network fee (a buyer funded with USDC alone),
 * or the price's token, with what the wallet holds and the price needs; else the general words.
 */
function fundsWords(err: ApiError): string {
  if (err.reason === "fee") {
    return "Your wallet has too little SOL to pay the network fee (a small fraction of one SOL): add a little SOL to it, then try again. Nothing was paid.";
  }
  const { held, needed, currency } = err.details;
  if (err.reason === "amount" && [held, needed, currency].every((v) => typeof v === "string")) {
    return `Your wallet holds ${held} ${currency}; this purchase needs ${needed} ${currency}. Nothing was paid.`;
  }
  return WORDS.INSUFFICIENT_FUNDS!;
}

function words(err: unknown): string {
  if (err instanceof WalletRejected) return "You rejected the signature in your wallet. Nothing was paid.";
  if (err instanceof ApiError && err.code === "INSUFFICIENT_FUNDS") return fundsWords(err);
  if (err instanceof ApiError && err.code === "TRANSACTION_REJECTED" && /insufficient|funds|balance/i.test(err.message)) return WORDS.INSUFFICIENT_FUNDS!;
  if (err instanceof ApiError && WORDS[err.code]) return WORDS[err.code]!;
  return errorWords(err);
}

const STEPS: [Step, string][] = [["connecting", "Connect wallet"], ["signing", "Waiting for your signature"], ["confirming", "Confirming the payment"], ["done", "Done"]];

/** The progress, to see (the status line below says each step in words as it comes). */
function Steps({ step }: { step: Step }) {
  const at = STEPS.findIndex(([s]) => s === step);
  return (
    <ol class="steps" aria-label="Progress">
      {STEPS.map(([s, label], i) => {
        const done = i < at || step === "done";
        return (
          <li data-state={done ? "done" : i === at ? "active" : "todo"} aria-current={i === at ? "step" : undefined}>
            <span aria-hidden="true">{done ? "✓ " : i === at ? "→ " : "· "}</span>
            {label}
            {done && s !== "done" && <span class="visually-hidden"> (done)</span>}
          </li>
        );
      })}
    </ol>
  );
}

/**
 * How long an access pass's page waits before it returns to the app (the buyer may stay instead): at least the
 * 20 s WCAG 2.2.1 gives a user to act on a time limit.
 */
const RETURN_AFTER_S = 20;

/** What a screen reader hears as the payment goes on: one sentence a step, in a region there from the start. */
function statusOf(step: Step, result: Result | null, type: Product["type"] | undefined): string {
  if (step === "checking") return "Checking whether your earlier payment went through…";
  const at = STEPS.findIndex(([s]) => s === step);
  if (step === "done") {
    if (result?.accessToken !== undefined) return "Payment complete; your access token is shown below";
    return type === "feature_unlock" ? "Payment complete; the app that sent you here has the access token" : "Payment complete; access granted";
  }
  return at >= 0 ? `Step ${at + 1} of ${STEPS.length}: ${STEPS[at]![1]}.` : "";
}

function Pay() {
  const [product, setProduct] = useState<Product | null>(null);
  const [loadError, setLoadError] = useState<unknown>(null);
  const [step, setStep] = useState<Step>("idle");
  const [error, setError] = useState<unknown>(null);
  const [result, setResult] = useState<Result | null>(null);
  // When the page returns to the app by itself (Date.now() ms); null when it will not (or the buyer chose to stay).
  const [returnAt, setReturnAt] = useState<number | null>(null);
  const [now, setNow] = useState(() => Date.now());
  // The pending return, cleared at once when the buyer stays (an effect's cleanup would come only after paint).
  const leaving = useRef<ReturnType<typeof setTimeout> | undefined>(undefined);
  const [stayed, setStayed] = useState(false);
  // Set at once too: a Stay pressed before the return's effect has run (it runs after paint) must keep it from
  // arming the timer when it does run.
  const staying = useRef(false);
  const stay = () => {
    staying.current = true;
    clearTimeout(leaving.current);
    setReturnAt(null);
    setStayed(true);
    outcome.current?.focus(); // the button goes: the keyboard stays on the outcome
  };
  // One payment at a time: the button stays focusable while it runs (aria-disabled), so clicks are ignored here.
  const paying = useRef(false);
  // Once paid, the keyboard goes to the outcome (the button it was on is gone).
  const outcome = useRef<HTMLDivElement>(null);
  useEffect(() => {
    if (step === "done") outcome.current?.focus();
  }, [step]);
  // Kept for this tab across reloads: a retry after a reload must confirm the checkout already signed,
  // not open another one (the server would answer the earlier payment's outcome anyway).
  // (Where storage is blocked the page works as before, without it.)
  const stored = `walletgate.checkout.${productId}`;
  const [checkoutId, setCheckoutIdState] = useState<string | undefined>(() => {
    try {
      return sessionStorage.getItem(stored) ?? undefined;
    } catch {
      return undefined;
    }
  });
  const setCheckoutId = (id: string | undefined) => {
    try {
      if (id === undefined) sessionStorage.removeItem(stored);
      else sessionStorage.setItem(stored, id);
    } catch {
      // storage blocked: kept in the page only
    }
    setCheckoutIdState(id);
  };

  useEffect(() => {
    api<Product>(`/pay/${encodeURIComponent(productId)}/product`).then(setProduct, setLoadError);
  }, []);

  const base = `/pay/${encodeURIComponent(productId)}`;
  const finish = (answer: Result) => {
    setResult(answer);
    setStep("done");
    setCheckoutId(undefined); // paid: a later visit buys anew
    // An access pass goes back to the app by itself, after time to read the outcome and a way to stay
    // (WCAG 2.2.1: a time limit the user can turn off). A feature token waits for the buyer, who must copy it.
    if (product?.type === "access" && safeRedirect(product) !== null && answer.accessToken === undefined) {
      const at = Date.now();
      setNow(at);
      setReturnAt(at + RETURN_AFTER_S * 1000);
    }
  };
  // With several wallets in the browser, the buyer picks the one holding the money (the likeliest for the network first).
  const choice = useWalletChoice(chainOf(product?.network ?? "mainnet"), params.get("wallet"));
  const pay = async () => {
    if (product === null || paying.current) return;
    paying.current = true;
    setError(null);
    try {
      // A retry first asks about the checkout already signed: it may have been paid meanwhile, and paying
      // again would move money twice.
      if (checkoutId !== undefined) {
        setStep("checking");
        try {
          const earlier = await api<Result>(`${base}/confirm`, { body: { checkoutId } });
          if (earlier.status === "completed") return finish(earlier);
        } catch (err) {
          // Closed: start again. Any other answer (a payment that failed, a slow chain) only means it is
          // not paid: signing again is safe, as the server sends nothing while an earlier one may land.
          if (err instanceof ApiError && err.code === "INVALID_STATE") throw err;
        }
      }
      setStep("connecting");
      const wallet = await connectWallet(chainOf(product.network), { signWithProvider, name: choice.name });
      const expected = params.get("wallet");
      if (expected !== null && expected !== wallet.address) {
        const other = choice.picker !== null ? ", or choose another under Wallet," : "";
        throw new Error(`This link is for wallet ${expected}; your wallet is ${wallet.address}. Switch accounts in your wallet${other} and try again.`);
      }
      // Retrying reuses the open checkout (same reference, fresh blockhash) rather than opening another.
      const checkout = await api<Checkout>(`${base}/checkout`, { body: { walletAddress: wallet.address, ...(checkoutId ? { checkoutId } : {}) } });
      setCheckoutId(checkout.checkoutId);
      // The wallet signs only what the page shows. The owner may have changed the price since the page
      // loaded, or since the checkout kept for this tab was opened (it keeps its price): then nothing is
      // signed, the page shows the price now, and a checkout opened at an older one is left.
      if (checkout.amount !== product.price || checkout.currency !== product.currency) {
        const now = await api<Product>(`/pay/${encodeURIComponent(productId)}/product`);
        setProduct(now);
        if (checkout.amount !== now.price || checkout.currency !== now.currency) setCheckoutId(undefined);
        throw new PriceChanged(now);
      }
      setStep("signing");
      const signed = await wallet.signTransaction(fromBase64(checkout.transaction));
      setStep("confirming");
      let answer = await api<Result>(`${base}/submit`, { body: { checkoutId: checkout.checkoutId, transaction: toBase64(signed) } });
      // Nothing was sent because a payment this wallet signed for another checkout (another tab, before a
      // reload) may still land: that checkout is the one to follow, and to retry with.
      const following = answer.status === "pending" && answer.checkoutId !== undefined ? answer.checkoutId : checkout.checkoutId;
      if (following !== checkout.checkoutId) setCheckoutId(following);
      for (let i = 0; answer.status === "pending" && i < 60; i++) {
        await new Promise((r) => setTimeout(r, 2000));
        try {
          answer = await api<Result>(`${base}/confirm`, { body: { checkoutId: following } });
        } catch (err) {
          // Many buyers behind one address share its limit on confirms, and the chain can be slow to say
          // when the payment landed: either only skips this look.
          if (!(err instanceof ApiError && (err.code === "RATE_LIMITED" || err.code === "CHAIN_UNAVAILABLE"))) throw err;
        }
      }
      if (answer.status !== "completed") throw new Error("The payment is not confirmed yet. Keep this page open and press Try again in a minute.");
      finish(answer);
    } catch (err) {
      // Closed, or not this wallet's (another account, or a stored one from an earlier visit): start anew;
      // and the product is read again, since an archived one is why a checkout cannot open (said in place of Pay).
      if (err instanceof ApiError && (err.code === "INVALID_STATE" || err.code === "NOT_FOUND")) {
        setCheckoutId(undefined);
        api<Product>(`/pay/${encodeURIComponent(productId)}/product`).then(setProduct, () => undefined);
      }
      setError(err);
      setStep("idle");
    } finally {
      paying.current = false;
    }
  };

  useEffect(() => {
    if (returnAt === null || product === null || result === null || staying.current) return;
    const back = safeRedirect(product);
    if (back === null) return;
    back.searchParams.set("txHash", result.txHash!);
    leaving.current = setTimeout(() => location.assign(back.href), Math.max(0, returnAt - Date.now()));
    const tick = setInterval(() => setNow(Date.now()), 1000); // the seconds shown
    return () => {
      clearTimeout(leaving.current);
      clearInterval(tick);
    };
  }, [returnAt]);

  if (loadError !== null) {
    return <main class="shell"><div class="card narrow"><h1>Checkout</h1><p class="error" role="alert">{loadError instanceof ApiError && loadError.status === 404 ? "This product does not exist." : words(loadError)}</p></div></main>;
  }
  if (product === null) return <p class="shell loading">Loading…</p>;
  const back = safeRedirect(product);
  if (back !== null && result?.txHash) back.searchParams.set("txHash", result.txHash);
  return (
    <main class="shell">
      <div class="card narrow">
        <p class="muted">{product.type === "access" ? "Access pass" : "Feature unlock"} · Solana {product.network}</p>
        <h1>{product.title}</h1>
        {product.description && <p class="description">{product.description}</p>}
        <div class="price">{product.price} {product.currency}</div>
        <p class="visually-hidden" role="status" aria-live="polite" data-testid="pay-status">
          {statusOf(step, result, product.type)}
          {back && returnAt !== null && `; returning to ${back.host} in ${RETURN_AFTER_S} seconds, unless you choose to stay on this page`}
          {stayed && "; you will stay on this page"}
        </p>
        {product.accessDays !== null && <p class="muted">Access for {product.accessDays} day(s).</p>}
        {product.status !== "active" ? (
          <p class="error" role="alert">This product is no longer sold.</p>
        ) : step === "done" && result ? (
          <div ref={outcome} tabIndex={-1}>
            <Steps step="done" />
            {result.accessToken ? (
              <>
                <p class="success">Payment complete. Your access token:</p>
                <div class="secret"><code data-testid="access-token">{result.accessToken}</code><CopyButton text={result.accessToken} /></div>
                <p class="notice">Keep this token: the app that sent you here asks for it.</p>
              </>
            ) : product.type === "feature_unlock" ? (
              // A feature unlock confirmed long after its checkout: the token is not sent again to a page
              // holding only the checkout id (the app, and the seller's token list, have it).
              <p class="success">Payment complete. The access token went to the app that sent you here; the seller can also find it.</p>
            ) : (
              <p class="success">Access granted.</p>
            )}
            <p>Transaction: <TxLink txHash={result.txHash!} network={product.network} /></p>
            {back && returnAt !== null && (
              <p data-testid="returning">
                Returning to {back.host} in {Math.max(1, Math.ceil((returnAt - now) / 1000))} s.{" "}
                <button type="button" class="secondary" onClick={stay}>Stay on this page</button>
              </p>
            )}
            {back && <a class="button" href={back.href} onClick={() => clearTimeout(leaving.current)}>Return to {back.host}</a>}
          </div>
        ) : (
          <div>
            {step !== "idle" && step !== "checking" && <Steps step={step} />}
            {error !== null && <p class="error" role="alert">{words(error)}</p>}
            {error instanceof WalletMissing && (
              // A phone's browser has no wallet extension: Phantom's app opens this page in its own browser
              // (its documented "browse" link), where the wallet is.
              <p>
                On a phone: <a href={`https://phantom.app/ul/browse/${encodeURIComponent(location.href)}?ref=${encodeURIComponent(location.origin)}`}>open this page in the Phantom app</a>, or in your wallet app's own browser.
              </p>
            )}
            {choice.picker}
            <button type="button" onClick={pay} aria-disabled={step !== "idle" ? "true" : undefined}>{error !== null ? "Try again" : "Pay with wallet"}</button>
          </div>
        )}
      </div>
    </main>
  );
}

render(<Pay />, document.getElementById("root")!);
