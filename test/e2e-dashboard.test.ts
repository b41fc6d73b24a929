// The pages end to end in real headless Chromium (dashboard.md "Testing"): an owner signs in with a
// browser wallet, creates a product and an API key (shown once), revokes the key (the public API then
// refuses it) and adds a webhook endpoint; a second wallet buys on the checkout page (a rejected
// signature first, then a retry, its progress shown step by step); the delivery log shows the verified
// delivery. Screenshots are saved.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { Keypair } from "@solana/web3.js";
import type { Browser, BrowserContext, Page } from "playwright-core";
import { verifyingReceiver } from "./helpers/receiver.ts";
import { addStandardWallet, launchChromium, SCREENSHOTS, walletContext } from "./helpers/browser.ts";
import { runCli, startTestServer, type TestServer } from "./helpers/server.ts";
import { call, newWallet, signIn, type Json } from "./helpers/wallet.ts";
import { until } from "./helpers/until.ts";

const browser: Browser | null = await launchChromium();
const e2e = browser === null ? describe.skip : describe;
if (browser === null) console.warn("e2e: /usr/bin/chromium is not installed; skipping the browser tests (apt-get install chromium)");

let server: TestServer;
const owner = newWallet();
const buyer = newWallet();
const hook = verifyingReceiver();
const received = hook.received;

let ownerPage: Page;
const state: { productId?: string; paymentUrl?: string; key?: string } = {};

beforeAll(async () => {
  server = await startTestServer({ ALLOW_PRIVATE_NETWORK_TARGETS: "true", AUTH_RATE_LIMIT: "off" });
  if (browser !== null) ownerPage = await (await walletContext(browser, owner)).newPage();
});

afterAll(async () => {
  await browser?.close();
  await hook.stop();
  await server?.dispose();
});

const shot = (page: Page, name: string) => page.screenshot({ path: join(SCREENSHOTS, `${name}.png`), fullPage: true });

async function publicCheck(key: string) {
  const res = await fetch(`${server.url}/public/access/check`, {
    method: "POST",
    headers: { "content-type": "application/json", "x-api-key": key },
    body: JSON.stringify({ productId: state.productId, walletAddress: buyer.address }),
  });
  return { status: res.status, body: (await res.json()) as Json };
}

/** Ends the session of `context`'s dashboard cookie from outside the page (as a revoke elsewhere would). */
async function endSessionOf(context: BrowserContext): Promise<void> {
  const token = (await context.cookies()).find((c) => c.name === "wg_session")!.value;
  expect((await call(server.url, "/auth/revoke", { method: "POST", token })).status).toBe(200);
}

/** A browser with two Wallet Standard wallets, Phantom and Solflare, on the dashboard, signed in with Solflare. */
async function twoWalletsSignedInWithSolflare(browser: Browser) {
  const [inPhantom, inSolflare] = [newWallet(), newWallet()];
  const context = await browser.newContext();
  await addStandardWallet(context, "Phantom", inPhantom);
  await addStandardWallet(context, "Solflare", inSolflare, undefined, true); // it gave the site its account before
  const page = await context.newPage();
  await page.goto(`${server.url}/dashboard`);
  const choice = page.getByLabel("Wallet");
  await choice.waitFor();
  expect(await choice.locator("option").allTextContents()).toEqual(["Phantom", "Solflare"]);
  await choice.selectOption("Solflare");
  await page.getByRole("button", { name: "Connect wallet" }).click();
  await page.getByTitle(inSolflare.address).waitFor(); // signed in with the one chosen
  return { context, page, inSolflare };
}

