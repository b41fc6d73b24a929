// Revenue statistics stay exact when the amounts are large: purchases of up to 2^63-1 base units each
// (spec README "Amounts") whose total SQLite's SUM could not hold. The purchases are written directly:
// no ledger here holds that much money.
import { expect, test } from "bun:test";
import { testDeps } from "../../test/helpers/deps.ts";
import { encodeBase58 } from "../lib/encoding.ts";
import { formatAmount } from "../lib/amounts.ts";
import { cryptoRandom } from "../lib/ids.ts";
import { createProduct } from "./products.ts";
import { ownerStats, ownerStatsWithDaily } from "./purchases.ts";

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
