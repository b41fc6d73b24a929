// Revenue statistics stay exact when the amounts are large: purchases of up to 2^63-1 base units each
// (spec README "Amounts") whose total SQLite's SUM could not hold. The purchases are written directly:
// no ledger here holds that much money.
import { expect, test } from "bun:test";
import { testDeps } from "../../test/helpers/deps.ts";
import { encodeBase58 } from "../lib/encoding.ts";
import { formatAmount } from "../lib/amounts.ts";
import { cryptoRandom } from "../lib/ids.ts";
import { createProduct } from "./products.ts";
import { listPurchases, ownerStats, ownerStatsWithDaily } from "./purchases.ts";

test("/public/stats and the daily series add purchases past 2^63-1 base units exactly", async () => {
  const { deps, clock } = await testDeps();
  const owner = encodeBase58(cryptoRandom(32));
  const most = 2n ** 63n - 1n;
  const product = await createProduct(deps, owner, { title: "Huge", description: "", type: "access", price: formatAmount(most, 6) });
  const amounts = [most, most, 2n ** 62n + 7n];
  amounts.forEach((amount, i) => {
    const now = clock.now();
    deps.db.sqlite
      .query(
        `INSERT INTO checkouts (id, product_id, owner, wallet, reference, pay_to, amount, token, created_at, expires_at, status, purchase_id)
         VALUES (?, ?, ?, ?, ?, ?, ?, 'usdc', ?, ?, 'completed', ?)`,
      )
      .run(`chk_${i}`, product.productId, owner, owner, `ref${i}`, product.payTo, amount, now, now + 900_000, `pur_${i}`);
    deps.db.sqlite
      .query(
        `INSERT INTO purchases (id, owner, product_id, checkout_id, wallet, tx_hash, amount, token, network, purchased_at)
         VALUES (?, ?, ?, ?, ?, ?, ?, 'usdc', 'localnet', ?)`,
      )
      .run(`pur_${i}`, owner, product.productId, `chk_${i}`, owner, `tx${i}`, amount, now);
  });
  const total = amounts.reduce((a, b) => a + b, 0n);
  expect(total > most).toBe(true);

  const stats = await ownerStats(deps, owner);
  expect(stats).toMatchObject({ totalTransactions: 3, productCount: 1, revenueByCurrency: { USDC: formatAmount(total, 6) } });
  expect(stats.totalRevenue).toBe(Number(formatAmount(total, 6)));
  const withDaily = await ownerStatsWithDaily(deps, owner, 1);
  expect(withDaily.daily).toEqual([{ date: new Date(clock.now()).toISOString().slice(0, 10), revenue: formatAmount(total, 6), transactions: 3 }]);
});

test("the purchase list pages newest first: the first page of one is the newest purchase, not the oldest (mutation review)", async () => {
  // store.ts listPurchases: the page's ids `ORDER BY p.purchased_at DESC` → `ASC` still sorts the page newest
  // first, but takes it from the oldest end: an owner with more purchases than a page never sees the latest.
  const { deps, clock } = await testDeps();
  const owner = encodeBase58(cryptoRandom(32));
  const product = await createProduct(deps, owner, { title: "Pass", description: "", type: "access", price: "1" });
  const base = clock.now();
  for (const i of [0, 1, 2]) {
    const at = base - (2 - i) * 60_000; // pur_2 is the newest
    deps.db.sqlite
      .query(
        `INSERT INTO checkouts (id, product_id, owner, wallet, reference, pay_to, amount, token, created_at, expires_at, status, purchase_id)
         VALUES (?, ?, ?, ?, ?, ?, 1000000, 'usdc', ?, ?, 'completed', ?)`,
      )
      .run(`chk_${i}`, product.productId, owner, owner, `ref${i}`, product.payTo, at, at + 900_000, `pur_${i}`);
    deps.db.sqlite
      .query(
        `INSERT INTO purchases (id, owner, product_id, checkout_id, wallet, tx_hash, amount, token, network, purchased_at)
         VALUES (?, ?, ?, ?, ?, ?, 1000000, 'usdc', 'localnet', ?)`,
      )
      .run(`pur_${i}`, owner, product.productId, `chk_${i}`, owner, `tx${i}`, at);
  }
  const page = async (offset: number, productId?: string) => (await listPurchases(deps, owner, { limit: 1, offset, productId })).purchases.map((p) => p.purchaseId);
  expect(await page(0)).toEqual(["pur_2"]);
  expect(await page(1)).toEqual(["pur_1"]);
  expect(await page(0, product.productId)).toEqual(["pur_2"]);
  expect((await listPurchases(deps, owner, { limit: 2 })).purchases.map((p) => p.purchaseId)).toEqual(["pur_2", "pur_1"]);
});