e2e("dashboard and checkout pages in Chromium", () => {
  test("sign-in: Connect wallet signs a challenge; the session lives in an HttpOnly cookie", async () => {
    await ownerPage.goto(`${server.url}/dashboard`);
    await ownerPage.getByRole("button", { name: "Connect wallet" }).click();
    await ownerPage.getByRole("navigation", { name: "Dashboard" }).waitFor();
    await ownerPage.getByRole("heading", { name: "Overview" }).waitFor();
    await ownerPage.getByRole("img", { name: "Revenue per UTC day for the last 30 days: none yet" }).waitFor(); // nothing sold yet
    const cookie = (await ownerPage.context().cookies()).find((c) => c.name === "wg_session")!;
    expect({ httpOnly: cookie.httpOnly, sameSite: cookie.sameSite }).toEqual({ httpOnly: true, sameSite: "Strict" });
    expect(await ownerPage.evaluate(() => (globalThis as any).document.cookie as string)).not.toContain("wg_session"); // not readable by scripts
  }, 60_000);

  test("creates a product and copies its payment link", async () => {
    await ownerPage.getByRole("link", { name: "Products" }).click();
    await ownerPage.getByRole("button", { name: "New product" }).click();
    expect((await ownerPage.evaluate(() => { const a = (globalThis as any).document.activeElement; return a?.id || a?.textContent; }))).toBe("p-title"); // the form opens with the keyboard in it
    await ownerPage.getByLabel("Title").fill("Pro plan");
    await ownerPage.getByLabel("Price").fill("2.5");
    await ownerPage.getByLabel("Feature ids (comma-separated)").fill("pro, export");
    await ownerPage.getByLabel("Description").fill("Unlocks export and the pro tools.");
    await ownerPage.getByRole("button", { name: "Create product" }).click();
    await ownerPage.getByRole("cell", { name: /Pro plan/ }).waitFor();
    expect((await ownerPage.evaluate(() => { const a = (globalThis as any).document.activeElement; return a?.id || a?.textContent; }))).toBe("New product"); // and back where it was when the form closes
    // Escape closes a form opened by mistake, the keyboard back on New product.
    await ownerPage.keyboard.press("Enter");
    await ownerPage.getByLabel("Title").waitFor();
    await ownerPage.keyboard.press("Escape");
    await ownerPage.getByLabel("Title").waitFor({ state: "detached" });
    expect((await ownerPage.evaluate(() => (globalThis as any).document.activeElement?.textContent))).toBe("New product");
    // With something typed in it, Escape asks first: "no" keeps the form as it is, "yes" closes it.
    await ownerPage.keyboard.press("Enter");
    await ownerPage.getByLabel("Title").fill("Half typed");
    const asked: string[] = [];
    ownerPage.once("dialog", (dialog) => { asked.push(dialog.message()); void dialog.dismiss(); });
    await ownerPage.keyboard.press("Escape");
    expect([asked, await ownerPage.getByLabel("Title").inputValue()]).toEqual([["Discard what you changed in this form?"], "Half typed"]);
    ownerPage.once("dialog", (dialog) => void dialog.accept());
    await ownerPage.keyboard.press("Escape");
    await ownerPage.getByLabel("Title").waitFor({ state: "detached" });
    const products = (await ownerPage.evaluate(() => fetch("/dashboard/api/products").then((r) => r.json()))) as Json;
    expect(products.products).toHaveLength(1);
    state.productId = products.products[0].productId;
    state.paymentUrl = products.products[0].paymentUrl;
    expect(state.paymentUrl).toBe(`${server.url}/pay/${state.productId}`);
    // Copy link: the link is on the clipboard, and "Copied" is announced (the button is a live region).
    await ownerPage.context().grantPermissions(["clipboard-read", "clipboard-write"], { origin: server.url });
    const copy = ownerPage.getByRole("button", { name: "Copy link" });
    expect(await copy.getAttribute("aria-live")).toBe("polite");
    const copied = ownerPage.getByRole("button", { name: "Copied" }).waitFor(); // watched from before the click: it is said for a while only
    await copy.click();
    await copied;
    expect(await ownerPage.evaluate(() => (globalThis as any).navigator.clipboard.readText())).toBe(state.paymentUrl);
    await shot(ownerPage, "products");
  }, 60_000);

  test("Pay to: set to another wallet, then emptied, which is the owner's wallet again", async () => {
    const product = () => ownerPage.evaluate((id) => fetch(`/dashboard/api/products/${id}`).then((r) => r.json()), state.productId!) as Promise<Json>;
    const other = newWallet().address;
    for (const [payTo, expected] of [[other, other], ["", owner.address]] as const) {
      await ownerPage.getByRole("button", { name: "Edit" }).click();
      await ownerPage.getByLabel("Pay to (empty: your wallet)").fill(payTo);
      await ownerPage.getByRole("button", { name: "Save" }).click();
      await ownerPage.getByRole("button", { name: "New product" }).waitFor();
      expect((await product()).payTo).toBe(expected);
    }
  }, 60_000);

  test("an API key is shown once, works, and is never shown again", async () => {
    await ownerPage.getByRole("link", { name: "API keys" }).click();
    await ownerPage.getByLabel("Label").fill("shop backend");
    await ownerPage.getByRole("button", { name: "Create key" }).click();
    const key = (await ownerPage.getByTestId("new-key-value").textContent())!;
    expect(key).toMatch(/^pk_/);
    state.key = key;
    await ownerPage.getByText("It is shown only once").waitFor();
    expect((await publicCheck(key)).status).toBe(200);
    await ownerPage.getByRole("button", { name: "Done, I have copied it" }).click();
    expect((await ownerPage.evaluate(() => { const a = (globalThis as any).document.activeElement; return a?.id || a?.textContent; }))).toBe("k-label"); // the keyboard goes back to the form
    expect(await ownerPage.content()).not.toContain(key);
    await ownerPage.reload();
    await ownerPage.getByRole("cell", { name: "shop backend" }).waitFor();
    expect(await ownerPage.content()).not.toContain(key);
  }, 60_000);

  test("revoking the key asks first; the public API then refuses it", async () => {
    // The row's Revoke is described by the key it revokes (every row has a button of that name).
    const describedBy = await ownerPage.getByRole("button", { name: "Revoke" }).getAttribute("aria-describedby");
    expect(await ownerPage.locator(`[id="${describedBy}"]`).textContent()).toBe("shop backend");
    await ownerPage.getByRole("button", { name: "Revoke" }).click();
    // The keyboard stays on the question: Yes is focused, and Cancel gives the focus back to Revoke.
    expect(await ownerPage.evaluate(() => (globalThis as any).document.activeElement?.textContent)).toBe("Yes");
    await ownerPage.getByRole("button", { name: "Cancel" }).click();
    expect(await ownerPage.evaluate(() => (globalThis as any).document.activeElement?.textContent)).toBe("Revoke");
    // Escape answers No as Cancel does: the question goes, the keyboard is back on Revoke, the key still works.
    await ownerPage.keyboard.press("Enter");
    expect(await ownerPage.evaluate(() => (globalThis as any).document.activeElement?.textContent)).toBe("Yes");
    await ownerPage.keyboard.press("Escape");
    await ownerPage.waitForFunction(() => (globalThis as any).document.activeElement?.textContent === "Revoke");
    expect(await ownerPage.getByRole("button", { name: "Yes" }).count()).toBe(0);
    expect((await publicCheck(state.key!)).status).toBe(200);
    await ownerPage.keyboard.press("Enter");
    await ownerPage.keyboard.press("Enter"); // Yes, by keyboard
    await ownerPage.getByText("revoked", { exact: true }).waitFor();
    // The Revoke button is gone with its key's active state: the keyboard lands on the section's heading.
    await ownerPage.waitForFunction(() => (globalThis as any).document.activeElement?.tagName === "H1");
    expect(await ownerPage.evaluate(() => (globalThis as any).document.activeElement?.textContent)).toBe("API keys");
    expect(await publicCheck(state.key!)).toEqual({ status: 401, body: { error: "Invalid or expired API key", code: "INVALID_API_KEY" } });
  }, 60_000);

  test("adds a webhook endpoint and shows its secret", async () => {
    await ownerPage.getByRole("link", { name: "Webhooks" }).click();
    await ownerPage.getByLabel("Endpoint URL").fill(hook.url);
    await ownerPage.getByRole("button", { name: "Add endpoint" }).click();
    await ownerPage.getByTestId("endpoint").waitFor();
    const secret = (await ownerPage.locator("form .secret code").textContent())!;
    expect(secret).toMatch(/^whsec_/);
    hook.setSecret(secret);
    await ownerPage.locator("form .secret").getByRole("button", { name: "Hide" }).click(); // copied: off the screen
    expect(await ownerPage.locator("form .secret").count()).toBe(0);
    expect(await ownerPage.content()).not.toContain(secret);
  }, 60_000);

  test("a second wallet buys on the checkout page: a rejected signature, a retry shown step by step, the token", async () => {
    const airdrop = await runCli(["ledger", "airdrop", "--to", buyer.address, "--sol", "1", "--usdc", "10"], { DATA_DIR: server.dataDir });
    expect(airdrop.code).toBe(0);
    const context = await walletContext(browser!, buyer);
    const page = await context.newPage();
    await page.goto(`${state.paymentUrl}?wallet=${buyer.address}&redirect=${encodeURIComponent("/dashboard")}`);
    await page.getByRole("heading", { name: "Pro plan" }).waitFor();
    await page.getByText("2.5 USDC").waitFor();
    context.setReject(true);
    // By keyboard: the button keeps the focus while it works and after it fails, so Enter again retries.
    await page.getByRole("button", { name: "Pay with wallet" }).focus();
    await page.keyboard.press("Enter");
    await page.getByText("You rejected the signature in your wallet").waitFor();
    expect(await page.evaluate(() => (globalThis as any).document.activeElement?.textContent)).toBe("Try again");
    context.setReject(false);
    // The progress: each step is the current one while it lasts. The wallet holds the signing request, and
    // the page's /submit is held, as long as it takes to look.
    const steps = () => page.locator("ol.steps li").evaluateAll((items) => items.map((li) => `${li.getAttribute("data-state")}${li.getAttribute("aria-current") === "step" ? " current" : ""}: ${li.textContent}`));
    const current = (label: string) => page.locator('ol.steps li[aria-current="step"]').filter({ hasText: label }).waitFor({ timeout: 20_000 });
    const wallet = context.holdSignatures();
    let sendSubmit = () => {};
    const submitHeld = new Promise<void>((resolve) => (sendSubmit = resolve));
    await page.route("**/submit", async (route) => {
      await submitHeld;
      await route.continue();
    });
    await page.getByRole("button", { name: "Try again" }).click();
    await wallet.requested;
    await current("Waiting for your signature");
    // A step done says so in words too, to a screen reader (the marks are hidden from it).
    expect(await steps()).toEqual(["done: ✓ Connect wallet (done)", "active current: → Waiting for your signature", "todo: · Confirming the payment", "todo: · Done"]);
    expect(await page.getByTestId("pay-status").textContent()).toBe("Step 2 of 4: Waiting for your signature.");
    wallet.release();
    await current("Confirming the payment");
    expect(await steps()).toEqual(["done: ✓ Connect wallet (done)", "done: ✓ Waiting for your signature (done)", "active current: → Confirming the payment", "todo: · Done"]);
    sendSubmit();
    const token = (await page.getByTestId("access-token").textContent({ timeout: 20_000 }))!;
    // Paid: the button is gone, and the keyboard is on the outcome, which the status line says in words.
    // (focus moves in an effect, after paint; the outcome is the element with tabindex -1, not the page's body)
    await page.waitForFunction(() => {
      const at = (globalThis as any).document.activeElement;
      return at?.getAttribute("tabindex") === "-1" && (at.textContent as string).includes("Payment complete");
    });
    expect(await page.getByTestId("pay-status").textContent()).toBe("Payment complete; your access token is shown below");
    expect(token).toMatch(/^ft_/);
    expect(await steps()).toEqual(["done: ✓ Connect wallet (done)", "done: ✓ Waiting for your signature (done)", "done: ✓ Confirming the payment (done)", "done current: ✓ Done"]);
    await page.unroute("**/submit");
    // A screen reader hears each step as it changes: a status region there from the page's start says it in a
    // sentence (the list's marks, which it would read as symbols, are hidden from it).
    expect(await page.getByTestId("pay-status").evaluate((el) => [el.getAttribute("role"), el.getAttribute("aria-live")])).toEqual(["status", "polite"]);
    expect(await page.locator("ol.steps li span[aria-hidden=true]").count()).toBe(4);
    await page.getByRole("link", { name: /Return to/ }).waitFor();
    expect(await page.getByRole("link", { name: /Return to/ }).getAttribute("href")).toMatch(/\/dashboard\?txHash=\w+/);
    await shot(page, "checkout");
    // The owner's dashboard lists the new token as active.
    const tokens = (await ownerPage.evaluate(() => fetch("/dashboard/api/tokens").then((r) => r.json()))) as Json;
    expect(tokens.tokens.map((t: Json) => [t.accessToken, t.status, t.walletAddress])).toEqual([[token, "active", buyer.address]]);
    await context.close();
  }, 60_000);

  test("the delivery log shows the verified deliveries of the purchase", async () => {
    const deadline = Date.now() + 20_000;
    while (received.length < 2 && Date.now() < deadline) await Bun.sleep(100);
    expect(received.map((r) => r.type)).toEqual(["payment.completed", "feature.unlocked"]); // in the order written
    expect(received.every((r) => r.verified)).toBe(true);
    await ownerPage.reload();
    const log = ownerPage.getByTestId("deliveries");
    await log.getByText("payment.completed").waitFor();
    await log.getByText("feature.unlocked").waitFor();
    // The receiver saw both before the worker recorded the second as succeeded: reload until the page has it.
    await until(
      async () => {
        if ((await log.getByText("succeeded").count()) === 2) return true;
        await ownerPage.reload();
        await log.getByText("feature.unlocked").waitFor();
        return undefined;
      },
      20_000,
      250,
    );
    expect(await log.getByText("succeeded").count()).toBe(2);
    for (const { id } of received) await log.getByText(id).waitFor();
    // A row opens to its attempts: what the receiver answered.
    const row = log.getByRole("row").filter({ hasText: "payment.completed" });
    await row.getByRole("button", { name: "Attempts" }).click();
    const attempts = log.getByTestId("attempts");
    await attempts.getByRole("cell", { name: "200", exact: true }).waitFor();
    expect(await attempts.getByRole("row").count()).toBe(2); // the header and one attempt
    expect(await row.getByRole("button", { name: "Attempts" }).getAttribute("aria-expanded")).toBe("true");
    await shot(ownerPage, "webhooks");
  }, 60_000);

  test("the endpoint's URL is edited on its card: a bad one is refused with the reason, a good one gets the next event", async () => {
    const moved = verifyingReceiver({ path: "/moved" });
    try {
      const card = ownerPage.getByTestId("endpoint");
      const urlInput = card.getByLabel("URL", { exact: true });
      expect(await urlInput.inputValue()).toBe(hook.url);
      await urlInput.fill("ftp://example.com/hook");
      await card.getByRole("button", { name: "Save URL and events" }).click();
      await card.getByRole("alert").waitFor();
      // Marked on the card's own field, which gets the keyboard, and said with the form's word for it.
      expect(await urlInput.getAttribute("aria-invalid")).toBe("true");
      expect(await urlInput.evaluate((el) => el === (globalThis as any).document.activeElement)).toBe(true);
      expect(await card.getByRole("alert").innerText()).toMatch(/^URL/);
      const endpoints = async () => ((await ownerPage.evaluate(() => fetch("/dashboard/api/webhooks").then((r) => r.json()))) as Json).endpoints as Json[];
      expect((await endpoints()).map((e) => e.url)).toEqual([hook.url]); // nothing saved

      moved.setSecret(await ownerPage.evaluate(async (id: string) => ((await (await fetch(`/dashboard/api/webhooks/${id}/secret`)).json()) as { secret: string }).secret, (await endpoints())[0]!.endpointId as string));
      await urlInput.fill(moved.url);
      await card.getByRole("button", { name: "Save URL and events" }).click();
      await ownerPage.waitForFunction(async (url: string) => {
        const body = (await (await fetch("/dashboard/api/webhooks")).json()) as { endpoints: { url: string }[] };
        return body.endpoints[0]?.url === url;
      }, moved.url);
      expect(await ownerPage.getByTestId("endpoint").getByLabel("URL", { exact: true }).inputValue()).toBe(moved.url);
      await ownerPage.getByTestId("endpoint").getByRole("button", { name: "Send test event" }).click();
      const deadline = Date.now() + 10_000;
      while (moved.received.length === 0 && Date.now() < deadline) await Bun.sleep(100);
      expect(moved.received.map((d) => [d.type, d.verified])).toEqual([["webhook.test", true]]);
    } finally {
      await moved.stop();
    }
  }, 60_000);

  test("the overview shows the revenue, the chart and the tier; sign out revokes the session", async () => {
    // A second purchase, paid in the service token by an agent's custodial wallet: revenue in it is shown too.
    const agent = await call(server.url, "/mcp", { body: { tool: "wallet_create", params: { airdropSol: 1 } } });
    expect((await runCli(["ledger", "airdrop", "--to", agent.body.data.address, "--token", "5"], { DATA_DIR: server.dataDir })).code).toBe(0);
    const { sessionToken } = await signIn(server.url, owner);
    const pass = await call(server.url, "/dashboard/api/products", { token: sessionToken, body: { title: "Day pass", description: "", type: "access", price: "2.5", currency: "WGT" } });
    const paid = await call(server.url, "/mcp", { body: { tool: "checkout_pay", params: { productId: pass.body.productId } }, token: agent.body.data.sessionToken });
    expect(paid.body.success, JSON.stringify(paid.body)).toBe(true);
    await ownerPage.getByRole("link", { name: "Overview" }).click();
    await ownerPage.getByText("2.5 USDC", { exact: true }).waitFor();
    await ownerPage.getByText("Revenue · 2.5 WGT").waitFor();
    const bars = await ownerPage.locator("svg.chart rect.bar").evaluateAll((rects) => rects.map((r) => Number(r.getAttribute("height"))));
    expect(bars).toHaveLength(30);
    expect(bars.filter((h) => h > 0)).toHaveLength(1); // today's purchases (the chart is in USDC)
    await ownerPage.getByRole("img", { name: "Revenue per UTC day for the last 30 days: up to 2.5 USDC a day" }).waitFor();
    // For a screen reader: the days as a table, the section named in the title, the keyboard on its heading.
    expect(await ownerPage.locator("table:has(caption) tbody tr").count()).toBe(30);
    expect(await ownerPage.title()).toBe("Overview · walletgate dashboard");
    expect(await ownerPage.evaluate(() => (globalThis as any).document.activeElement?.tagName)).toBe("H1");
    await ownerPage.getByText(/^Tier free/).waitFor();
    // The chart's days are UTC days (the tables show local times), and its screen-reader table does not lengthen the page.
    expect(await ownerPage.locator(".chart-days").innerText()).toMatch(/^\d{4}-\d{2}-\d{2} UTC\s+\d{4}-\d{2}-\d{2} UTC$/);
    const { scrollHeight, contentBottom } = await ownerPage.evaluate(() => {
      const doc = (globalThis as any).document;
      const bottoms = [...doc.querySelectorAll(".card")].map((el: any) => el.getBoundingClientRect().bottom + (globalThis as any).scrollY);
      return { scrollHeight: doc.documentElement.scrollHeight as number, contentBottom: Math.max(...bottoms, (globalThis as any).innerHeight - 64) };
    });
    expect(scrollHeight).toBeLessThanOrEqual(contentBottom + 64); // the page ends with its last card (or the window)
    await shot(ownerPage, "overview");
    // At a phone's width a table scrolls sideways with its first column in view, beside the row's buttons.
    await ownerPage.setViewportSize({ width: 375, height: 740 });
    await ownerPage.getByRole("link", { name: "Products" }).click();
    const row = ownerPage.getByRole("row").filter({ hasText: "Day pass" });
    await row.waitFor();
    const wrap = ownerPage.locator(".table-wrap").filter({ has: row });
    const title = row.locator("td").first();
    const before = (await title.boundingBox())!;
    expect(await wrap.evaluate((el: any) => el.scrollWidth > el.clientWidth)).toBe(true); // wider than the screen
    await wrap.evaluate((el: any) => (el.scrollLeft = el.scrollWidth));
    const [after, archiveBox] = await Promise.all([title.boundingBox(), row.getByRole("button", { name: /^Archive/ }).boundingBox()]);
    expect(after!.x).toBe(before.x); // the title stayed where it was
    expect(archiveBox!.x + archiveBox!.width).toBeLessThanOrEqual(375); // beside the row's buttons, in view
    expect(archiveBox!.x).toBeGreaterThanOrEqual(after!.x + after!.width - 1); // not under the title
    await shot(ownerPage, "products-phone");
    await ownerPage.setViewportSize({ width: 1280, height: 800 });
    await ownerPage.getByRole("link", { name: "Overview" }).click();
    await ownerPage.getByText(/^Tier free/).waitFor();
    await ownerPage.getByRole("button", { name: "Sign out" }).click();
    await ownerPage.getByRole("button", { name: "Connect wallet" }).waitFor();
    const me = await ownerPage.evaluate(() => fetch("/dashboard/api/me").then((r) => r.status));
    expect(me).toBe(401);
  }, 60_000);

  test("a one-time link of walletgate dashboard-link signs a browser without a wallet in, once", async () => {
    const keypair = Keypair.generate();
    const file = join(server.dataDir, "operator.json");
    writeFileSync(file, JSON.stringify(Array.from(keypair.secretKey)), { mode: 0o600 });
    const made = await runCli(["dashboard-link", "--keypair", file], { DATA_DIR: server.dataDir, BASE_URL: server.url });
    expect(made.code).toBe(0);
    const url = made.stdout.trim();
    const context = await browser!.newContext(); // no wallet in this browser
    const page = await context.newPage();
    // The sign-in card says how to sign in without one.
    await page.goto(`${server.url}/dashboard`);
    await page.getByText("walletgate dashboard-link --keypair <file>").waitFor();
    await page.goto(url);
    await page.getByRole("navigation", { name: "Dashboard" }).waitFor();
    await page.getByTitle(keypair.publicKey.toBase58()).waitFor();
    expect(page.url()).not.toContain("link="); // the code left the address bar
    const again = await (await browser!.newContext()).newPage();
    await again.goto(url);
    await again.getByText("This link was already used").waitFor();
    await again.getByRole("button", { name: "Connect wallet" }).waitFor();
    expect(await again.getByRole("navigation", { name: "Dashboard" }).count()).toBe(0);
    // A code mangled on the way (no valid percent-encoding) gets the server's words, not the browser's.
    const mangled = await (await browser!.newContext()).newPage();
    await mangled.goto(`${server.url}/dashboard#link=%E0%A4%A`);
    await mangled.getByText("base58 of 32 bytes").waitFor();
    expect(await mangled.getByText("URI malformed").count()).toBe(0);
    await context.close();
  }, 60_000);

  test("without a browser wallet, a new sign-in link opened in the same tab ends the Signed out card and keeps the form", async () => {
    const keypair = Keypair.generate();
    const file = join(server.dataDir, "link-only-owner.json");
    writeFileSync(file, JSON.stringify(Array.from(keypair.secretKey)), { mode: 0o600 });
    const link = async () => {
      const made = await runCli(["dashboard-link", "--keypair", file], { DATA_DIR: server.dataDir, BASE_URL: server.url });
      expect(made.code).toBe(0);
      return made.stdout.trim();
    };
    const context = await browser!.newContext(); // no wallet in this browser
    const page = await context.newPage();
    await page.goto(await link());
    await page.getByRole("link", { name: "Products" }).click();
    await page.getByRole("button", { name: "New product" }).click();
    await page.getByLabel("Title").fill("Typed by a link-only owner");
    await page.getByLabel("Price").fill("1");
    await page.getByLabel("Feature ids (comma-separated)").fill("one");
    await endSessionOf(context);
    await page.getByRole("button", { name: "Create product" }).click();
    const signedOut = page.getByRole("alert", { name: "Signed out" });
    await signedOut.waitFor();
    expect(await page.getByRole("alert").filter({ hasText: "signed out" }).count()).toBe(1); // said once, by the card
    await page.goto(await link()); // only the hash changes: the page is not loaded again
    await signedOut.waitFor({ state: "detached" });
    expect(await page.getByLabel("Title").inputValue()).toBe("Typed by a link-only owner");
    await page.getByRole("button", { name: "Create product" }).click();
    await page.getByRole("cell", { name: /Typed by a link-only owner/ }).waitFor();
    expect(await page.getByRole("alert").count()).toBe(0); // nothing left saying "signed out"
    // A link that does not work, opened in this signed-in tab: the page, its form and its session stay, and it says why.
    const used = await link();
    const elsewhere = await browser!.newContext();
    const spender = await elsewhere.newPage();
    const spent = spender.waitForResponse((r) => r.url().endsWith("/dashboard/api/session/link"));
    await spender.goto(used); // spent elsewhere
    expect((await spent).status()).toBe(200);
    await elsewhere.close();
    await page.getByRole("button", { name: "New product" }).click();
    await page.getByLabel("Title").fill("Still typing");
    for (const [hash, said] of [[`#link=${used.split("#link=")[1]}`, "This link was already used or has expired"], ["#link=%E0%A4%A", "This sign-in link did not work"]] as const) {
      await page.evaluate((h: string) => ((globalThis as any).location.hash = h), hash);
      await page.getByRole("status").filter({ hasText: said }).waitFor();
      expect([await page.getByLabel("Title").inputValue(), await page.getByRole("navigation", { name: "Dashboard" }).count()]).toEqual(["Still typing", 1]);
      expect(page.url()).toEndWith("/dashboard#/products");
    }
    await context.close();
  }, 60_000);

  test("a session ended elsewhere, or a second session cookie, is said on the sign-in card", async () => {
    const context = await walletContext(browser!, newWallet());
    const page = await context.newPage();
    await page.goto(`${server.url}/dashboard`);
    await page.getByRole("button", { name: "Connect wallet" }).click();
    await page.getByRole("navigation", { name: "Dashboard" }).waitFor();
    // A list that failed to load (the network dropped the request) says so and offers to load it again.
    let failOnce = true;
    await page.route("**/dashboard/api/keys", (route) => (failOnce ? ((failOnce = false), route.abort()) : route.continue()));
    await page.getByRole("link", { name: "API keys" }).click();
    await page.getByText("The server could not be reached").waitFor();
    await page.getByRole("button", { name: "Try again" }).click();
    await page.getByText("No keys yet.").waitFor();
    await page.unroute("**/dashboard/api/keys");
    // A new owner: empty lists say so; a filter the server refuses shows its error, not the rows before it.
    await page.getByRole("link", { name: "Purchases" }).click();
    await page.getByText("No purchases yet.").waitFor();
    await page.getByRole("link", { name: "Tokens" }).click();
    await page.getByText("No tokens yet.").waitFor();
    await page.getByLabel("Wallet").fill("bad");
    await page.getByLabel("Wallet").press("Enter");
    await page.getByRole("alert").waitFor();
    expect(await page.getByText("No tokens yet.").count()).toBe(0);
    expect(await page.getByRole("button", { name: "Try again" }).count()).toBe(0); // a refused filter is refused again: not offered
    await page.getByLabel("Wallet").fill(newWallet().address);
    await page.getByLabel("Wallet").press("Enter");
    await page.getByText("No tokens match these filters.").waitFor();
    await endSessionOf(context);
    await page.getByRole("link", { name: "Purchases" }).click();
    const signedOut = page.getByRole("alert", { name: "Signed out" }); // above the page, which stays
    await signedOut.getByText("Your session was ended. Connect your wallet to sign in again.").waitFor();
    await page.getByRole("heading", { name: "Purchases" }).waitFor();
    await signedOut.getByRole("button", { name: "Connect wallet" }).click(); // and signing in again clears it
    await signedOut.waitFor({ state: "detached" });
    await page.getByText("No purchases yet.").waitFor();
    // A cookie of the same name planted for a deeper path: the server refuses both, and the page says what to do.
    await context.addCookies([{ name: "wg_session", value: "planted", url: `${server.url}/dashboard/api/` }]);
    await page.reload();
    await page.getByText(/clear this site's cookies in the browser, then sign in again/).waitFor();
    await context.close();
  }, 60_000);

  test("a session that ends under a form keeps what was typed; signing in again goes on from there", async () => {
    const seller = newWallet();
    const context = await walletContext(browser!, seller);
    const page = await context.newPage();
    await page.goto(`${server.url}/dashboard`);
    await page.getByRole("button", { name: "Connect wallet" }).click();
    await page.getByRole("link", { name: "Products" }).click();
    await page.getByRole("button", { name: "New product" }).click();
    await page.getByLabel("Title").fill("Typed before the session ended");
    await page.getByLabel("Price").fill("4");
    await page.getByLabel("Feature ids (comma-separated)").fill("kept");
    await page.getByLabel("Description").fill("Every word of it.");
    await endSessionOf(context);
    await page.getByRole("button", { name: "Create product" }).click();
    const signedOut = page.getByRole("alert", { name: "Signed out" });
    await signedOut.waitFor();
    expect([await page.getByLabel("Title").inputValue(), await page.getByLabel("Description").inputValue()]).toEqual(["Typed before the session ended", "Every word of it."]);
    await signedOut.getByRole("button", { name: "Connect wallet" }).click();
    await signedOut.waitFor({ state: "detached" });
    await page.getByRole("button", { name: "Create product" }).click();
    await page.getByRole("cell", { name: /Typed before the session ended/ }).waitFor();
    const { sessionToken } = await signIn(server.url, seller);
    expect(((await call(server.url, "/dashboard/api/products", { token: sessionToken })).body.products as Json[]).map((p) => p.title)).toEqual(["Typed before the session ended"]);
    await context.close();
  }, 60_000);

  test("a tab whose browser was signed in with another wallet elsewhere does nothing for it, and then shows that wallet", async () => {
    const first = newWallet();
    const context = await walletContext(browser!, first);
    const page = await context.newPage();
    await page.goto(`${server.url}/dashboard`);
    await page.getByRole("button", { name: "Connect wallet" }).click();
    await page.getByTitle(first.address).waitFor();
    await page.getByRole("link", { name: "API keys" }).click();
    await page.getByLabel("Label").fill("meant for the first wallet");
    // In another tab of the same browser: a sign-in link of another wallet sets the one session cookie.
    const keypair = Keypair.generate();
    const file = join(server.dataDir, "second-owner.json");
    writeFileSync(file, JSON.stringify(Array.from(keypair.secretKey)), { mode: 0o600 });
    const made = await runCli(["dashboard-link", "--keypair", file], { DATA_DIR: server.dataDir, BASE_URL: server.url });
    expect(made.code).toBe(0);
    const other = await context.newPage();
    await other.goto(made.stdout.trim());
    await other.getByTitle(keypair.publicKey.toBase58()).waitFor();
    // Back in the first tab: the key is not made for the second wallet under the first one's address, not
    // even by a second click while the page is still learning who is signed in (a slow answer).
    let answerMe!: () => void;
    const meHeld = new Promise<void>((resolve) => (answerMe = resolve));
    await page.route("**/dashboard/api/me", async (route) => {
      await meHeld; // until both clicks have been refused
      await route.continue();
    });
    const refused = () => page.waitForResponse((r) => r.url().endsWith("/dashboard/api/keys") && r.request().method() === "POST" && r.status() === 401);
    let answer = refused();
    await page.getByRole("button", { name: "Create key" }).click();
    await answer;
    answer = refused();
    await page.getByRole("button", { name: "Create key" }).click(); // while the page still shows the first wallet
    await answer;
    answerMe();
    await page.getByRole("status").filter({ hasText: `This tab now shows wallet ${keypair.publicKey.toBase58()}` }).waitFor();
    await page.getByTitle(keypair.publicKey.toBase58()).waitFor();
    expect(await page.getByTitle(first.address).count()).toBe(0);
    const keysOf = async (token: string) => ((await call(server.url, "/dashboard/api/keys", { token })).body.keys as Json[]).map((k) => k.label);
    expect(await keysOf((await signIn(server.url, first)).sessionToken as string)).toEqual([]);
    await page.getByText("No keys yet.").waitFor(); // the second wallet's keys: none made for it either
    await context.close();
  }, 60_000);

  test("with two wallets in the browser, the owner and the buyer choose which one signs", async () => {
    const { context, page, inSolflare } = await twoWalletsSignedInWithSolflare(browser!);
    // The checkout page offers the same choice: first the wallet already holding a link's ?wallet=.
    await page.goto(state.paymentUrl!);
    await page.getByLabel("Wallet").waitFor();
    expect([await page.getByLabel("Wallet").locator("option").allTextContents(), await page.getByLabel("Wallet").inputValue()]).toEqual([["Phantom", "Solflare"], "Phantom"]);
    await page.goto(`${state.paymentUrl!}?wallet=${inSolflare.address}`);
    await page.getByLabel("Wallet").waitFor();
    expect(await page.getByLabel("Wallet").inputValue()).toBe("Solflare");
    await context.close();
    // One wallet: no choice is shown.
    const single = await browser!.newContext();
    await addStandardWallet(single, "Backpack", newWallet());
    const alone = await single.newPage();
    await alone.goto(`${server.url}/dashboard`);
    await alone.getByRole("button", { name: "Connect wallet" }).waitFor();
    expect(await alone.getByLabel("Wallet").count()).toBe(0);
    await single.close();
  }, 60_000);

  test("after a session ends, the Signed out card offers the wallet that was signed in, and the page goes on", async () => {
    const { context, page, inSolflare } = await twoWalletsSignedInWithSolflare(browser!);
    await page.getByRole("link", { name: "API keys" }).click();
    await page.getByLabel("Label").fill("typed before");
    await endSessionOf(context);
    await page.getByRole("button", { name: "Create key" }).click();
    const signedOut = page.getByRole("alert", { name: "Signed out" });
    expect(await signedOut.getByLabel("Wallet").inputValue()).toBe("Solflare");
    await signedOut.getByRole("button", { name: "Connect wallet" }).click();
    await signedOut.waitFor({ state: "detached" });
    await page.getByTitle(inSolflare.address).waitFor();
    expect(await page.getByLabel("Label").inputValue()).toBe("typed before");
    expect(await page.getByRole("status").filter({ hasText: "now shows" }).count()).toBe(0); // the same wallet: nothing to say
    await context.close();
  }, 60_000);

  test("a browser without a wallet is told so on the checkout page, with a link that opens the page in Phantom's app", async () => {
    const context = await browser!.newContext(); // no wallet in this browser
    const page = await context.newPage();
    await page.goto(state.paymentUrl!);
    await page.getByRole("button", { name: "Pay with wallet" }).click();
    await page.getByText("No Solana wallet was found in this browser.").waitFor();
    const link = page.getByRole("link", { name: "open this page in the Phantom app" });
    expect(await link.getAttribute("href")).toBe(`https://phantom.app/ul/browse/${encodeURIComponent(state.paymentUrl!)}?ref=${encodeURIComponent(new URL(state.paymentUrl!).origin)}`);
    await context.close();
  }, 60_000);

  test("at phone width the checkout page fits the screen", async () => {
    const context = await walletContext(browser!, newWallet());
    const page = await context.newPage();
    await page.setViewportSize({ width: 375, height: 740 });
    // Also a product whose title and description are one unbroken word each (the schema allows 200 and 2,000 characters).
    const { sessionToken } = await signIn(server.url, owner);
    const long = await call(server.url, "/dashboard/api/products", {
      token: sessionToken,
      body: { title: "T".repeat(200), description: "d".repeat(600), type: "access", price: "1" },
    });
    for (const url of [state.paymentUrl!, long.body.paymentUrl as string]) {
      await page.goto(url);
      await page.getByRole("button", { name: "Pay with wallet" }).waitFor();
      expect([url, await page.evaluate(() => (globalThis as any).document.documentElement.scrollWidth as number)]).toEqual([url, expect.any(Number)]);
      expect(await page.evaluate(() => (globalThis as any).document.documentElement.scrollWidth as number)).toBeLessThanOrEqual(375);
    }
    // A description keeps the lines its owner wrote.
    const description = "Line one.\nLine two: what you get.\n\n- bullet A\n- bullet B";
    const lined = await call(server.url, "/dashboard/api/products", { token: sessionToken, body: { title: "Lined", description, type: "access", price: "1" } });
    await page.goto(lined.body.paymentUrl as string);
    await page.getByRole("button", { name: "Pay with wallet" }).waitFor();
    expect(await page.getByText("Line one.").innerText()).toBe(description);
    await context.close();
  }, 60_000);
});

e2e("dashboard forms under a second hand and a double click", () => {
  const seller = newWallet();
  let page: Page;
  let token: string;
  const api = (path: string, init: { method?: string; body?: unknown } = {}) => call(server.url, `/dashboard/api${path}`, { ...init, token });

  beforeAll(async () => {
    page = await (await walletContext(browser!, seller)).newPage();
    await page.goto(`${server.url}/dashboard`);
    await page.getByRole("button", { name: "Connect wallet" }).click();
    await page.getByRole("navigation", { name: "Dashboard" }).waitFor();
    token = (await signIn(server.url, seller)).sessionToken;
  });

  test("an edit form opened before payTo was moved elsewhere saves only what it changed: payTo stays moved", async () => {
    const first = newWallet().address;
    const moved = newWallet().address;
    const created = await api("/products", { body: { title: "Moved", description: "old words", type: "access", price: "3", payTo: first } });
    await page.getByRole("link", { name: "Products" }).click();
    await page.getByRole("cell", { name: /Moved/ }).waitFor();
    await page.getByRole("button", { name: "Edit" }).click();
    // Meanwhile, from another tab or a script: payTo moved off a compromised wallet, and a new price.
    expect((await api(`/products/${created.body.productId}`, { method: "PATCH", body: { payTo: moved, price: "4" } })).status).toBe(200);
    await page.getByLabel("Description").fill("new words");
    await page.getByRole("button", { name: "Save" }).click();
    await page.getByRole("button", { name: "New product" }).waitFor();
    expect((await api(`/products/${created.body.productId}`)).body).toMatchObject({ payTo: moved, price: "4", description: "new words" });
    // A save that changed nothing sends nothing.
    await page.getByRole("button", { name: "Edit" }).click();
    await page.getByRole("button", { name: "Save" }).click();
    await page.getByRole("button", { name: "New product" }).waitFor();
    expect((await api(`/products/${created.body.productId}`)).body).toMatchObject({ payTo: moved, price: "4" });
  }, 60_000);

  test("a double click on Create key, Create product or Add endpoint makes one; a refusal says the field's own reason", async () => {
    await page.getByRole("link", { name: "API keys" }).click();
    await page.getByLabel("Label").fill("twice");
    await page.getByRole("button", { name: "Create key" }).dblclick();
    await page.getByTestId("new-key-value").waitFor();
    await page.getByRole("cell", { name: "twice" }).waitFor();
    expect((await api("/keys")).body.keys.filter((k: Json) => k.label === "twice")).toHaveLength(1);

    await page.getByRole("link", { name: "Products" }).click();
    await page.getByRole("button", { name: "New product" }).click();
    await page.getByLabel("Title").fill("Once");
    await page.getByLabel("Price").fill("1");
    await page.getByLabel("Type").selectOption("access");
    await page.getByLabel("Access days (empty: forever)").fill("0");
    await page.getByRole("button", { name: "Create product" }).click();
    await page.getByText("Access days must be a whole number of days from 1 to 36,500, or empty for access that never ends.").waitFor(); // in the form's words
    // The field at fault is marked, described by the reason, and has the keyboard.
    const days = page.getByLabel("Access days (empty: forever)");
    expect(await days.evaluate((el) => [el.getAttribute("aria-invalid"), (globalThis as any).document.getElementById(el.getAttribute("aria-describedby")!)?.textContent, el === (globalThis as any).document.activeElement])).toEqual([
      "true",
      expect.stringContaining("1 to 36,500"),
      true,
    ]);
    // An item of a list refused (a redirect origin too long): the list's field is the one marked, and a value
    // quoted back is shown as typed, not relabelled.
    const marked = (label: string) =>
      page.getByLabel(label).evaluate((el) => [el.getAttribute("aria-invalid"), el === (globalThis as any).document.activeElement]);
    await page.getByLabel("Access days (empty: forever)").fill("30");
    await page.getByLabel(/^Sites the checkout may return to/).fill(`https://${"a".repeat(250)}.example/payTo`);
    await page.getByRole("button", { name: "Create product" }).click();
    await page.locator("#p-error").waitFor();
    expect(await marked("Sites the checkout may return to (origins, comma-separated)")).toEqual(["true", true]);
    expect(await marked("Access days (empty: forever)")).toEqual([null, false]);
    await page.getByLabel(/^Sites the checkout may return to/).fill("https://shop.example/payTo");
    await page.getByRole("button", { name: "Create product" }).click();
    await page.getByText('"https://shop.example/payTo"').waitFor();
    // A submit the browser's own check stops (the title emptied) is an attempt of its own: the last refusal
    // and its marks go, and the browser says what is missing.
    await page.getByLabel("Title").fill("");
    await page.getByLabel("Title").press("Enter");
    await page.locator("#p-error").waitFor({ state: "detached" });
    expect(await marked("Sites the checkout may return to (origins, comma-separated)")).toEqual([null, false]);
    expect(await page.getByLabel("Title").evaluate((el: any) => el.validity.valueMissing)).toBe(true);
    await page.getByLabel("Title").fill("Once");
    await page.getByLabel(/^Sites the checkout may return to/).fill("");
    await page.getByRole("button", { name: "Create product" }).dblclick();
    await page.getByRole("cell", { name: /Once/ }).waitFor();
    expect((await api("/products")).body.products.filter((p: Json) => p.title === "Once")).toHaveLength(1);
    // The repeated Copy link names its product for screen readers, as Edit and Archive do.
    const copy = page.getByRole("row", { name: /Once/ }).getByRole("button", { name: "Copy link" });
    expect(await page.locator(`#${await copy.getAttribute("aria-describedby")}`).textContent()).toContain("Once");

    await page.getByRole("link", { name: "Webhooks" }).click();
    await page.getByLabel("Endpoint URL").fill(hook.url);
    // No event ticked: the boxes are marked and the keyboard goes to the first.
    const boxes = page.locator("form[aria-label='Add a webhook endpoint'] input[type=checkbox]");
    for (const box of await boxes.all()) if (await box.isChecked()) await box.uncheck();
    await page.getByRole("button", { name: "Add endpoint" }).click();
    await page.locator("#w-error").waitFor();
    expect(await boxes.first().evaluate((el) => [el.getAttribute("aria-invalid"), el === (globalThis as any).document.activeElement])).toEqual(["true", true]);
    await boxes.first().check();
    await page.getByRole("button", { name: "Add endpoint" }).dblclick();
    await page.getByTestId("endpoint").first().waitFor();
    expect((await api("/webhooks")).body.endpoints).toHaveLength(1);
    const rotate = page.getByTestId("endpoint").getByRole("button", { name: "Rotate secret" });
    expect(await page.locator(`#${await rotate.getAttribute("aria-describedby")}`).textContent()).toContain(hook.url);
    // The card is headed by its endpoint (for screen readers), which its URL field and events name too.
    await page.getByTestId("endpoint").getByRole("heading", { name: `Endpoint ${hook.url}` }).waitFor();
    const card = page.getByTestId("endpoint");
    expect(await card.getByLabel("URL", { exact: true }).getAttribute("aria-describedby")).toBe(await rotate.getAttribute("aria-describedby"));
  }, 60_000);

  test("a confirmed action runs once: while Yes is at work, Cancel and Escape leave the question as it is", async () => {
    const endpointId = (await api("/webhooks")).body.endpoints[0].endpointId as string;
    const before = (await api(`/webhooks/${endpointId}/secret`)).body.secret as string;
    let rotations = 0;
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    let arrived!: () => void;
    const asked = new Promise<void>((resolve) => (arrived = resolve));
    await page.route("**/rotate-secret", async (route) => {
      rotations++;
      arrived();
      await held;
      await route.continue();
    });
    const card = page.getByTestId("endpoint");
    await card.getByRole("button", { name: "Rotate secret" }).click();
    await page.keyboard.press("Enter"); // Yes
    await page.waitForFunction(() => (globalThis as any).document.activeElement?.getAttribute("aria-disabled") === "true");
    const cancel = card.getByRole("button", { name: "Cancel" });
    expect(await cancel.getAttribute("aria-disabled")).toBe("true");
    await cancel.click({ force: true }); // clicked all the same (Playwright would wait for an aria-disabled button)
    await page.keyboard.press("Escape");
    expect(await card.getByRole("button", { name: "Yes" }).count()).toBe(1); // still asking, still at work
    await asked; // the one request has reached the browser's network
    expect(rotations).toBe(1);
    release();
    await card.getByRole("button", { name: "Rotate secret" }).waitFor();
    await page.unroute("**/rotate-secret");
    expect(rotations).toBe(1);
    const after = (await api(`/webhooks/${endpointId}/secret`)).body.secret as string;
    expect(after).not.toBe(before);
    expect(await card.locator(".secret code").textContent()).toBe(after); // the secret shown is the one in use
  }, 60_000);

  test("the overview shows the API use as it is when it is opened", async () => {
    const key = (await api("/keys", { body: { label: "use" } })).body.key as string;
    for (let i = 0; i < 3; i++) expect((await fetch(`${server.url}/public/products`, { headers: { "x-api-key": key } })).status).toBe(200);
    await page.getByRole("link", { name: "Overview" }).click();
    await page.getByText(/^Tier free · 3 \/ 60 requests this minute, 3 \/ 10000 today/).waitFor();
  }, 60_000);
});
