// Real headless Chromium for end-to-end tests (dashboard.md "Testing"): Debian's /usr/bin/chromium driven
// by playwright-core, and a test wallet injected as `window.solana` that signs with a real Ed25519 key
// held by the test process (the page never sees the private key).
import { existsSync, mkdirSync } from "node:fs";
import { join } from "node:path";
import { sign } from "node:crypto";
import { chromium, type Browser, type BrowserContext } from "playwright-core";
import type { TestWallet } from "./wallet.ts";

export const CHROMIUM = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium";
export const SCREENSHOTS = join(import.meta.dir, "../../test-results/screenshots");

const FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-quic"];

/** Null when Chromium is not installed here (then e2e tests are skipped, except under CI, where they fail). */
export async function launchChromium(): Promise<Browser | null> {
  if (!existsSync(CHROMIUM)) {
    if (process.env.CI) throw new Error(`${CHROMIUM} is missing: .ci/run installs Debian's chromium`);
    return null;
  }
  mkdirSync(SCREENSHOTS, { recursive: true });
  return chromium.launch({ executablePath: CHROMIUM, args: FLAGS });
}

/**
 * A browser context whose pages have `window.solana`: connect, signMessage and signTransaction (the
 * provider API of Phantom and the like), signing with `wallet`'s key. `setReject(true)` makes the next
 * signatures fail as a user's "Reject" does (code 4001). `holdSignatures()` keeps the next ones waiting,
 * as a wallet's popup does until the user answers: `requested` resolves when one is asked for, and
 * `release()` lets them through.
 */
export async function walletContext(
  browser: Browser,
  wallet: TestWallet,
): Promise<BrowserContext & { setReject(on: boolean): void; holdSignatures(): { requested: Promise<void>; release(): void } }> {
  const context = await browser.newContext({ viewport: { width: 1100, height: 800 } });
  let reject = false;
  let held: { gate: Promise<void>; asked(): void } | null = null;
  await context.exposeBinding("__wgSign", async (_source, messageBase64: string) => {
    if (held !== null) {
      held.asked();
      await held.gate;
    }
    if (reject) return null;
    return sign(null, Buffer.from(messageBase64, "base64"), wallet.privateKey).toString("base64");
  });
  await context.addInitScript((address: string) => {
    const page = globalThis as any; // this function runs in the page: its window
    const b64 = (bytes: Uint8Array) => btoa(String.fromCharCode(...bytes));
    const unb64 = (text: string) => Uint8Array.from(atob(text), (c) => c.charCodeAt(0));
    const publicKey = { toBase58: () => address, toString: () => address };
    const signBytes = async (bytes: Uint8Array) => {
      const signature = await page.__wgSign(b64(bytes));
      if (signature === null) throw Object.assign(new Error("User rejected the request."), { code: 4001 });
      return unb64(signature);
    };
    page.solana = {
      publicKey: null,
      async connect() {
        this.publicKey = publicKey;
        return { publicKey };
      },
      async signMessage(message: Uint8Array) {
        return { signature: await signBytes(message), publicKey };
      },
      async signTransaction(tx: any) {
        const keys: string[] = tx.message.staticAccountKeys.map((k: { toBase58(): string }) => k.toBase58());
        const index = keys.indexOf(address);
        if (index < 0 || index >= tx.message.header.numRequiredSignatures) throw new Error("this wallet does not sign that transaction");
        tx.signatures[index] = await signBytes(tx.message.serialize());
        return tx;
      },
    };
  }, wallet.address);
  const holdSignatures = () => {
    let open = () => {};
    let asked = () => {};
    const gate = new Promise<void>((resolve) => (open = resolve));
    const requested = new Promise<void>((resolve) => (asked = resolve));
    held = { gate, asked };
    return {
      requested,
      release() {
        held = null;
        open();
      },
    };
  };
  return Object.assign(context, { setReject: (on: boolean) => void (reject = on), holdSignatures });
}

/**
 * Adds to `context`'s pages a Wallet Standard wallet called `name` (connect and signMessage, signing with
 * `wallet`'s key in the test process), announced as real ones are: on the page's `wallet-standard:app-ready`.
 * It names `chains` (what the wallet says it supports).
 */
export async function addStandardWallet(
  context: BrowserContext,
  name: string,
  wallet: TestWallet,
  chains: string[] = ["solana:mainnet", "solana:devnet"],
  /** Whether the wallet has already given the site its account (listed in `accounts` before any connect). */
  authorized = false,
): Promise<void> {
  const binding = `__wgStandardSign_${name.replace(/\W/g, "_")}`;
  await context.exposeBinding(binding, async (_source, messageBase64: string) => sign(null, Buffer.from(messageBase64, "base64"), wallet.privateKey).toString("base64"));
  await context.addInitScript(
    ({ name, address, chains, binding, authorized }: { name: string; address: string; chains: string[]; binding: string; authorized: boolean }) => {
      const page = globalThis as any; // this function runs in the page: its window
      const account = { address, publicKey: new Uint8Array(32), chains, features: ["solana:signMessage"] };
      const standard = {
        version: "1.0.0",
        name,
        icon: "data:image/svg+xml,<svg xmlns='http://www.w3.org/2000/svg'/>",
        chains,
        accounts: (authorized ? [account] : []) as unknown[],
        features: {
          "standard:connect": { version: "1.0.0", connect: async () => ({ accounts: [account] }) },
          "solana:signMessage": {
            version: "1.0.0",
            signMessage: async ({ message }: { message: Uint8Array }) => {
              const signature = await page[binding](btoa(String.fromCharCode(...message)));
              return [{ signedMessage: message, signature: Uint8Array.from(atob(signature), (c) => c.charCodeAt(0)) }];
            },
          },
        },
      };
      page.addEventListener("wallet-standard:app-ready", (event: any) => event.detail.register(standard));
    },
    { name, address: wallet.address, chains, binding, authorized },
  );
}
