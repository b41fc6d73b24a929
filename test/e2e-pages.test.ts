// The rest of the pages in real headless Chromium: a Wallet Standard wallet and the keyboard alone for
// sign-in; editing and archiving a product; an access pass bought ("Access granted", then back to the
// redirect with ?txHash); a buyer without the money told so in words; a checkout expired before it was
// paid, said in words, and a fresh one bought with Try again; a page that follows another
// checkout's landing payment; a changed price never signed unseen; tokens filtered and revoked;
// purchases listed; a webhook secret revealed and rotated, a test event sent and resent; phone width.
import { afterAll, afterEach, beforeAll, describe, expect, test } from "bun:test";
import { sign } from "node:crypto";
import type { Browser, Page, Request } from "playwright-core";
import { launchChromium, walletContext } from "./helpers/browser.ts";
import { openServerDatabase, runCli, startTestServer, type TestServer } from "./helpers/server.ts";
import { call, newWallet, signIn, type Json, type TestWallet } from "./helpers/wallet.ts";
import { newBuyer, signCheckout } from "./helpers/checkout.ts";

const browser: Browser | null = await launchChromium();
const e2e = browser === null ? describe.skip : describe;

let server: TestServer;
const hook = Bun.serve({ port: 0, hostname: "127.0.0.1", fetch: () => new Response("ok") });
beforeAll(async () => {
  server = await startTestServer({ ALLOW_PRIVATE_NETWORK_TARGETS: "true", AUTH_RATE_LIMIT: "off" });
});
// Each test's pages and their contexts end with it (no test here uses another's): a browser left with every
// test's pages open keeps their timers and polls running for the rest of the file.
afterEach(async () => {
  for (const context of browser?.contexts() ?? []) await context.close();
});
afterAll(async () => {
  await browser?.close();
  await hook.stop(true);
  await server?.dispose();
});

/** A page whose browser has the test wallet injected, signed in to the dashboard. */
async function ownerPage(wallet: TestWallet): Promise<Page> {
  const page = await (await walletContext(browser!, wallet)).newPage();
  await page.goto(`${server.url}/dashboard`);
  await page.getByRole("button", { name: "Connect wallet" }).click();
  await page.getByRole("navigation", { name: "Dashboard" }).waitFor();
  return page;
}

/** Creates a product through the API (the first e2e suite creates one through the page). */
async function product(token: string, body: Json): Promise<Json> {
  const res = await call(server.url, "/dashboard/api/products", { token, body: { description: "", price: "1", ...body } });
  expect(res.status).toBe(201);
  return res.body;
}

/** A buyer buys `productId` through the checkout page; returns the page when done. */
/**
 * `clock`: the page's timers are Playwright's, which a test can move forward (time flows as usual meanwhile);
 * `paused`: the page's time stands still from the click on (its effects, which run after paint, wait for the test).
 */
async function buy(buyer: TestWallet, url: string, options: { clock?: boolean; paused?: boolean } = {}): Promise<Page> {
  const page = await (await walletContext(browser!, buyer)).newPage();
  if (options.clock === true || options.paused === true) await page.clock.install();
  await page.goto(url);
  const button = page.getByRole("button", { name: "Pay with wallet" });
  if (options.paused === true) {
    await button.waitFor();
    await page.clock.pauseAt(Date.now() + 10_000); // a time still ahead when the browser hears it, however slow the machine
  }
  await button.click();
  return page;
}

async function fund(wallet: TestWallet, usdc: string) {
  const r = await runCli(["ledger", "airdrop", "--to", wallet.address, "--sol", "1", ...(usdc === "0" ? [] : ["--usdc", usdc])], { DATA_DIR: server.dataDir });
  expect(r.code).toBe(0);
}

/**
 * Whether the page starts to leave (its main frame asks for another document; seen when it asks, not when
 * the answer comes) while its clock moves `ms` on: a jump that fires what is armed before its after-paint
 * effects have run (and may cancel it), then a second in which they run, then the jump again for what they arm.
 */
async function leavesWithin(page: Page, ms: number): Promise<boolean> {
  const navigation = (r: Request) => r.isNavigationRequest() && r.frame() === page.mainFrame();
  let left = false;
  const seen = (r: Request) => {
    if (navigation(r)) left = true;
  };
  page.on("request", seen); // however long the steps take
  try {
    await page.clock.fastForward(ms);
    await page.clock.runFor(1000);
    await page.clock.fastForward(ms);
    await page.clock.runFor(1000);
    // A request the last step started may reach the test just after that step's answer.
    if (!left) left = await page.waitForRequest(navigation, { timeout: 1_000 }).then(() => true, () => false);
  } finally {
    page.off("request", seen);
  }
  return left;
}

