// The owner dashboard (dashboard.md "Pages (owner)"): sign-in with the browser wallet, then overview,
// products, API keys, tokens, purchases and webhooks, all through /dashboard/api with the session cookie.
import { render } from "preact";
import { useEffect, useLayoutEffect, useRef, useState } from "preact/hooks";
import { api, ApiError, errorWords, query, showWallet, shownWalletAddress, SIGNED_OUT_EVENT, WALLET_CHANGED_EVENT } from "./api.ts";
import { chainOf, connectWallet, toBase64 } from "./wallet.ts";
import { ActionButton, ConfirmButton, CopyButton, ErrorText, Short, TxLink, fieldError, short, useFieldErrors, useSubmit, useWalletChoice, when } from "./ui.tsx";

type Me = { walletAddress: string; tier: string; usage: { minute: number; day: number; limits: { minute: number; day: number } | null } };
type Product = {
  productId: string; title: string; description: string; type: "feature_unlock" | "access"; price: string; currency: string;
  network: string; featureIds: string[]; payTo: string; accessDays: number | null; redirectOrigins: string[]; status: string; paymentUrl: string; createdAt: string;
};
type Key = { keyId: string; label: string; prefix: string; createdAt: string; lastUsedAt: string | null; revokedAt: string | null };
type TokenRecord = { accessToken: string; productId: string; productTitle: string; walletAddress: string; txHash: string; status: string; createdAt: string };
type Purchase = { purchaseId: string; productTitle: string; walletAddress: string; txHash: string; amount: string; currency: string; network: string; purchasedAt: string };
type Endpoint = { endpointId: string; url: string; events: string[]; enabled: boolean; createdAt: string };
type Delivery = { deliveryId: string; eventId: string; type: string; status: string; attempts: number; lastStatusCode: number | null; nextAttemptAt: string | null; createdAt: string };
type Stats = {
  totalRevenue: number; totalTransactions: number; productCount: number; revenueByCurrency: Record<string, string>;
  daily: { date: string; revenue: string; transactions: number }[];
};

const EVENTS = ["payment.completed", "feature.unlocked", "feature.revoked", "product.created", "product.updated", "product.archived"];
const PAGES = [
  ["overview", "Overview"], ["products", "Products"], ["keys", "API keys"], ["tokens", "Tokens"], ["purchases", "Purchases"], ["webhooks", "Webhooks"],
] as const;
type Page = (typeof PAGES)[number][0];

/** Fired once the wallet the page shows has signed in again (its session had ended under the page). */
const SIGNED_IN_AGAIN_EVENT = "walletgate:signed-in-again";

/** Loads `load()` now and whenever `deps` change; `reload` runs it again. */
function useData<T>(load: () => Promise<T>, deps: unknown[] = []) {
  const [data, setData] = useState<T | null>(null);
  const [error, setError] = useState<unknown>(null);
  const [tick, setTick] = useState(0);
  const asked = useRef<string | null>(null);
  // What failed to load while the session was gone is loaded again once it is back.
  const failed = useRef(false);
  useEffect(() => {
    const again = () => {
      if (failed.current) setTick((t) => t + 1);
    };
    window.addEventListener(SIGNED_IN_AGAIN_EVENT, again);
    return () => window.removeEventListener(SIGNED_IN_AGAIN_EVENT, again);
  }, []);
  useEffect(() => {
    let live = true;
    setError(null);
    // A new question that fails (a bad filter) shows its error without the previous answer's rows under it;
    // a reload of the same one that fails keeps what is shown (and the edits in it).
    const key = JSON.stringify(deps);
    const changed = asked.current !== key;
    asked.current = key;
    load().then(
      (d) => { failed.current = false; if (live) setData(d); },
      (e) => { failed.current = true; if (live) { setError(e); if (changed) setData(null); } },
    );
    return () => { live = false; };
  }, [...deps, tick]);
  return { data, error, reload: () => setTick((t) => t + 1) };
}

