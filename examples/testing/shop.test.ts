// Your app's tests against a real walletgate (examples/testing/walletgate.ts starts it): a user signs in
// and your server checks the session; an owner sells an access pass and a feature unlock; a buyer pays
// headless (no browser), your server sees the access and receives the signed webhooks.
// In a checkout of walletgate: WALLETGATE_BIN=src/main.ts bun test ./examples/testing/shop.test.ts
import { afterAll, beforeAll, expect, test } from "bun:test";
import { generateKeyPairSync, sign } from "node:crypto";
import { PublicKey, VersionedTransaction } from "@solana/web3.js";
import { Webhook } from "standardwebhooks";
import { startWalletgate, type Walletgate } from "./walletgate.ts";

let wg: Walletgate;
/** Stands for your app's webhook endpoint: what it was sent, as it arrived. */
const arrived: { body: string; headers: Record<string, string> }[] = [];
const receiver = Bun.serve({
  port: 0,
  hostname: "127.0.0.1",
  async fetch(request) {
    arrived.push({ body: await request.text(), headers: Object.fromEntries(request.headers) });
    return new Response(null, { status: 204 });
  },
});
beforeAll(async () => {
  wg = await startWalletgate();
}, 30_000);
afterAll(async () => {
  await wg?.stop();
  await receiver.stop(true);
});

/** A wallet: an Ed25519 key, signing as your users' wallets do. */
function newWallet() {
  const { publicKey, privateKey } = generateKeyPairSync("ed25519");
  const address = new PublicKey(Buffer.from(publicKey.export({ format: "jwk" }).x!, "base64url")).toBase58();
  return { address, sign: (bytes: Uint8Array) => sign(null, bytes, privateKey) };
}
type Wallet = ReturnType<typeof newWallet>;

async function api(path: string, options: { token?: string; apiKey?: string; body?: unknown } = {}): Promise<any> {
  const headers: Record<string, string> = { "content-type": "application/json" };
  if (options.token) headers.authorization = `Bearer ${options.token}`;
  if (options.apiKey) headers["x-api-key"] = options.apiKey;
  const method = options.body === undefined ? "GET" : "POST";
  const res = await fetch(`${wg.url}${path}`, { method, headers, body: options.body === undefined ? undefined : JSON.stringify(options.body) });
  const answer = await res.json();
  if (!res.ok) throw new Error(`${method} ${path}: ${res.status} ${JSON.stringify(answer)}`);
  return answer;
}

async function signIn(wallet: Wallet): Promise<string> {
  const { nonce, message } = await api(`/auth/challenge?wallet=${wallet.address}`);
  const signature = wallet.sign(Buffer.from(message, "utf8")).toString("base64");
  return (await api("/auth/verify", { body: { walletAddress: wallet.address, nonce, signature } })).sessionToken;
}

/** Opens a checkout, signs its transaction with the buyer's key and submits it: what the checkout page does. */
async function buy(productId: string, buyer: Wallet): Promise<any> {
  const checkout = await api(`/pay/${productId}/checkout`, { body: { walletAddress: buyer.address } });
  const tx = VersionedTransaction.deserialize(Buffer.from(checkout.transaction, "base64"));
  tx.addSignature(new PublicKey(buyer.address), buyer.sign(tx.message.serialize()));
  const transaction = Buffer.from(tx.serialize()).toString("base64");
  return api(`/pay/${productId}/submit`, { body: { checkoutId: checkout.checkoutId, transaction } });
}

test("a user signs in; the app's server checks the session with walletgate, which also knows revocations", async () => {
  const user = newWallet();
  const token = await signIn(user);
  expect(await api("/auth/session", { token })).toMatchObject({ walletAddress: user.address });
  await api("/auth/revoke", { token, body: {} });
  expect((await fetch(`${wg.url}/auth/session`, { headers: { authorization: `Bearer ${token}` } })).status).toBe(401);
}, 30_000); // bun test's default is 5 s a test; on a busy CI machine a start and a purchase can take longer

test("an owner sells a pass and a feature unlock; a buyer pays; the app sees access and verified webhooks", async () => {
  const ownerToken = await signIn(newWallet());
  const { key } = await api("/dashboard/api/keys", { token: ownerToken, body: { label: "tests" } });
  const hook = await api("/dashboard/api/webhooks", {
    token: ownerToken,
    body: { url: `http://127.0.0.1:${receiver.port}/walletgate`, events: ["payment.completed", "feature.unlocked"] },
  });
  const pass = await api("/dashboard/api/products", { token: ownerToken, body: { title: "Pass", description: "A month", type: "access", price: "5", accessDays: 30 } });
  const pro = await api("/dashboard/api/products", { token: ownerToken, body: { title: "Pro", description: "Export", type: "feature_unlock", price: "2.50", featureIds: ["export"] } });

  const buyer = newWallet();
  expect(await api("/public/access/check", { apiKey: key, body: { productId: pass.productId, walletAddress: buyer.address } })).toMatchObject({ hasAccess: false });
  await wg.cli("ledger", "airdrop", "--to", buyer.address, "--sol", "1", "--usdc", "10"); // the embedded ledger's faucet
  expect(await buy(pass.productId, buyer)).toMatchObject({ status: "completed" });
  const unlocked = await buy(pro.productId, buyer);
  expect(unlocked.accessToken).toStartWith("ft_");

  expect(await api("/public/access/check", { apiKey: key, body: { productId: pass.productId, walletAddress: buyer.address } })).toMatchObject({ hasAccess: true });
  expect(await api("/public/feature/verify", { apiKey: key, body: { accessToken: unlocked.accessToken } })).toMatchObject({ valid: true, features: ["export"] });

  // Deliveries are sent in the background, in order: two payments, then the unlock.
  for (let waited = 0; arrived.length < 3 && waited < 15_000; waited += 100) await Bun.sleep(100);
  const webhook = new Webhook(hook.secret);
  // verify() throws on a forged or stale delivery; the event's fields are flat (paygate.md, Webhooks).
  const events = arrived.map(({ body, headers }) => webhook.verify(body, headers) as { type: string; productId: string; walletAddress: string });
  expect(events.every((e) => e.walletAddress === buyer.address)).toBe(true);
  expect(events.map((e) => [e.type, e.productId])).toEqual([
    ["payment.completed", pass.productId],
    ["payment.completed", pro.productId],
    ["feature.unlocked", pro.productId],
  ]);
}, 30_000);
