// Requests anyone can repeat must not do work that grows with other users' rows: the plans of the
// statements behind them, on the schema as migrated (found by reading every statement's plan; each of
// these read or sorted a whole table before migration 30 and the changes beside it).
import { expect, test } from "bun:test";
import { testDeps } from "./helpers/deps.ts";
import { plansOf } from "./helpers/plans.ts";
import * as paygate from "../src/paygate/store.ts";
import * as market from "../src/marketplace/store.ts";
import * as orders from "../src/marketplace/orders/store.ts";
import * as webhooks from "../src/webhooks/store.ts";
import * as wallets from "../src/wallets/store.ts";

const scans = (plan: string, table: string) => new RegExp(`\\bSCAN ${table}\\b`).test(plan);

test("checkout_pay's look for the wallet's open checkouts of a product goes through their own index", async () => {
  const { deps } = await testDeps();
  const plans = await plansOf(deps.db.sqlite, () => paygate.findSubmittedOpenCheckoutsOf(deps.db, "prd_x", "wallet", 5));
  expect(plans.length).toBe(1);
  expect(plans[0]!.plan).toContain("USING INDEX checkouts_open_of (product_id=? AND wallet=?)");
  expect(plans[0]!.plan).not.toContain("TEMP B-TREE FOR ORDER BY"); // only LAST TERM: ties of one millisecond
});

test("an agent's update of its services deletes its removed ones through an index, not a scan of everyone's", async () => {
  const { deps, clock } = await testDeps();
  const now = clock.now();
  const agent = {
    id: "agt_1",
    ownerWallet: "owner",
    endpoint: "https://agent.example.com/",
    name: "A",
    tagline: "",
    description: "",
    categories: ["design"],
    basePrice: 1_000_000n,
    status: "active" as const,
    secretIv: new Uint8Array(12),
    secretCiphertext: new Uint8Array(48),
    createdAt: now,
  };
  const service = { id: "svc_1", title: "Logo", description: "", price: 1n, deliveryTimeMin: 60 };
  expect(await market.insertAgent(deps.db, agent, ["design"], [service], 20)).toBe(true);
  const plans = await plansOf(deps.db.sqlite, () => market.updateAgent(deps.db, "owner", "agt_1", { services: [] }, now + 1));
  const touching = plans.filter((p) => p.sql.includes("market_agent_services"));
  expect(touching.length).toBeGreaterThan(0);
  for (const { sql, plan } of touching) expect({ sql, scans: scans(plan, "market_agent_services") }).toEqual({ sql, scans: false });
});

test("a search with maxPrice sorts its matches when they are few, and walks the ranking to the page when they are many", async () => {
  const { deps } = await testDeps();
  const plansFor = async (search: Pick<market.AgentSearch, "categoryKey" | "maxBasePrice">) => {
    const plans = await plansOf(deps.db.sqlite, () => market.searchAgents(deps.db, { ...search, match: null, limit: 20, offset: 0 }));
    return { page: plans.find((p) => p.sql.includes("ORDER BY"))!.plan, count: plans.find((p) => p.sql.includes("COUNT(*)"))!.plan };
  };
  // None match yet: the price index finds them, and the few are sorted.
  const few = await plansFor({ categoryKey: null, maxBasePrice: 5_000_000n });
  expect(few.page).toContain("USING INDEX market_agents_price (status=? AND base_price<?)");
  expect(few.count).toContain("market_agents_price (status=? AND base_price<?)"); // counted over the price's range
  // Many agents under the price: the ranking is walked (the price read from its entries), nothing sorted.
  await deps.db.write(() => {
    const insert = deps.db.sqlite.query(
      `INSERT INTO market_agents (id, owner_wallet, endpoint, name, tagline, description, categories, base_price, status, secret_iv, secret_ciphertext, created_at, updated_at)
       VALUES (?, ?, 'https://agent.example.com/', 'A', '', '', '["design"]', 1000000, 'active', ?, ?, 0, 0)`,
    );
    const category = deps.db.sqlite.query("INSERT INTO market_agent_categories (category_key, agent_id) VALUES ('design', ?)");
    for (let i = 0; i <= 2_000; i++) {
      insert.run(`agt_${i}`, `owner_${i}`, new Uint8Array(12), new Uint8Array(48));
      category.run(`agt_${i}`);
    }
  });
  for (const categoryKey of [null, "design"]) {
    const many = await plansFor({ categoryKey, maxBasePrice: 5_000_000n });
    expect({ categoryKey, walks: many.page.includes("USING INDEX market_agents_rank"), sorts: many.page.includes("TEMP B-TREE FOR ORDER BY") }).toEqual({
      categoryKey,
      walks: true,
      sorts: false,
    });
  }
  expect((await plansFor({ categoryKey: null, maxBasePrice: null })).page).not.toContain("TEMP B-TREE FOR ORDER BY");
});

test("the owner's conversations are paged before each one's count and last message are read", async () => {
  const { deps } = await testDeps();
  const plans = await plansOf(deps.db.sqlite, () => market.listOwnerConversations(deps.db, "owner", null, 20, 0));
  const page = plans.find((p) => p.sql.includes("market_messages"))!;
  // The page is a co-routine of its own; the correlated subqueries run over its rows only.
  expect(page.plan).toContain("CO-ROUTINE page");
  expect(page.plan.indexOf("CORRELATED SCALAR SUBQUERY")).toBeGreaterThan(page.plan.indexOf("SCAN page"));
});