/** The one-time code of a `walletgate dashboard-link` in the address's hash, if there is one. */
function linkCode(hash: string): string | undefined {
  return /(?:^#|&)link=([^&]+)/.exec(hash)?.[1];
}

function pageOf(hash: string): Page {
  const name = hash.replace(/^#\/?/, "");
  return (PAGES.find(([p]) => p === name)?.[0] ?? "overview") as Page;
}

/**
 * The sign-in card: the whole page when nobody is signed in, or (`again`) a card above the page whose session
 * ended under it, which stays as it was (what was typed in a form is kept) until the wallet signs in again.
 */
function SignIn({ onSignedIn, again }: { onSignedIn: () => void; again?: { error: unknown } }) {
  // What the wallet is being asked for now, said while the sign-in runs (one at a time: useSubmit).
  const [step, setStep] = useState("");
  const chain = chainOf("mainnet"); // signs a message only: the chain does not matter
  const choice = useWalletChoice(chain);
  const { busy, error, submit: signIn } = useSubmit(async () => {
    try {
      setStep("Connecting your wallet…");
      const wallet = await connectWallet(chain, { name: choice.name });
      const challenge = await api<{ nonce: string; message: string }>(`/auth/challenge${query({ wallet: wallet.address })}`);
      setStep("Sign the message in your wallet…");
      const signature = await wallet.signMessage(new TextEncoder().encode(challenge.message));
      const session = await api<{ sessionToken: string }>("/auth/verify", {
        body: { walletAddress: wallet.address, nonce: challenge.nonce, signature: toBase64(signature) },
      });
      await api("/dashboard/api/session", { body: { sessionToken: session.sessionToken } });
      onSignedIn();
    } finally {
      setStep("");
    }
  });
  const button = <>{choice.picker}<button type="button" onClick={() => signIn()} aria-disabled={busy ? "true" : undefined}>Connect wallet</button></>;
  if (again !== undefined) {
    return (
      <section class="card" aria-labelledby="signed-out-title" role="alert">
        <h2 id="signed-out-title">Signed out</h2>
        <ErrorText error={again.error} session />
        <p>Connect your wallet to go on: this page stays as it is, with what you typed. Then do again what was refused.</p>
        {button}{" "}
        <button type="button" class="secondary" onClick={() => onSignedIn()}>I signed in elsewhere: check again</button>
        <p class="muted" role="status">{busy ? step : ""}</p>
        <ErrorText error={error} />
      </section>
    );
  }
  return (
    <main class="shell">
      <div class="card narrow">
        <h1>walletgate dashboard</h1>
        <p>Sign in with the wallet that owns your products. Your wallet signs a one-time message; no transaction is sent.</p>
        {button}
        {/* There from the start, so that its first words are said too. */}
        <p class="muted" role="status">{busy ? step : ""}</p>
        <ErrorText error={error} />
        <p class="muted">
          No wallet in this browser? Where the server runs, <code>walletgate dashboard-link --keypair &lt;file&gt;</code> prints a
          one-time sign-in link for the wallet of a Solana CLI keypair file.
        </p>
      </div>
    </main>
  );
}

function Chart({ daily }: { daily: Stats["daily"] }) {
  const top = Math.max(0, ...daily.map((d) => Number(d.revenue)));
  const max = top > 0 ? top : 1; // the bars' scale; with no revenue every bar is empty
  const w = 600, h = 160, gap = 2, bw = w / daily.length - gap;
  // Days are UTC days (the server's), while the tables show times in the browser's zone: said on each.
  const label = `Revenue per UTC day for the last ${daily.length} days: ${top > 0 ? `up to ${daily.find((d) => Number(d.revenue) === top)!.revenue} USDC a day` : "none yet"}`;
  return (
    <>
      <svg class="chart" viewBox={`0 0 ${w} ${h}`} role="img" aria-label={label}>
        {daily.map((d, i) => {
          const bh = Math.round((Number(d.revenue) / max) * h);
          return (
            <rect class="bar" x={i * (bw + gap)} y={h - bh} width={bw} height={Math.max(bh, Number(d.revenue) > 0 ? 2 : 0)}>
              <title>{`${d.date} (UTC): ${d.revenue} USDC, ${d.transactions} purchase(s)`}</title>
            </rect>
          );
        })}
      </svg>
      {/* Text of the page, not of the drawing: it keeps its size at a phone's width. */}
      <div class="chart-days" aria-hidden="true">
        <span>{daily[0]?.date} UTC</span>
        <span>{daily.at(-1)?.date} UTC</span>
      </div>
    </>
  );
}

/**
 * The chart's days as a table, for screen readers (the bars' tooltips show on hover only). Hidden by a box
 * around it: a table itself ignores the hiding box's height, and its rows lengthened the page.
 */
function ChartTable({ daily }: { daily: Stats["daily"] }) {
  return (
    <div class="visually-hidden">
      <table>
        <caption>Revenue per UTC day, in USDC</caption>
        <thead><tr><th>Day (UTC)</th><th>Revenue</th><th>Purchases</th></tr></thead>
        <tbody>{daily.map((d) => <tr><td>{d.date}</td><td>{d.revenue}</td><td>{d.transactions}</td></tr>)}</tbody>
      </table>
    </div>
  );
}

/** What a list shows until its data is there: "Loading…", or the failure in words with Try again. */
function LoadState({ data, error, reload }: { data: unknown; error: unknown; reload: () => void }) {
  if (error !== null) {
    // A refused question (400: a bad filter) would be refused again: no Try again for it.
    const refused = error instanceof ApiError && error.status === 400;
    return (
      <div class="row">
        <ErrorText error={error} />
        {!refused && <button type="button" class="secondary" onClick={reload}>Try again</button>}
      </div>
    );
  }
  return data === null ? <p class="muted" role="status">Loading…</p> : null;
}

function Overview({ me: signedIn }: { me: Me }) {
  const { data, error, reload } = useData(() => api<Stats>("/dashboard/api/stats?days=30"));
  // The usage as it is now, each time the page is shown (the sign-in's copy until it comes).
  const now = useData(() => api<Me>("/dashboard/api/me"));
  const me = now.data ?? signedIn;
  const limits = me.usage.limits;
  return (
    <section>
      <h1>Overview</h1>
      <LoadState data={data} error={error} reload={reload} />
      {data && (
        <>
          <div class="stats">
            <div class="card stat">
              <div class="value">{data.totalRevenue} USDC</div>
              <div class="label">Revenue{Object.entries(data.revenueByCurrency ?? {}).filter(([c, v]) => c !== "USDC" && v !== "0").map(([c, v]) => ` · ${v} ${c}`).join("")}</div>
            </div>
            <div class="card stat"><div class="value">{data.totalTransactions}</div><div class="label">Purchases</div></div>
            <div class="card stat"><div class="value">{data.productCount}</div><div class="label">Products</div></div>
          </div>
          <div class="card"><h2>Revenue, last 30 days</h2><Chart daily={data.daily} /><ChartTable daily={data.daily} /></div>
        </>
      )}
      <div class="card">
        <h2>Plan and API use</h2>
        <p>Tier <strong>{me.tier}</strong>{" · "}
          {limits === null ? "no limits" : `${me.usage.minute} / ${limits.minute} requests this minute, ${me.usage.day} / ${limits.day} today`}
        </p>
      </div>
    </section>
  );
}

type ProductFields = { title: string; description: string; type: Product["type"]; price: string; currency: string; featureIds: string; payTo: string; accessDays: string; redirectOrigins: string };

/** The form's fields as an API body (`type` apart: it is set once, at creation). */
function productBody(form: ProductFields): Record<string, unknown> {
  const list = (text: string) => text.split(",").map((s) => s.trim()).filter(Boolean);
  return {
    title: form.title, description: form.description, price: form.price, currency: form.currency, featureIds: list(form.featureIds),
    accessDays: form.accessDays.trim() === "" ? null : Number(form.accessDays), redirectOrigins: list(form.redirectOrigins),
    // Empty means the owner's wallet: said as null, or on an edit the old address would stay.
    payTo: form.payTo.trim() === "" ? null : form.payTo.trim(),
  };
}

/** The product form's inputs by the request's field names, and the labels the form shows for them. */
const PRODUCT_INPUTS: Record<string, string> = {
  title: "p-title", type: "p-type", price: "p-price", currency: "p-currency", featureIds: "p-features",
  accessDays: "p-days", payTo: "p-payto", redirectOrigins: "p-origins", description: "p-description",
};
const PRODUCT_LABELS: Record<string, string> = {
  featureIds: "Feature ids", accessDays: "Access days", payTo: "Pay to", redirectOrigins: "Sites the checkout may return to",
};

function ProductForm({ product, onSaved, onCancel }: { product: Product | null; onSaved: () => void; onCancel: () => void }) {
  const title = useRef<HTMLInputElement>(null);
  useLayoutEffect(() => title.current?.focus(), []); // the keyboard goes where the form begins
  const [opened] = useState<ProductFields>(() => ({
    title: product?.title ?? "", description: product?.description ?? "", type: product?.type ?? "feature_unlock",
    price: product?.price ?? "", currency: product?.currency ?? "USDC", featureIds: product?.featureIds.join(", ") ?? "",
    payTo: product?.payTo ?? "", accessDays: product?.accessDays?.toString() ?? "",
    redirectOrigins: product?.redirectOrigins.join(", ") ?? "",
  }));
  const [form, setForm] = useState(opened);
  const set = (k: keyof ProductFields) => (e: Event) => setForm({ ...form, [k]: (e.target as HTMLInputElement).value });
  // Escape closes a form opened by mistake at once; one with changes in it only once the owner says so.
  const escape = () => {
    const changed = (Object.keys(opened) as (keyof ProductFields)[]).some((k) => form[k] !== opened[k]);
    if (!changed || window.confirm("Discard what you changed in this form?")) onCancel();
  };
  const { busy, error, submit, stopped } = useSubmit(async () => {
    const body = productBody(form);
    const days = body.accessDays as number | null;
    if (days !== null && (!Number.isInteger(days) || days < 1 || days > 36_500)) {
      throw fieldError("accessDays", "Access days must be a whole number of days from 1 to 36,500, or empty for access that never ends.");
    }
    if (product === null) {
      await api("/dashboard/api/products", { body: { ...body, type: form.type, ...(body.payTo === null ? { payTo: undefined } : {}) } });
    } else {
      // Only what the owner changed in this form: an edit saved from a form opened earlier must not put back
      // fields changed since (a payTo moved off a compromised wallet, a new price).
      const before = productBody(opened);
      const changed = Object.fromEntries(Object.entries(body).filter(([k, v]) => JSON.stringify(v) !== JSON.stringify(before[k])));
      if (Object.keys(changed).length > 0) await api(`/dashboard/api/products/${product.productId}`, { method: "PATCH", body: changed });
    }
    onSaved();
  });
  const invalid = useFieldErrors(error, PRODUCT_INPUTS, "p-error");
  return (
    <form class="card" onSubmit={submit} onInvalidCapture={stopped} aria-label={product ? "Edit product" : "New product"} onKeyDown={(e) => e.key === "Escape" && escape()}>
      <h2>{product ? `Edit “${product.title}”` : "New product"}</h2>
      <div class="grid2">
        <div><label for="p-title">Title</label><input id="p-title" ref={title} required maxLength={200} value={form.title} onInput={set("title")} {...invalid("title")} /></div>
        <div>
          <label for="p-type">Type</label>
          <select id="p-type" value={form.type} onChange={set("type")} disabled={product !== null} {...invalid("type")}>
            <option value="feature_unlock">Feature unlock (access token)</option>
            <option value="access">Access pass (wallet)</option>
          </select>
        </div>
        <div><label for="p-price">Price</label><input id="p-price" required inputMode="decimal" placeholder="9.99" value={form.price} onInput={set("price")} {...invalid("price")} /></div>
        <div><label for="p-currency">Currency</label><input id="p-currency" value={form.currency} onInput={set("currency")} {...invalid("currency")} /></div>
        <div><label for="p-features">Feature ids (comma-separated)</label><input id="p-features" value={form.featureIds} onInput={set("featureIds")} {...invalid("featureIds")} /></div>
        <div><label for="p-days">Access days (empty: forever)</label><input id="p-days" inputMode="numeric" value={form.accessDays} onInput={set("accessDays")} {...invalid("accessDays")} /></div>
        <div><label for="p-payto">Pay to (empty: your wallet)</label><input id="p-payto" value={form.payTo} onInput={set("payTo")} {...invalid("payTo")} /></div>
        <div><label for="p-origins">Sites the checkout may return to (origins, comma-separated)</label><input id="p-origins" placeholder="https://shop.example" value={form.redirectOrigins} onInput={set("redirectOrigins")} {...invalid("redirectOrigins")} /></div>
      </div>
      <label for="p-description">Description</label>
      <textarea id="p-description" rows={3} maxLength={2000} value={form.description} onInput={set("description")} {...invalid("description")} />
      <ErrorText error={error} id="p-error" labels={PRODUCT_LABELS} />
      <div class="row" style="margin-top:.75rem">
        <button type="submit" aria-disabled={busy ? "true" : undefined}>{product ? "Save" : "Create product"}</button>
        <button type="button" class="secondary" onClick={onCancel}>Cancel</button>
      </div>
    </form>
  );
}

/** Every product of the owner: the list comes in pages of up to ~1 MB (hasMore). */
async function allProducts(): Promise<{ products: Product[] }> {
  const products: Product[] = [];
  for (;;) {
    const page = await api<{ products: Product[]; hasMore?: true }>(`/dashboard/api/products?offset=${products.length}`);
    products.push(...page.products);
    if (page.hasMore !== true || page.products.length === 0) return { products };
  }
}

function Products() {
  const { data, error, reload } = useData(allProducts);
  const [editing, setEditing] = useState<Product | null | "new">(null);
  // When the form closes (saved or cancelled), the keyboard comes back to New product.
  const newButton = useRef<HTMLButtonElement>(null);
  const closed = useRef(false);
  useLayoutEffect(() => {
    if (editing === null && closed.current) newButton.current?.focus();
    closed.current = editing !== null;
  }, [editing]);
  return (
    <section>
      <div class="row" style="justify-content:space-between"><h1>Products</h1>
        {editing === null && <button type="button" ref={newButton} onClick={() => setEditing("new")}>New product</button>}
      </div>
      {editing !== null && (
        <ProductForm key={editing === "new" ? "new" : editing.productId} product={editing === "new" ? null : editing} onCancel={() => setEditing(null)} onSaved={() => { setEditing(null); reload(); }} />
      )}
      <LoadState data={data} error={error} reload={reload} />
      {data && data.products.length === 0 && <p class="muted">No products yet.</p>}
      {data && data.products.length > 0 && (
        <div class="card table-wrap"><table>
          <thead><tr><th>Title</th><th>Type</th><th>Price</th><th>Status</th><th>Payment link</th><th><span class="visually-hidden">Actions</span></th></tr></thead>
          <tbody>
            {data.products.map((p) => (
              <tr key={p.productId}>
                <td id={`row-${p.productId}`}>{p.title}<div class="muted mono">{p.productId}</div></td>
                <td>{p.type === "access" ? "Access pass" : "Feature unlock"}</td>
                <td>{p.price} {p.currency}</td>
                <td><span class={`badge ${p.status === "active" ? "ok" : "bad"}`}>{p.status}</span></td>
                <td><CopyButton text={p.paymentUrl} label="Copy link" describedBy={`row-${p.productId}`} /></td>
                <td class="row">
                  {p.status === "active" && editing === null && <button type="button" class="secondary" aria-describedby={`row-${p.productId}`} onClick={() => setEditing(p)}>Edit</button>}
                  {p.status === "active" && (
                    <ConfirmButton question="Archive? New purchases stop." describedBy={`row-${p.productId}`} action={async () => { await api(`/dashboard/api/products/${p.productId}/archive`, { method: "POST" }); reload(); }}>
                      Archive
                    </ConfirmButton>
                  )}
                </td>
              </tr>
            ))}
          </tbody>
        </table></div>
      )}
    </section>
  );
}

function Keys() {
  const { data, error, reload } = useData(() => api<{ keys: Key[] }>("/dashboard/api/keys"));
  const [label, setLabel] = useState("");
  const [created, setCreated] = useState<{ key: string; label: string } | null>(null);
  const labelInput = useRef<HTMLInputElement>(null);
  const { busy, error: createError, submit: create, stopped: createStopped } = useSubmit(async () => {
    const answer = await api<{ key: string; label: string }>("/dashboard/api/keys", { body: { label } });
    setCreated(answer);
    setLabel("");
    reload();
  });
  const keyInvalid = useFieldErrors(createError, { label: "k-label" }, "k-error");
  return (
    <section>
      <h1>API keys</h1>
      <form class="card row" onSubmit={create} onInvalidCapture={createStopped} aria-label="Create an API key">
        <label for="k-label" style="margin:0">Label</label>
        <input id="k-label" ref={labelInput} required maxLength={100} style="max-width:260px" value={label} onInput={(e) => setLabel((e.target as HTMLInputElement).value)} {...keyInvalid("label")} />
        <button type="submit" aria-disabled={busy ? "true" : undefined}>Create key</button>
        <ErrorText error={createError} id="k-error" />
      </form>
      {created && (
        <div class="card" role="status" data-testid="new-key">
          <p class="notice">Copy this key now. It is shown only once and cannot be shown again.</p>
          <div class="secret"><code data-testid="new-key-value">{created.key}</code><CopyButton text={created.key} /></div>
          <button type="button" class="secondary" onClick={() => { setCreated(null); labelInput.current?.focus(); }}>Done, I have copied it</button>
        </div>
      )}
      <LoadState data={data} error={error} reload={reload} />
      {data && (
        <div class="card table-wrap"><table>
          <thead><tr><th>Label</th><th>Key</th><th>Created</th><th>Last used</th><th>Status</th><th><span class="visually-hidden">Actions</span></th></tr></thead>
          <tbody>
            {data.keys.map((k) => (
              <tr key={k.keyId}>
                <td id={`row-${k.keyId}`}>{k.label}</td><td><code>{k.prefix}…</code></td><td>{when(k.createdAt)}</td><td>{when(k.lastUsedAt)}</td>
                <td>{k.revokedAt ? <span class="badge bad">revoked</span> : <span class="badge ok">active</span>}</td>
                <td>{!k.revokedAt && (
                  <ConfirmButton question={`Revoke “${k.label}”? Requests with it fail at once.`} describedBy={`row-${k.keyId}`} action={async () => { await api(`/dashboard/api/keys/${k.keyId}`, { method: "DELETE" }); reload(); }}>
                    Revoke
                  </ConfirmButton>
                )}</td>
              </tr>
            ))}
          </tbody>
        </table>{data.keys.length === 0 && <p class="muted">No keys yet.</p>}</div>
      )}
    </section>
  );
}

const PAGE_SIZE = 20;

function Pager({ offset, total, onChange }: { offset: number; total: number; onChange: (offset: number) => void }) {
  // A page emptied by revoking its last rows steps back to the last page that has any.
  useEffect(() => {
    if (offset > 0 && offset >= total) onChange(Math.max(0, Math.floor((total - 1) / PAGE_SIZE) * PAGE_SIZE));
  }, [offset, total]);
  // aria-disabled, not disabled: a button that reaches the first or last page keeps the keyboard's focus (a
  // disabled one drops it to the page's start). The range is said when it changes.
  const first = offset === 0;
  const last = offset + PAGE_SIZE >= total;
  return (
    <div class="row" style="margin-top:.5rem">
      <button type="button" class="secondary" aria-disabled={first ? "true" : undefined} onClick={() => !first && onChange(Math.max(0, offset - PAGE_SIZE))}>Previous</button>
      <span class="muted" role="status">{total === 0 ? "none" : `${offset + 1}–${Math.min(offset + PAGE_SIZE, total)} of ${total}`}</span>
      <button type="button" class="secondary" aria-disabled={last ? "true" : undefined} onClick={() => !last && onChange(offset + PAGE_SIZE)}>Next</button>
    </div>
  );
}

function ProductSelect({ id, value, onChange }: { id: string; value: string; onChange: (v: string) => void }) {
  const { data } = useData(allProducts);
  return (
    <select id={id} value={value} onChange={(e) => onChange((e.target as HTMLSelectElement).value)}>
      <option value="">All products</option>
      {data?.products.map((p) => <option value={p.productId}>{p.title}</option>)}
    </select>
  );
}

function Tokens() {
  const [filter, setFilter] = useState({ productId: "", walletAddress: "", status: "" });
  const [offset, setOffset] = useState(0);
  const { data, error, reload } = useData(
    () => api<{ tokens: TokenRecord[]; total: number }>(`/dashboard/api/tokens${query({ ...filter, limit: PAGE_SIZE, offset })}`),
    [filter.productId, filter.walletAddress, filter.status, offset],
  );
  const change = (k: keyof typeof filter) => (v: string) => { setOffset(0); setFilter({ ...filter, [k]: v }); };
  return (
    <section>
      <h1>Access tokens</h1>
      <div class="card grid2" role="search">
        <div><label for="t-product">Product</label><ProductSelect id="t-product" value={filter.productId} onChange={change("productId")} /></div>
        <div><label for="t-wallet">Wallet</label><input id="t-wallet" value={filter.walletAddress} onChange={(e) => change("walletAddress")((e.target as HTMLInputElement).value.trim())} /></div>
        <div><label for="t-status">Status</label>
          <select id="t-status" value={filter.status} onChange={(e) => change("status")((e.target as HTMLSelectElement).value)}>
            <option value="">Any</option><option value="active">Active</option><option value="revoked">Revoked</option><option value="expired">Expired</option>
          </select>
        </div>
      </div>
      <LoadState data={data} error={error} reload={reload} />
      {data && (
        <div class="card table-wrap"><table>
          <thead><tr><th>Token</th><th>Product</th><th>Wallet</th><th>Status</th><th>Created</th><th><span class="visually-hidden">Actions</span></th></tr></thead>
          <tbody>{data.tokens.map((t, i) => (
            <tr key={t.accessToken}>
              <td><Short text={t.accessToken} keep={8} /><span id={`token-row-${i}`} class="visually-hidden">{`${t.productTitle}, token ${short(t.accessToken, 8)}`}</span></td><td>{t.productTitle}</td><td><Short text={t.walletAddress} /></td>
              <td><span class={`badge ${t.status === "active" ? "ok" : "bad"}`}>{t.status}</span></td><td>{when(t.createdAt)}</td>
              <td>{t.status === "active" && (
                <ConfirmButton question="Revoke this token for good?" describedBy={`token-row-${i}`} action={async () => { await api("/dashboard/api/tokens/revoke", { body: { accessToken: t.accessToken } }); reload(); }}>
                  Revoke
                </ConfirmButton>
              )}</td>
            </tr>
          ))}</tbody>
        </table>{data.total === 0 && <p class="muted">{filter.productId || filter.walletAddress || filter.status ? "No tokens match these filters." : "No tokens yet."}</p>}<Pager offset={offset} total={data.total} onChange={setOffset} /></div>
      )}
    </section>
  );
}

function Purchases() {
  const [productId, setProductId] = useState("");
  const [offset, setOffset] = useState(0);
  const { data, error, reload } = useData(
    () => api<{ purchases: Purchase[]; total: number }>(`/dashboard/api/purchases${query({ productId, limit: PAGE_SIZE, offset })}`),
    [productId, offset],
  );
  return (
    <section>
      <h1>Purchases</h1>
      <div class="card" style="max-width:360px"><label for="pu-product">Product</label><ProductSelect id="pu-product" value={productId} onChange={(v) => { setOffset(0); setProductId(v); }} /></div>
      <LoadState data={data} error={error} reload={reload} />
      {data && (
        <div class="card table-wrap"><table>
          <thead><tr><th>Product</th><th>Wallet</th><th>Amount</th><th>Transaction</th><th>Time</th></tr></thead>
          <tbody>{data.purchases.map((p) => (
            <tr key={p.purchaseId}>
              <td>{p.productTitle}</td><td><Short text={p.walletAddress} /></td><td>{p.amount} {p.currency}</td>
              <td><TxLink txHash={p.txHash} network={p.network} /></td><td>{when(p.purchasedAt)}</td>
            </tr>
          ))}</tbody>
        </table>{data.total === 0 && <p class="muted">{productId ? "No purchases of this product." : "No purchases yet."}</p>}<Pager offset={offset} total={data.total} onChange={setOffset} /></div>
      )}
    </section>
  );
}

/** `id`: its first box's (a refusal of the events focuses it); `invalid`: the boxes' marks when they are refused. */
function EventBoxes({ value, onChange, id, invalid = {}, describedBy }: { value: string[]; onChange: (v: string[]) => void; id?: string; invalid?: { "aria-invalid"?: "true"; "aria-describedby"?: string }; describedBy?: string }) {
  return (
    <fieldset class="row" style="border:0;padding:0;margin:.25rem 0" aria-describedby={describedBy}>
      <legend class="muted">Events</legend>
      {EVENTS.map((ev, i) => (
        <label style="font-weight:400;margin:0">
          <input type="checkbox" style="width:auto" id={i === 0 ? id : undefined} {...invalid} checked={value.includes(ev)}
            onChange={(e) => onChange((e.target as HTMLInputElement).checked ? [...value, ev] : value.filter((x) => x !== ev))} /> {ev}
        </label>
      ))}
    </fieldset>
  );
}

type Attempt = { attempt: number; at: string; statusCode: number | null; durationMs: number; response: string | null; error: string | null };

/** One delivery's attempts: what the receiver answered (up to 1 KiB) or why nothing was sent. */
function Attempts({ deliveryId }: { deliveryId: string }) {
  const { data, error, reload } = useData(() => api<{ attempts: Attempt[] }>(`/dashboard/api/deliveries/${deliveryId}/attempts`), [deliveryId]);
  return (
    <div data-testid="attempts">
      <LoadState data={data} error={error} reload={reload} />
      {data && data.attempts.length === 0 && <p class="muted">Not attempted yet.</p>}
      {data && data.attempts.length > 0 && (
        <table>
          <thead><tr><th>#</th><th>At</th><th>Status</th><th>Took</th><th>Response or error</th></tr></thead>
          <tbody>{data.attempts.map((a) => (
            <tr key={a.attempt}>
              <td>{a.attempt}</td><td>{when(a.at)}</td><td>{a.statusCode ?? "—"}</td><td>{a.durationMs} ms</td>
              <td><pre class="mono" style="margin:0;white-space:pre-wrap;max-width:40rem">{a.error ?? a.response ?? ""}</pre></td>
            </tr>
          ))}</tbody>
        </table>
      )}
    </div>
  );
}

function Deliveries({ endpointId, refresh }: { endpointId: string; refresh: number }) {
  const [offset, setOffset] = useState(0);
  const [opened, setOpened] = useState<string | null>(null);
  const { data, error, reload } = useData(
    () => api<{ deliveries: Delivery[]; total: number }>(`/dashboard/api/webhooks/${endpointId}/deliveries${query({ limit: PAGE_SIZE, offset })}`),
    [endpointId, offset, refresh],
  );
  return (
    <div>
      <div class="row"><h3 style="margin:.75rem 0 .25rem">Delivery log</h3><button type="button" class="secondary" onClick={reload}>Refresh</button></div>
      <LoadState data={data} error={error} reload={reload} />
      {data && (
        <div class="table-wrap"><table data-testid="deliveries">
          <thead><tr><th>Event</th><th>Status</th><th>Attempts</th><th>Last response</th><th>Next attempt</th><th>Created</th><th><span class="visually-hidden">Actions</span></th></tr></thead>
          <tbody>{data.deliveries.map((d) => [
            <tr key={d.deliveryId}>
              <td id={`row-${d.deliveryId}`}>{d.type}<div class="muted mono">{d.eventId}</div></td>
              <td><span class={`badge ${d.status === "succeeded" ? "ok" : d.status === "failed" ? "bad" : ""}`}>{d.status}</span></td>
              <td>{d.attempts}</td><td>{d.lastStatusCode ?? "—"}</td><td>{when(d.nextAttemptAt)}</td><td>{when(d.createdAt)}</td>
              <td><div class="row">
                <button type="button" class="secondary" aria-expanded={opened === d.deliveryId} aria-describedby={`row-${d.deliveryId}`}
                  onClick={() => setOpened(opened === d.deliveryId ? null : d.deliveryId)}>Attempts</button>
                <ActionButton class="secondary" describedBy={`row-${d.deliveryId}`} action={async () => { await api(`/dashboard/api/deliveries/${d.deliveryId}/resend`, { method: "POST" }); reload(); }}>Resend</ActionButton>
              </div></td>
            </tr>,
            opened === d.deliveryId && <tr key={`${d.deliveryId}-attempts`}><td colSpan={7}><Attempts deliveryId={d.deliveryId} /></td></tr>,
          ])}</tbody>
        </table>{data.total === 0 && <p class="muted">No deliveries yet.</p>}<Pager offset={offset} total={data.total} onChange={setOffset} /></div>
      )}
    </div>
  );
}

/** An endpoint's signing secret shown, to copy; Hide takes it off the screen and the keyboard back to `focusAfter` (the button that showed it). */
function WebhookSecret({ words, secret, hide, focusAfter }: { words: string; secret: string; hide: () => void; focusAfter: string }) {
  return (
    <div class="secret">
      <span>{words}</span><code>{secret}</code><CopyButton text={secret} />
      <button type="button" class="secondary" onClick={() => { hide(); document.getElementById(focusAfter)?.focus(); }}>Hide</button>
    </div>
  );
}

function EndpointCard({ endpoint, onChanged }: { endpoint: Endpoint; onChanged: () => void }) {
  const [secret, setSecret] = useState<string | null>(null);
  const [sent, setSent] = useState(false);
  const [url, setUrl] = useState(endpoint.url);
  const [events, setEvents] = useState(endpoint.events);
  const [refresh, setRefresh] = useState(0);
  // The card stays as the endpoint changes (the button pressed keeps the keyboard's focus): its fields follow
  // what was saved, here or elsewhere; an edit not saved stays while the saved value it started from does.
  useEffect(() => setUrl(endpoint.url), [endpoint.url]);
  useEffect(() => setEvents(endpoint.events), [endpoint.events.join()]);
  const path = `/dashboard/api/webhooks/${endpoint.endpointId}`;
  const named = `ep-${endpoint.endpointId}`; // what this card's buttons act on, for screen readers
  // Only what was changed here: a save from a card shown earlier must not put back a URL or events changed since.
  const edits = { ...(url !== endpoint.url ? { url } : {}), ...(events.join() !== endpoint.events.join() ? { events } : {}) };
  // A refused URL is marked on the card's own field, and said with the form's words, as in the Add form.
  const { busy: saving, error: saveError, submit: save } = useSubmit(async () => {
    if (Object.keys(edits).length > 0) await api(path, { method: "PATCH", body: edits });
    onChanged();
  });
  const invalid = useFieldErrors(saveError, { url: `${named}-url` }, `${named}-error`);
  return (
    <div class="card" data-testid="endpoint">
      {/* The card's heading, for screen readers: it names the endpoint its controls act on (aria-describedby). */}
      <h2 id={named} class="visually-hidden">{`Endpoint ${endpoint.url}`}</h2>
      <div class="row" style="justify-content:space-between">
        {/* Editable: a retry goes to the URL as it is at that attempt. */}
        <label for={`${named}-url`}>URL</label>
        <input id={`${named}-url`} class="mono" style="flex:1" type="url" required aria-describedby={named} value={url} onInput={(e) => setUrl((e.target as HTMLInputElement).value)} {...invalid("url")} />
        <span class={`badge ${endpoint.enabled ? "ok" : "bad"}`}>{endpoint.enabled ? "enabled" : "disabled"}</span>
      </div>
      <EventBoxes value={events} onChange={setEvents} describedBy={named} />
      <div class="row">
        <button type="button" class="secondary" aria-describedby={named} aria-disabled={saving ? "true" : undefined} onClick={() => save()}>Save URL and events</button>
        <ActionButton class="secondary" describedBy={named} action={async () => { await api(path, { method: "PATCH", body: { enabled: !endpoint.enabled } }); onChanged(); }}>
          {endpoint.enabled ? "Disable" : "Enable"}
        </ActionButton>
        <ActionButton id={`${named}-reveal`} class="secondary" describedBy={named} action={async () => setSecret((await api<{ secret: string }>(`${path}/secret`)).secret)}>Reveal secret</ActionButton>
        <ConfirmButton question="Rotate? The old secret keeps signing for 24 hours." describedBy={named} action={async () => setSecret((await api<{ secret: string }>(`${path}/rotate-secret`, { method: "POST" })).secret)}>
          Rotate secret
        </ConfirmButton>
        <ActionButton class="secondary" describedBy={named} action={async () => { setSent(false); await api(`${path}/test`, { method: "POST" }); setSent(true); setTimeout(() => setRefresh((r) => r + 1), 800); }}>Send test event</ActionButton>
        <ConfirmButton question="Delete this endpoint?" describedBy={named} action={async () => { await api(path, { method: "DELETE" }); onChanged(); }}>Delete</ConfirmButton>
      </div>
      <ErrorText error={saveError} id={`${named}-error`} labels={{ url: "URL", events: "Events" }} />
      {/* Always there, so that what appears in it is said: the secret shown, a test event sent. */}
      <div role="status">
        {sent && <p class="muted">Test event sent: its delivery is listed below.</p>}
        {secret && <WebhookSecret words="Signing secret:" secret={secret} hide={() => setSecret(null)} focusAfter={`${named}-reveal`} />}
      </div>
      <Deliveries endpointId={endpoint.endpointId} refresh={refresh} />
    </div>
  );
}

function Webhooks() {
  const { data, error, reload } = useData(() => api<{ endpoints: Endpoint[] }>("/dashboard/api/webhooks"));
  const [url, setUrl] = useState("");
  const [events, setEvents] = useState<string[]>(["payment.completed", "feature.unlocked"]);
  const [created, setCreated] = useState<string | null>(null);
  const { busy, error: addError, submit: add, stopped: addStopped } = useSubmit(async () => {
    setCreated((await api<{ secret: string }>("/dashboard/api/webhooks", { body: { url, events } })).secret);
    setUrl("");
    reload();
  });
  const endpointInvalid = useFieldErrors(addError, { url: "w-url", events: "w-events" }, "w-error");
  return (
    <section>
      <h1>Webhooks</h1>
      <form class="card" onSubmit={add} onInvalidCapture={addStopped} aria-label="Add a webhook endpoint">
        <label for="w-url">Endpoint URL</label>
        <input id="w-url" type="url" required placeholder="https://example.com/webhooks/walletgate" value={url} onInput={(e) => setUrl((e.target as HTMLInputElement).value)} {...endpointInvalid("url")} />
        <EventBoxes value={events} onChange={setEvents} id="w-events" invalid={endpointInvalid("events")} />
        <button id="w-add" type="submit" aria-disabled={busy ? "true" : undefined}>Add endpoint</button>
        <ErrorText error={addError} id="w-error" labels={{ url: "URL", events: "Events" }} />
        <div role="status">
          {created && <WebhookSecret words="Endpoint added. Signing secret:" secret={created} hide={() => setCreated(null)} focusAfter="w-add" />}
        </div>
      </form>
      <LoadState data={data} error={error} reload={reload} />
      {data?.endpoints.map((ep) => <EndpointCard key={ep.endpointId} endpoint={ep} onChanged={reload} />)}
      {data && data.endpoints.length === 0 && <p class="muted">No endpoints yet.</p>}
    </section>
  );
}

/** A URL component decoded, or as it is when it is no valid percent-encoding (the server then says what is wrong). */
function decodedOr(component: string): string {
  try {
    return decodeURIComponent(component);
  } catch {
    return component;
  }
}

function App() {
  const [me, setMe] = useState<Me | null | undefined>(undefined);
  const [error, setError] = useState<unknown>(null);
  const [page, setPage] = useState<Page>(pageOf(location.hash));
  const pageRef = useRef(page);
  pageRef.current = page;
  // A section opened from the tabs: the page's title names it, and the keyboard goes to its heading (not on
  // the first load: the page opens as it is). In the section's own render (a layout effect): after paint, it
  // could take the keyboard from a form the owner opened meanwhile on a slow machine.
  const opened = useRef(false);
  const loaded = me !== undefined;
  const signedIn = me !== null && me !== undefined;
  const focusHeading = () => {
    const heading = document.querySelector<HTMLElement>("main h1");
    heading?.setAttribute("tabindex", "-1");
    heading?.focus();
  };
  useLayoutEffect(() => {
    document.title = signedIn ? `${PAGES.find(([p]) => p === page)?.[1] ?? "Overview"} · walletgate dashboard` : "Sign in · walletgate dashboard";
    if (opened.current) focusHeading();
    // A sign-in or a sign-out moves the keyboard to the new view's heading too, not the first load.
    if (loaded) opened.current = true;
  }, [page, signedIn, loaded]);
  // The session ended under the page: it stays, with a sign-in card above it (SignIn `again`).
  const [signedOut, setSignedOutState] = useState(false);
  const signedOutRef = useRef(false);
  const setSignedOut = (value: boolean) => {
    signedOutRef.current = value;
    setSignedOutState(value);
  };
  // Signed in again from the Signed out card: the card goes, and the keyboard to the page's heading.
  const wasSignedOut = useRef(false);
  useLayoutEffect(() => {
    if (wasSignedOut.current && !signedOut) focusHeading();
    wasSignedOut.current = signedOut;
  }, [signedOut]);
  const [notice, setNotice] = useState<string | null>(null);
  /** `after`: what led here, for the words of a notice when the page now shows another wallet. */
  const loadMe = async (after: "start" | "sign-in" | "other-wallet" = "sign-in") => {
    const shown = shownWalletAddress(); // the wallet this tab shows, if any
    try {
      const link = linkCode(location.hash);
      if (link !== undefined) {
        // The one-time code leaves the address bar at once (a page showing keeps its place in it).
        history.replaceState(null, "", location.pathname + (shown !== null ? `#/${pageRef.current}` : ""));
        try {
          await api("/dashboard/api/session/link", { body: { code: decodedOr(link) } });
        } catch (err) {
          const used = err instanceof ApiError && err.status === 401;
          const words = "This link was already used or has expired. Run walletgate dashboard-link again, or connect your wallet.";
          // Opened in a tab showing a page (signed in, or under the Signed out card): the page and its session
          // stay as they are, and the notice says why the link did nothing.
          if (shown !== null) {
            setNotice(used ? words : `This sign-in link did not work: ${errorWords(err)}`);
            return;
          }
          if (!used) throw err;
          setError(new Error(words));
        }
      }
      // The page's own requests go on naming the wallet it shows until it shows another.
      const next = await api<Me>("/dashboard/api/me", { asWhoever: true });
      if (shown === next.walletAddress) window.dispatchEvent(new Event(SIGNED_IN_AGAIN_EVENT));
      if (shown !== null && shown !== next.walletAddress) {
        setNotice(
          after === "other-wallet"
            ? `This tab now shows wallet ${next.walletAddress}: this browser was signed in with it (in another tab, or by a sign-in link). Nothing was done for ${shown} since.`
            : `Signed in as ${next.walletAddress}, another wallet than before (${shown}): this page now shows its account.`,
        );
      }
      showWallet(next.walletAddress); // its requests name it from now on
      setMe(next);
      setSignedOut(false);
      setError(null);
    } catch (err) {
      // Still signed out under a page that stays (a check again, the tab looked at again): the card stays.
      if (signedOutRef.current) {
        setError(err);
        return;
      }
      // A plain 401 is only "not signed in yet"; one that says why (two session cookies) is shown.
      if (!(err instanceof ApiError && err.status === 401 && err.reason === null)) setError(err);
      showWallet(null);
      setSignedOut(false);
      setMe(null);
    }
  };
  useEffect(() => {
    loadMe("start");
    // A sign-in link opened in this tab changes only the hash: it signs in here, and the page stays as it is.
    const onHash = () => (linkCode(location.hash) !== undefined ? void loadMe("sign-in") : setPage(pageOf(location.hash)));
    // Signed in again elsewhere (another tab, a link): the Signed out card goes when this tab is looked at again.
    const onVisible = () => {
      if (document.visibilityState === "visible" && signedOutRef.current) void loadMe("sign-in");
    };
    // The session ended under the page (expired, revoked elsewhere): a card above the page says so, and the
    // page stays as it is until the wallet signs in again.
    const onSignedOut = (event: Event) => {
      if (shownWalletAddress() === null) return;
      setError((event as CustomEvent<unknown>).detail);
      setSignedOut(true);
    };
    // The browser's session is now another wallet's: the page is shown again for that one (nothing was done).
    const onWalletChanged = () => void loadMe("other-wallet");
    window.addEventListener("hashchange", onHash);
    window.addEventListener(SIGNED_OUT_EVENT, onSignedOut);
    window.addEventListener(WALLET_CHANGED_EVENT, onWalletChanged);
    document.addEventListener("visibilitychange", onVisible);
    return () => {
      document.removeEventListener("visibilitychange", onVisible);
      window.removeEventListener("hashchange", onHash);
      window.removeEventListener(SIGNED_OUT_EVENT, onSignedOut);
      window.removeEventListener(WALLET_CHANGED_EVENT, onWalletChanged);
    };
  }, []);
  if (me === undefined) return <p class="shell loading">Loading…</p>;
  if (me === null) return <><SignIn onSignedIn={loadMe} />{error !== null && <div class="shell"><ErrorText error={error} /></div>}</>;
  return (
    <div class="shell">
      <header class="top">
        <span class="brand">walletgate</span>
        <span class="row">
          <Short text={me.walletAddress} />
          <ActionButton class="secondary" action={async () => { await api("/dashboard/api/session", { method: "DELETE" }); showWallet(null); setError(null); setNotice(null); setMe(null); }}>Sign out</ActionButton>
        </span>
      </header>
      <nav class="tabs" aria-label="Dashboard">
        {PAGES.map(([id, title]) => <a href={`#/${id}`} aria-current={page === id ? "page" : undefined}>{title}</a>)}
      </nav>
      {signedOut && <SignIn onSignedIn={loadMe} again={{ error }} />}
      {notice !== null && (
        <div class="notice row" role="status">
          <span>{notice}</span>
          <button type="button" class="secondary" onClick={() => setNotice(null)}>Dismiss</button>
        </div>
      )}
      {/* Another wallet's page is a new page: nothing typed for the one before is carried over to it. */}
      <main key={me.walletAddress}>
        {page === "overview" && <Overview me={me} />}
        {page === "products" && <Products />}
        {page === "keys" && <Keys />}
        {page === "tokens" && <Tokens />}
        {page === "purchases" && <Purchases />}
        {page === "webhooks" && <Webhooks />}
      </main>
    </div>
  );
}

render(<App />, document.getElementById("root")!);