/**
 * An owner's access pass bought through its checkout page with `redirect`, on a page whose timers the test
 * moves (Playwright's clock), once the page says "Access granted.".
 */
async function boughtPass(title: string, redirect: string, options: { paused?: boolean } = {}): Promise<{ token: string; paymentUrl: string; buyer: TestWallet; page: Page }> {
  const token = (await signIn(server.url, newWallet())).sessionToken as string;
  const { paymentUrl } = await product(token, { title, type: "access", price: "0.5", accessDays: 1 });
  const buyer = newWallet();
  await fund(buyer, "5");
  const page = await buy(buyer, `${paymentUrl}?redirect=${encodeURIComponent(redirect)}`, { clock: true, ...options });
  await page.getByText("Access granted.").waitFor({ timeout: 20_000 });
  return { token, paymentUrl, buyer, page };
}

e2e("more of the pages in Chromium", () => {
  test("the pages ask for nothing that fails: no favicon 404, nothing but the signed-out session check refused", async () => {
    const owner = newWallet();
    const productId = (await product((await signIn(server.url, owner)).sessionToken as string, { title: "Quiet", type: "access", accessDays: 1 })).productId;
    for (const path of ["/dashboard", `/pay/${productId}`]) {
      const page = await (await walletContext(browser!, newWallet())).newPage();
      const failed: string[] = [];
      page.on("response", (r) => {
        if (r.status() >= 400) failed.push(`${r.status()} ${new URL(r.url()).pathname}`);
      });
      await page.goto(server.url + path, { waitUntil: "networkidle" });
      // A browser asks for /favicon.ico unless the page names an icon (Playwright does not show that request).
      expect(await page.locator('link[rel="icon"]').count()).toBe(1);
      // The dashboard asks whether it is signed in: 401 before sign-in is its answer, not a failure.
      expect({ path, failed: failed.filter((f) => f !== "401 /dashboard/api/me") }).toEqual({ path, failed: [] });
      await page.context().close();
    }
  });

  test("a Wallet Standard wallet signs in, driven by the keyboard alone", async () => {
    const wallet = newWallet();
    const context = await browser!.newContext();
    await context.exposeBinding("__wsSign", (_s, b64: string) => sign(null, Buffer.from(b64, "base64"), wallet.privateKey).toString("base64"));
    await context.addInitScript((address: string) => {
      const page = globalThis as any;
      const wallet = {
        version: "1.0.0", name: "Test Standard Wallet", icon: "data:image/svg+xml,<svg/>", chains: ["solana:localnet"],
        accounts: [] as unknown[],
        features: {
          "standard:connect": { version: "1.0.0", connect: async () => ({ accounts: [{ address, publicKey: new Uint8Array(32) }] }) },
          "solana:signMessage": {
            version: "1.0.0",
            signMessage: async ({ message }: { message: Uint8Array }) => {
              const signature = await page.__wsSign(btoa(String.fromCharCode(...message)));
              return [{ signedMessage: message, signature: Uint8Array.from(atob(signature), (c: string) => c.charCodeAt(0)) }];
            },
          },
        },
      };
      page.addEventListener("wallet-standard:app-ready", (e: any) => e.detail.register(wallet));
    }, wallet.address);
    const page = await context.newPage();
    await page.goto(`${server.url}/dashboard`);
    await page.getByRole("button", { name: "Connect wallet" }).waitFor();
    await page.keyboard.press("Tab");
    expect(await page.evaluate(() => (globalThis as any).document.activeElement?.textContent)).toBe("Connect wallet");
    await page.keyboard.press("Enter");
    await page.getByTitle(wallet.address).waitFor();
    await context.close();
  }, 60_000);

  test("edits and archives a product; the checkout page then says it is no longer sold", async () => {
    const owner = newWallet();
    const page = await ownerPage(owner);
    const token = (await signIn(server.url, owner)).sessionToken;
    const p = await product(token, { title: "Old title", type: "feature_unlock", featureIds: ["a"] });
    await page.getByRole("link", { name: "Products" }).click();
    await page.getByRole("button", { name: "Edit" }).click();
    await page.getByLabel("Title").fill("New title");
    await page.getByLabel("Price").fill("4.25");
    await page.getByRole("button", { name: "Save" }).click();
    await page.getByRole("cell", { name: /New title/ }).waitFor();
    await page.getByText("4.25 USDC").waitFor();
    // A buyer has the checkout page open when the product is archived: Pay then says why, in place of Pay.
    const open = await (await walletContext(browser!, newWallet())).newPage();
    await open.goto(p.paymentUrl);
    await open.getByRole("button", { name: "Pay with wallet" }).waitFor();
    await page.getByRole("button", { name: "Archive" }).click();
    await page.getByRole("button", { name: "Yes" }).click();
    await page.getByText("archived", { exact: true }).waitFor();
    await open.getByRole("button", { name: "Pay with wallet" }).click();
    await open.getByText("This product is no longer sold.").waitFor();
    expect(await open.getByRole("button", { name: /Pay with wallet|Try again/ }).count()).toBe(0);
    const buyerPage = await (await walletContext(browser!, newWallet())).newPage();
    await buyerPage.goto(p.paymentUrl);
    await buyerPage.getByText("This product is no longer sold.").waitFor();
    expect(await buyerPage.getByRole("button", { name: "Pay with wallet" }).count()).toBe(0);
  }, 60_000);

  test("a product form error is shown in words, and nothing is created", async () => {
    const owner = newWallet();
    const page = await ownerPage(owner);
    await page.getByRole("link", { name: "Products" }).click();
    await page.getByRole("button", { name: "New product" }).click();
    await page.getByLabel("Title").fill("No features");
    await page.getByLabel("Price").fill("1");
    await page.getByRole("button", { name: "Create product" }).click();
    await page.getByRole("alert").waitFor();
    expect(await page.getByRole("alert").textContent()).toMatch(/feature/i);
    const token = (await signIn(server.url, owner)).sessionToken;
    expect((await call(server.url, "/dashboard/api/products", { token })).body.products).toEqual([]);
  }, 60_000);

  test("a section opened takes the keyboard to its heading as it shows, never later, from a form opened meanwhile", async () => {
    const page = await ownerPage(newWallet());
    await page.clock.install();
    await page.clock.pauseAt(Date.now() + 10_000); // after-paint work waits: only what runs with the render is done
    await page.getByRole("link", { name: "Products" }).click();
    await page.getByRole("heading", { level: 1, name: "Products" }).waitFor();
    const focused = () => page.evaluate(() => { const a = (globalThis as any).document.activeElement; return (a?.id || a?.textContent) as string; });
    expect(await focused()).toBe("Products");
    await page.getByRole("button", { name: "New product" }).click();
    await page.clock.runFor(1000); // the page's after-paint work runs now
    expect(await focused()).toBe("p-title");
  }, 60_000);

  test("the keyboard stays where it was, and what appears is said: sign-in and out, the pager, an endpoint's card", async () => {
    const owner = newWallet();
    const page = await (await walletContext(browser!, owner)).newPage();
    const focused = () => page.evaluate(() => { const a = (globalThis as any).document.activeElement; return `${a?.tagName} ${a?.textContent}`; });
    await page.goto(`${server.url}/dashboard`);
    await page.getByRole("button", { name: "Connect wallet" }).waitFor();
    expect(await page.title()).toBe("Sign in · walletgate dashboard");
    await page.getByRole("button", { name: "Connect wallet" }).press("Enter");
    await page.getByRole("navigation", { name: "Dashboard" }).waitFor();
    expect([await page.title(), await focused()]).toEqual(["Overview · walletgate dashboard", "H1 Overview"]);
    // Shortened values are whole for screen readers.
    expect(await page.getByRole("banner").ariaSnapshot()).toContain(owner.address);

    const token = (await signIn(server.url, owner)).sessionToken;
    const endpoint = await call(server.url, "/dashboard/api/webhooks", { token, body: { url: `http://127.0.0.1:${hook.port}/hook`, events: ["payment.completed"] } });
    for (let i = 0; i < 21; i++) expect((await call(server.url, `/dashboard/api/webhooks/${endpoint.body.endpointId}/test`, { method: "POST", token })).status).toBe(200);
    await page.getByRole("link", { name: "Webhooks" }).click();
    const card = page.getByTestId("endpoint");
    const pager = card.getByRole("status").filter({ hasText: " of 21" });
    await pager.filter({ hasText: "1–20 of 21" }).waitFor();
    // Next to the last page keeps the keyboard on Next, now marked unavailable; the new range is said.
    await card.getByRole("button", { name: "Next" }).press("Enter");
    await pager.filter({ hasText: "21–21 of 21" }).waitFor();
    expect(await focused()).toBe("BUTTON Next");
    expect(await card.getByRole("button", { name: "Next" }).getAttribute("aria-disabled")).toBe("true");
    await page.keyboard.press("Enter"); // does nothing
    expect(await pager.textContent()).toBe("21–21 of 21");

    // Disable keeps the card and the keyboard on its button, which now says Enable.
    await card.getByRole("button", { name: "Disable" }).press("Enter");
    await card.getByText("disabled", { exact: true }).waitFor();
    expect(await focused()).toBe("BUTTON Enable");
    await page.keyboard.press("Enter");
    await card.getByText("enabled", { exact: true }).waitFor();
    expect(await focused()).toBe("BUTTON Disable");
    // A secret shown and a test event sent are said (a status region there from the start); Hide goes back to Reveal.
    await card.getByRole("button", { name: "Reveal secret" }).press("Enter");
    await card.getByRole("status").filter({ hasText: /Signing secret:whsec_/ }).waitFor();
    await card.getByRole("button", { name: "Hide" }).press("Enter");
    expect(await focused()).toBe("BUTTON Reveal secret");
    await card.getByRole("button", { name: "Send test event" }).press("Enter");
    await card.getByRole("status").filter({ hasText: "Test event sent" }).waitFor();
    expect(await page.getByLabel("URL", { exact: true }).inputValue()).toBe(`http://127.0.0.1:${hook.port}/hook`); // a visible label

    // The product filter's label is its select's (a click on it goes there).
    await page.getByRole("link", { name: "Purchases" }).click();
    await page.locator("label", { hasText: "Product" }).click();
    expect(await page.evaluate(() => (globalThis as any).document.activeElement?.id)).toBe("pu-product");

    // Sign out: the sign-in view, its title, and the keyboard on its heading.
    await page.getByRole("button", { name: "Sign out" }).press("Enter");
    await page.getByRole("button", { name: "Connect wallet" }).waitFor();
    expect([await page.title(), await focused()]).toEqual(["Sign in · walletgate dashboard", "H1 walletgate dashboard"]);
  }, 90_000);

  test("an access pass: 'Access granted', then back to the redirect with ?txHash", async () => {
    const { token, buyer, page } = await boughtPass("Day pass", `${server.url}/healthz?from=checkout`, { paused: true });
    // Time to read it, said and shown, with a way to stay (WCAG 2.2.1); then the page goes back by itself.
    const host = new URL(server.url).host;
    expect(await page.getByTestId("returning").textContent()).toBe(`Returning to ${host} in 20 s. Stay on this page`);
    expect(await page.getByTestId("pay-status").textContent()).toBe(`Payment complete; access granted; returning to ${host} in 20 seconds, unless you choose to stay on this page`);
    // Its effects run (after paint) and arm the return, and the count goes on: a second later it is 19 s.
    await page.clock.runFor(1500);
    await page.getByTestId("returning").filter({ hasText: "in 19 s" }).waitFor();
    await page.clock.fastForward(20_000);
    await page.waitForURL(/\/healthz\?from=checkout&txHash=\w{43,88}$/, { timeout: 10_000 });
    const txHash = new URL(page.url()).searchParams.get("txHash")!;
    const purchases = await call(server.url, "/dashboard/api/purchases", { token });
    expect(purchases.body.purchases.map((x: Json) => [x.walletAddress, x.txHash])).toEqual([[buyer.address, txHash]]);
  }, 60_000);

  test("a redirect to another origin is not followed", async () => {
    const { paymentUrl, page } = await boughtPass("Pass", "https://evil.example/steal");
    expect(await leavesWithin(page, 60_000)).toBe(false); // longer than the page waits before going back
    expect(page.url()).toStartWith(paymentUrl);
    expect(await page.getByRole("link", { name: /Return to/ }).count()).toBe(0);
    expect(await page.getByTestId("returning").count()).toBe(0);
  }, 60_000);

  test("an access pass's buyer may stay: the page then waits, and its link still goes back", async () => {
    // Stay pressed before the page's effects have run (its time stands still): the return they arm is not armed.
    const { paymentUrl, page } = await boughtPass("Week pass", `${server.url}/healthz?from=stay`, { paused: true });
    await page.getByRole("button", { name: "Stay on this page" }).press("Enter");
    // The keyboard stays on the outcome (the button is gone), and the choice is said.
    const focused = await page.evaluate(() => {
      const at = (globalThis as any).document.activeElement;
      return at?.getAttribute("tabindex") === "-1" ? (at.textContent as string) : null; // the outcome, not the page's body
    });
    expect(focused).toContain("Access granted.");
    expect(await page.getByTestId("pay-status").textContent()).toBe("Payment complete; access granted; you will stay on this page");
    expect(await leavesWithin(page, 60_000)).toBe(false);
    expect(page.url()).toStartWith(paymentUrl);
    expect(await page.getByTestId("returning").count()).toBe(0);
    await page.getByRole("link", { name: /Return to/ }).click();
    await page.waitForURL(/\/healthz\?from=stay&txHash=\w{43,88}$/, { timeout: 10_000 });
  }, 60_000);

  test("a buyer without the money, or without SOL for the fee, is told which in words, and can try again after funding", async () => {
    const owner = newWallet();
    const token = (await signIn(server.url, owner)).sessionToken;
    const p = await product(token, { title: "Costly", type: "feature_unlock", featureIds: ["x"], price: "3" });
    const buyer = newWallet();
    await fund(buyer, "1");
    const page = await buy(buyer, p.paymentUrl);
    await page.getByText("Your wallet holds 1 USDC; this purchase needs 3 USDC. Nothing was paid.").waitFor({ timeout: 20_000 });
    await fund(buyer, "5");
    await page.getByRole("button", { name: "Try again" }).click();
    await page.getByTestId("access-token").waitFor({ timeout: 20_000 });

    // USDC enough, but no SOL for the network fee: that is what the buyer is told, not that it lacks money.
    const usdcOnly = newWallet();
    expect((await runCli(["ledger", "airdrop", "--to", usdcOnly.address, "--usdc", "100"], { DATA_DIR: server.dataDir })).code).toBe(0);
    const again = await buy(usdcOnly, p.paymentUrl);
    await again.getByText("Your wallet has too little SOL to pay the network fee").waitFor({ timeout: 20_000 });
    expect(await again.getByText("does not hold enough").count()).toBe(0);
    await fund(usdcOnly, "0");
    await again.getByRole("button", { name: "Try again" }).click();
    await again.getByTestId("access-token").waitFor({ timeout: 20_000 });
  }, 60_000);

  test("a checkout that expired before the buyer paid is said in words; Try again opens a fresh one that completes", async () => {
    const owner = newWallet();
    const token = (await signIn(server.url, owner)).sessionToken;
    const p = await product(token, { title: "Slow buyer", type: "access", price: "1", accessDays: 1 });
    const paid = async () => ((await call(server.url, "/dashboard/api/purchases", { token })).body.purchases as Json[]).map((x) => x.walletAddress);
    const buyer = newWallet();
    await fund(buyer, "5");
    const context = await walletContext(browser!, buyer);
    const page = await context.newPage();
    const asked: { path: string; body: Json }[] = [];
    page.on("request", (r) => {
      if (r.method() === "POST" && r.url().startsWith(`${server.url}/pay/`)) asked.push({ path: new URL(r.url()).pathname.split("/").pop()!, body: r.postDataJSON() });
    });
    // A checkout opened, its signature rejected: the page keeps that checkout for the tab.
    await page.goto(p.paymentUrl);
    const opened = page.waitForResponse((r) => r.url().endsWith("/checkout"));
    context.setReject(true);
    await page.getByRole("button", { name: "Pay with wallet" }).click();
    const expiredId = (await (await opened).json()).checkoutId as string;
    await page.getByText("You rejected the signature in your wallet").waitFor({ timeout: 20_000 });
    context.setReject(false);
    // Fifteen minutes pass for this checkout alone: its expiry is moved into the past in the server's database.
    const db = openServerDatabase(server.dataDir);
    try {
      expect(db.run("UPDATE checkouts SET expires_at = ? WHERE id = ?", [Date.now() - 1000, expiredId]).changes).toBe(1);
    } finally {
      db.close();
    }
    // The buyer comes back to the tab (a reload keeps the tab's checkout) and pays: that checkout is closed.
    await page.reload();
    asked.length = 0;
    await page.getByRole("button", { name: "Pay with wallet" }).click();
    await page.getByText("This checkout can no longer be paid (it expired, the product was archived, or too many attempts failed). Start again.").waitFor({ timeout: 20_000 });
    expect(asked).toEqual([{ path: "confirm", body: { checkoutId: expiredId } }]); // nothing opened or signed
    expect(await page.getByText("This product is no longer sold.").count()).toBe(0);
    expect(await paid()).toEqual([]);
    // Try again opens a fresh checkout (no id of the closed one), which the buyer signs and completes.
    const fresh = page.waitForResponse((r) => r.url().endsWith("/checkout"));
    await page.getByRole("button", { name: "Try again" }).click();
    const reopened = await fresh;
    expect(reopened.request().postDataJSON()).toEqual({ walletAddress: buyer.address });
    expect((await reopened.json()).checkoutId).not.toBe(expiredId);
    await page.getByText("Access granted.").waitFor({ timeout: 20_000 });
    expect(await paid()).toEqual([buyer.address]);
    await context.close();
  }, 60_000);

  test("an answer lost on the way back: the retry finds the payment made, and nothing is paid twice", async () => {
    const owner = newWallet();
    const token = (await signIn(server.url, owner)).sessionToken;
    const p = await product(token, { title: "Once", type: "feature_unlock", featureIds: ["o"], price: "2" });
    const buyer = newWallet();
    await fund(buyer, "10");
    const page = await (await walletContext(browser!, buyer)).newPage();
    let lost = false;
    await page.route("**/submit", async (route) => {
      if (lost) return route.continue();
      lost = true;
      await route.fetch(); // the server takes the payment...
      await route.abort("connectionreset"); // ...and the answer never reaches the page
    });
    await page.goto(p.paymentUrl);
    await page.getByRole("button", { name: "Pay with wallet" }).click();
    await page.getByRole("button", { name: "Try again" }).click({ timeout: 20_000 });
    await page.getByTestId("access-token").waitFor({ timeout: 20_000 });
    const purchases = await call(server.url, "/dashboard/api/purchases", { token });
    expect(purchases.body.total).toBe(1);
    const buyerSession = (await signIn(server.url, buyer)).sessionToken;
    const balances = await call(server.url, "/mcp", { body: { tool: "wallet_get_balance", params: {} }, token: buyerSession });
    expect(balances.body.data.balances.usdc).toBe(8); // 10 airdropped, 2 paid once
  }, 60_000);

  test("a feature unlock completed without its token (confirmed after the checkout's grace): not called 'Access granted'", async () => {
    const owner = newWallet();
    const token = (await signIn(server.url, owner)).sessionToken;
    const p = await product(token, { title: "Late", type: "feature_unlock", featureIds: ["late"], price: "1" });
    const buyer = newWallet();
    await fund(buyer, "5");
    const page = await (await walletContext(browser!, buyer)).newPage();
    // The server's answer to a confirm long after the checkout's expiry, played here: completed, no token.
    await page.route("**/submit", (route) =>
      route.fulfill({ status: 200, contentType: "application/json", body: JSON.stringify({ status: "completed", txHash: "5".repeat(88), purchaseId: "pur_late" }) }),
    );
    await page.clock.install();
    await page.goto(`${p.paymentUrl}?redirect=${encodeURIComponent(`${server.url}/healthz?from=late`)}`);
    await page.getByRole("button", { name: "Pay with wallet" }).click();
    await page.getByText("The access token went to the app that sent you here").waitFor({ timeout: 20_000 });
    expect(await page.getByText("Access granted.").count()).toBe(0);
    // A feature unlock's page does not leave by itself (its buyer may need the token), even without one to show.
    expect(await page.getByTestId("returning").count()).toBe(0);
    expect(await leavesWithin(page, 60_000)).toBe(false);
    expect(page.url()).toStartWith(p.paymentUrl);
  }, 60_000);

  test("a /submit that waits on another checkout's payment: the page follows that checkout to the purchase", async () => {
    const owner = newWallet();
    const token = (await signIn(server.url, owner)).sessionToken;
    const p = await product(token, { title: "Followed", type: "access", price: "1", accessDays: 1 });
    const buyer = newWallet();
    await fund(buyer, "5");
    const first = await (await walletContext(browser!, buyer)).newPage();
    const opened = first.waitForResponse((r) => r.url().endsWith("/checkout"));
    await first.goto(p.paymentUrl);
    await first.getByRole("button", { name: "Pay with wallet" }).click();
    const paidCheckout = (await (await opened).json()).checkoutId as string;
    await first.getByText("Access granted.").waitFor({ timeout: 20_000 });
    // The server's answer while the first tab's payment is still landing (the embedded ledger lands it at
    // once, so that moment is played here): nothing sent, and the checkout to follow named.
    const page = await (await walletContext(browser!, buyer)).newPage();
    await page.route("**/submit", (route) =>
      route.fulfill({ status: 200, contentType: "application/json", body: JSON.stringify({ status: "pending", checkoutId: paidCheckout }) }),
    );
    await page.goto(p.paymentUrl);
    await page.getByRole("button", { name: "Pay with wallet" }).click();
    await page.getByText("Access granted.").waitFor({ timeout: 20_000 });
    expect((await call(server.url, "/dashboard/api/purchases", { token })).body.total).toBe(1);
  }, 60_000);

  test("the wallet signs only the price the page shows: a price changed while the page is open, or since the tab's checkout opened", async () => {
    const owner = newWallet();
    const token = (await signIn(server.url, owner)).sessionToken;
    const p = await product(token, { title: "Moving", type: "access", price: "1", accessDays: 1 });
    const reprice = async (price: string) => expect((await call(server.url, `/dashboard/api/products/${p.productId}`, { method: "PATCH", token, body: { price } })).status).toBe(200);
    const paid = async () => ((await call(server.url, "/dashboard/api/purchases", { token })).body.purchases as Json[]).map((x) => `${x.amount} ${x.currency}`);
    const buyer = newWallet();
    await fund(buyer, "20");
    const context = await walletContext(browser!, buyer);
    const page = await context.newPage();
    await page.goto(p.paymentUrl);
    await page.getByText("1 USDC").waitFor();
    await reprice("3"); // while the page is open
    await page.getByRole("button", { name: "Pay with wallet" }).click();
    await page.getByText("The price changed to 3 USDC. Nothing was paid.").waitFor({ timeout: 20_000 });
    await page.getByText("3 USDC", { exact: true }).waitFor();
    expect(await paid()).toEqual([]);
    await page.getByRole("button", { name: "Try again" }).click();
    await page.getByText("Access granted.").waitFor({ timeout: 20_000 });
    expect(await paid()).toEqual(["3 USDC"]);

    await context.close();

    // A checkout kept for the tab (a signature rejected) keeps its price; the owner lowers it; a reload.
    // (Another buyer: the page answers a purchase of the same wallet within 17 minutes instead of a second.)
    const second = newWallet();
    await fund(second, "20");
    const context2 = await walletContext(browser!, second);
    const again = await context2.newPage();
    await again.goto(p.paymentUrl);
    context2.setReject(true);
    await again.getByRole("button", { name: "Pay with wallet" }).click();
    await again.getByText("You rejected the signature in your wallet").waitFor({ timeout: 20_000 });
    context2.setReject(false);
    await reprice("2");
    await again.reload();
    await again.getByText("2 USDC", { exact: true }).waitFor();
    await again.getByRole("button", { name: "Pay with wallet" }).click();
    await again.getByText("The price changed to 2 USDC. Nothing was paid.").waitFor({ timeout: 20_000 });
    await again.getByRole("button", { name: "Try again" }).click();
    await again.getByText("Access granted.").waitFor({ timeout: 20_000 });
    expect((await paid()).sort()).toEqual(["2 USDC", "3 USDC"]);
    await context2.close();
  }, 60_000);

  test("switching from editing one product to another edits the other one", async () => {
    const owner = newWallet();
    const token = (await signIn(server.url, owner)).sessionToken;
    await product(token, { title: "Alpha", type: "feature_unlock", featureIds: ["a"] });
    await product(token, { title: "Beta", type: "feature_unlock", featureIds: ["b"] });
    const page = await ownerPage(owner);
    await page.getByRole("link", { name: "Products" }).click();
    await page.getByRole("row", { name: /Alpha/ }).getByRole("button", { name: "Edit" }).click();
    expect(await page.getByLabel("Title").inputValue()).toBe("Alpha");
    expect(await page.getByRole("button", { name: "Edit" }).count()).toBe(0); // one form at a time
    await page.getByRole("button", { name: "Cancel" }).click();
    await page.getByRole("row", { name: /Beta/ }).getByRole("button", { name: "Edit" }).click();
    expect(await page.getByLabel("Title").inputValue()).toBe("Beta");
    await page.getByLabel("Access days (empty: forever)").fill("two");
    await page.getByRole("button", { name: "Save" }).click();
    await page.getByText("Access days must be a whole number").waitFor();
    await page.getByLabel("Access days (empty: forever)").fill("30");
    await page.getByLabel("Sites the checkout may return to (origins, comma-separated)").fill("https://shop.example, https://app.example");
    await page.getByRole("button", { name: "Save" }).click();
    await page.getByRole("button", { name: "New product" }).waitFor(); // the form closed
    const beta = (await call(server.url, "/dashboard/api/products", { token })).body.products.find((p: Json) => p.title === "Beta");
    expect([beta.accessDays, beta.redirectOrigins]).toEqual([30, ["https://shop.example", "https://app.example"]]);
  }, 60_000);

  test("tokens: filtered by status and wallet, revoked after a confirmation; purchases listed", async () => {
    const owner = newWallet();
    const token = (await signIn(server.url, owner)).sessionToken;
    const p = await product(token, { title: "Tool", type: "feature_unlock", featureIds: ["t"], price: "0.25" });
    const [a, b] = [newWallet(), newWallet()];
    for (const buyer of [a, b]) {
      await fund(buyer, "2");
      await (await buy(buyer, p.paymentUrl)).getByTestId("access-token").waitFor({ timeout: 20_000 });
    }
    const page = await ownerPage(owner);
    await page.getByRole("link", { name: "Tokens" }).click();
    await page.getByText("1–2 of 2").waitFor();
    await page.getByLabel("Wallet").fill(a.address);
    await page.getByLabel("Wallet").press("Enter");
    await page.getByText("1–1 of 1").waitFor();
    // Its row's words describe Revoke: the product and the token shortened, not 47 characters read out whole.
    const described = await page.getByRole("button", { name: "Revoke" }).evaluate((el) => (globalThis as any).document.getElementById(el.getAttribute("aria-describedby"))?.textContent);
    expect(described).toMatch(/^Tool, token ft_\w{5}…\w{8}$/);
    await page.getByRole("button", { name: "Revoke" }).click();
    await page.getByRole("button", { name: "Yes" }).click();
    await page.getByText("revoked", { exact: true }).waitFor();
    await page.getByLabel("Wallet").fill("");
    await page.getByLabel("Wallet").press("Enter");
    await page.getByText("1–2 of 2").waitFor(); // both again, before the next filter
    await page.getByLabel("Status").selectOption("active");
    await page.getByTitle(a.address).waitFor({ state: "detached" }); // a's token is revoked: filtered out
    await page.getByText("1–1 of 1").waitFor();
    expect(await page.getByTitle(b.address).count()).toBe(1);
    await page.getByRole("link", { name: "Purchases" }).click();
    await page.getByText("1–2 of 2").waitFor();
    expect(await page.getByText("0.25 USDC").count()).toBe(2);
  }, 60_000);

  test("webhooks: reveal and rotate the secret, send a test event, resend it; disable", async () => {
    const owner = newWallet();
    const page = await ownerPage(owner);
    await page.getByRole("link", { name: "Webhooks" }).click();
    await page.getByLabel("Endpoint URL").fill(`http://127.0.0.1:${hook.port}/hook`);
    await page.getByRole("button", { name: "Add endpoint" }).click();
    const endpoint = page.getByTestId("endpoint");
    await endpoint.waitFor();
    const first = (await page.locator("form .secret code").textContent())!;
    await endpoint.getByRole("button", { name: "Reveal secret" }).click();
    expect(await endpoint.locator(".secret code").textContent()).toBe(first);
    await endpoint.getByRole("button", { name: "Rotate secret" }).click();
    await endpoint.getByRole("button", { name: "Yes" }).click();
    await endpoint.locator(".secret code").filter({ hasNotText: first }).waitFor();
    expect(await endpoint.locator(".secret code").textContent()).toMatch(/^whsec_/);
    await endpoint.getByRole("button", { name: "Send test event" }).click();
    const log = endpoint.getByTestId("deliveries");
    for (let i = 0; i < 40 && (await log.getByText("succeeded").count()) === 0; i++) {
      await Bun.sleep(250);
      await endpoint.getByRole("button", { name: "Refresh" }).click();
    }
    await log.getByText("webhook.test").waitFor();
    await log.getByRole("button", { name: "Resend" }).click();
    for (let i = 0; i < 40 && (await log.getByText("webhook.test").count()) < 2; i++) {
      await Bun.sleep(250);
      await endpoint.getByRole("button", { name: "Refresh" }).click();
    }
    expect(await log.getByText("webhook.test").count()).toBe(2);
    await endpoint.getByRole("button", { name: "Disable" }).click();
    await page.getByText("disabled", { exact: true }).waitFor();
  }, 60_000);

  test("at phone width the dashboard fits the screen and its tables scroll inside their cards", async () => {
    // An owner with a row in every table, a long title among them: each table is wider than the screen.
    const seller = newWallet();
    const { sessionToken: token } = await signIn(server.url, seller);
    const sold = await product(token, { title: `Unbroken${"x".repeat(150)}`, type: "feature_unlock", featureIds: ["export"], price: "1" });
    expect((await call(server.url, "/dashboard/api/keys", { token, body: { label: "phone" } })).status).toBe(201);
    expect((await call(server.url, "/dashboard/api/webhooks", { token, body: { url: hook.url, events: ["payment.completed"] } })).status).toBe(201);
    const { wallet: payer, keypair } = newBuyer();
    const airdrop = await runCli(["ledger", "airdrop", "--to", payer.address, "--sol", "1", "--usdc", "5"], { DATA_DIR: server.dataDir });
    expect(airdrop.code).toBe(0);
    const checkout = await call(server.url, `/pay/${sold.productId}/checkout`, { body: { walletAddress: payer.address } });
    const paid = await call(server.url, `/pay/${sold.productId}/submit`, { body: { checkoutId: checkout.body.checkoutId, transaction: signCheckout(checkout.body.transaction as string, keypair) } });
    expect(paid.body).toMatchObject({ status: "completed" });
    const page = await ownerPage(seller);
    await page.setViewportSize({ width: 375, height: 740 });
    for (const name of ["Overview", "Products", "API keys", "Tokens", "Purchases", "Webhooks"]) {
      await page.getByRole("link", { name }).click();
      // the new section is shown (not the one before it, whose rows are there too)
      await page.getByRole("heading", { level: 1, name: name === "Tokens" ? "Access tokens" : name, exact: true }).waitFor();
      if (name !== "Overview") await page.locator("main table tbody tr").first().waitFor(); // its rows are there
      expect(await page.evaluate(() => (globalThis as any).document.documentElement.scrollWidth as number)).toBeLessThanOrEqual(375);
    }
  }, 60_000);
});