test("the webhook claim reads each endpoint's due rows in sending order (due time, then as written) from its index, unsorted", async () => {
  const { deps } = await testDeps();
  const now = deps.clock.now();
  // One delivery due: with none, the claim stops at its first look (a read) and writes nothing.
  await deps.db.write(() => {
    deps.db.sqlite.query("INSERT INTO outbox_events (id, target_kind, target_id, type, payload, created_at) VALUES ('evt_1', 'owner', 'o', 'payment.completed', 'x', ?)").run(now);
    deps.db.sqlite
      .query(
        `INSERT INTO webhook_deliveries (id, event_id, endpoint_kind, endpoint_id, status, attempts, next_attempt_at, created_at, updated_at)
         VALUES ('whd_1', 'evt_1', 'owner_endpoint', 'whe_1', 'pending', 0, ?, ?, ?)`,
      )
      .run(now, now, now);
  });
  const plans = await plansOf(deps.db.sqlite, () =>
    webhooks.claimDueDeliveries(deps.db, { now, leaseUntil: now + 1, token: "t", limit: 16, kinds: ["owner_endpoint", "agent"], perEndpoint: 1, busy: [] }),
  );
  // The first look: the due index's range, stopping at the first row not under a lease.
  expect(plans[0]!.plan).toContain("SEARCH webhook_deliveries USING INDEX webhook_deliveries_due (status=? AND next_attempt_at<?)");
  const claim = plans.find((p) => p.sql.includes("WITH RECURSIVE"))!.plan;
  // The per-endpoint look-up, up to the event join after it: an index range, no sort of the endpoint's backlog.
  const perEndpoint = /CORRELATED LIST SUBQUERY \d+; (.*?); SEARCH e /.exec(claim)?.[1];
  expect(perEndpoint).toBe("SEARCH x USING INDEX webhook_deliveries_pending (endpoint_kind=? AND endpoint_id=? AND next_attempt_at<?)");
});

test("an owner's revenue reads the owner index alone; a product's purchases and tokens come through the product's index; pages are keyed from the index first", async () => {
  const { deps } = await testDeps();
  const plansFor = (call: () => Promise<unknown>) => plansOf(deps.db.sqlite, call);
  for (const call of [() => paygate.revenueByToken(deps.db, "owner", 0), () => paygate.dailyRevenue(deps.db, "owner", 0)]) {
    const [stats] = await plansFor(call);
    expect(stats!.plan).toContain("USING COVERING INDEX purchases_owner (owner=? AND purchased_at>?)");
  }
  const ofProduct = [
    ...(await plansFor(() => paygate.listPurchases(deps.db, "owner", { productId: "prd_x", limit: 20, offset: 0 }))),
    ...(await plansFor(() => paygate.listFeatureTokens(deps.db, "owner", { productId: "prd_x", limit: 20, offset: 0 }, 0))),
  ];
  expect(ofProduct.length).toBe(4); // a count and a page each
  for (const { sql, plan } of ofProduct) {
    expect({ sql, byProduct: /(purchases|feature_tokens)_access \(product_id=\?\)/.test(plan), byOwner: /_owner \(owner=\?/.test(plan) }).toEqual({ sql, byProduct: true, byOwner: false });
  }
  const pages = [
    ...(await plansFor(() => paygate.listPurchases(deps.db, "owner", { limit: 20, offset: 5_000 }))),
    ...(await plansFor(() => paygate.listFeatureTokens(deps.db, "owner", { limit: 20, offset: 5_000 }, 0))),
  ].filter((p) => p.sql.includes("OFFSET"));
  expect(pages.length).toBe(2);
  for (const { sql, plan } of pages) {
    // The ids of the page from the covering owner index (a deep page skips index entries, not joined rows).
    expect({ sql, keyedFromIndex: /LIST SUBQUERY[^;]*; SEARCH (p|t) USING COVERING INDEX (purchases|feature_tokens)_owner \(owner=\?\)/.test(plan) }).toEqual({ sql, keyedFromIndex: true });
  }
});

test("wallet_transfer's idempotency keys: found by their key, purged through their time index", async () => {
  const { deps, clock } = await testDeps();
  const [found] = await plansOf(deps.db.sqlite, () => wallets.findTransferKey(deps.db, "wallet", "key"));
  expect(found!.plan).toContain("SEARCH transfer_keys USING PRIMARY KEY (wallet=? AND idempotency_key=?)");
  const purge = await plansOf(deps.db.sqlite, () => wallets.purgeTransferKeys(deps.db, clock.now()));
  expect(purge.length).toBe(1);
  expect(purge[0]!.plan).toContain("USING COVERING INDEX transfer_keys_created_at (created_at<?)");
  expect(scans(purge[0]!.plan, "transfer_keys")).toBe(false);
});

test("the timers' look for work before loading their modules goes through indexes: due orders, orders in flight, open checkouts", async () => {
  const { deps, clock } = await testDeps();
  const plans = [
    ...(await plansOf(deps.db.sqlite, () => orders.hasTimerWork(deps.db, clock.now()))),
    ...(await plansOf(deps.db.sqlite, () => paygate.anyOpenCheckout(deps.db))),
  ];
  // The partial indexes hold only those rows: the first one found answers (LIMIT 1).
  expect(plans.map((p) => p.plan)).toEqual([
    expect.stringContaining("USING COVERING INDEX market_orders_due (due_at>? AND due_at<?)"),
    "SCAN market_orders USING INDEX market_orders_pending",
    "SCAN checkouts USING COVERING INDEX checkouts_open",
  ]);
});
