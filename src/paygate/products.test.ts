// Products in-process: the per-owner cap (a thousand products over HTTP would only be slower), a
// currency without a mint on the network (devnet without SERVICE_TOKEN_MINT), a change of currency keeping
// the price at both tokens' scales, a product priced in a token the service no longer has, and an edit
// racing an archive.
import { expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { PAGE_MAX_CHARS } from "../lib/fit.ts";
import { testDeps } from "../../test/helpers/deps.ts";
import { codeOf } from "../../test/helpers/errors.ts";
import { newWallet } from "../../test/helpers/wallet.ts";
import { associatedTokenAddress } from "../ledger/transactions.ts";
import { eventBody } from "../webhooks/outbox.ts";
import { archiveProduct, createProduct, getProduct, listProducts, MAX_PRODUCTS_PER_OWNER, updateProduct } from "./products.ts";

test("an owner has at most 1,000 products, archived ones included; the refused one emits no event", async () => {
  const { deps } = await testDeps();
  const owner = newWallet().address;
  const pass = { title: "Pass", description: "", type: "access" as const, price: "1" };
  const first = await createProduct(deps, owner, pass);
  await archiveProduct(deps, owner, first.productId);
  for (let i = 1; i < MAX_PRODUCTS_PER_OWNER; i++) await createProduct(deps, owner, pass);
  const events = () => deps.db.sqlite.query("SELECT COUNT(*) AS n FROM outbox_events WHERE type = 'product.created'").get() as { n: number };
  const before = events().n;
  expect(before).toBe(MAX_PRODUCTS_PER_OWNER);
  expect(await codeOf(createProduct(deps, owner, pass))).toBe("INVALID_STATE");
  expect(events().n).toBe(before);
  const all = await listProducts(deps, owner);
  expect([Object.keys(all), all.products.length]).toEqual([["products"], MAX_PRODUCTS_PER_OWNER]); // paygate.md's shape when all of it fits
  expect(await codeOf(createProduct(deps, newWallet().address, pass))).toBe("OK");
});

test("the product list comes in pages of at most ~1 MB of JSON: products at their fields' limits take several", async () => {
  const { deps } = await testDeps();
  const owner = newWallet().address;
  const big = {
    title: "T".repeat(200),
    description: "D".repeat(2000),
    type: "feature_unlock" as const,
    price: "1",
    featureIds: Array.from({ length: 50 }, (_, i) => `${i}`.padEnd(64, "f")),
  };
  const made: string[] = [];
  for (let i = 0; i < 250; i++) made.push((await createProduct(deps, owner, big)).productId);
  const seen: string[] = [];
  let pages = 0;
  for (;;) {
    const page = await listProducts(deps, owner, seen.length);
    pages++;
    expect(JSON.stringify(page.products).length).toBeLessThanOrEqual(PAGE_MAX_CHARS + 2);
    seen.push(...page.products.map((p) => p.productId));
    if (page.hasMore === undefined) {
      expect(Object.keys(page)).toEqual(["products"]); // the last page: paygate.md's shape
      break;
    }
    expect(page).toMatchObject({ total: 250, hasMore: true });
  }
  expect(pages).toBeGreaterThan(1);
  expect([...seen].sort()).toEqual([...made].sort()); // each once (made in one millisecond: the order among them is the id's)
  expect(new Set(seen).size).toBe(250);
  expect(await listProducts(deps, owner, 250)).toEqual({ products: [] });
});

test("a currency with no mint on this network is NOT_SUPPORTED, in a new product and in an edit", async () => {
  const { deps } = await testDeps({ NETWORK: "devnet", SOLANA_RPC_URL: "http://127.0.0.1:1" }); // never called
  const owner = newWallet().address;
  const pass = { title: "Pass", description: "", type: "access" as const, price: "1" };
  expect(await codeOf(createProduct(deps, owner, { ...pass, currency: "WGT" }))).toBe("NOT_SUPPORTED");
  const usdc = await createProduct(deps, owner, pass);
  expect(await codeOf(updateProduct(deps, owner, usdc.productId, { currency: "WGT" }))).toBe("NOT_SUPPORTED");
});

test("an edit racing an archive never brings the product back, and two archives emit one product.archived", async () => {
  const { deps } = await testDeps();
  const owner = newWallet().address;
  const product = await createProduct(deps, owner, { title: "Pass", description: "", type: "access", price: "1" });
  await Promise.all([
    updateProduct(deps, owner, product.productId, { title: "Day pass" }),
    archiveProduct(deps, owner, product.productId),
    archiveProduct(deps, owner, product.productId),
  ]);
  expect(await getProduct(deps, owner, product.productId)).toMatchObject({ title: "Day pass", status: "archived" });
  const events = deps.db.sqlite.query("SELECT id, type FROM outbox_events WHERE type IN ('product.updated', 'product.archived') ORDER BY rowid").all() as { id: string; type: string }[];
  expect(events.filter((e) => e.type === "product.archived")).toHaveLength(1);
  // Each event tells the status the row had when it was written: none after the archive says active.
  const statuses = await Promise.all(events.map(async (e) => [e.type, JSON.parse((await eventBody(deps, e.id))!).status]));
  expect(statuses.slice(statuses.findIndex(([type]) => type === "product.archived")).every(([, status]) => status === "archived")).toBe(true);
});

test("a change of currency alone keeps the price, read at the old currency's scale, whatever the new one's decimals", async () => {
  for (const decimals of ["9", "2"]) {
    const { deps } = await testDeps({ SERVICE_TOKEN_DECIMALS: decimals });
    const owner = newWallet().address;
    const usdc = await createProduct(deps, owner, { title: "Pass", description: "", type: "access", price: "1.5" });
    expect(await updateProduct(deps, owner, usdc.productId, { currency: "WGT" })).toMatchObject({ price: "1.5", currency: "WGT" });
    expect(await updateProduct(deps, owner, usdc.productId, { currency: "USDC" })).toMatchObject({ price: "1.5", currency: "USDC" });
    // A price the new currency cannot hold is refused, and nothing changes.
    await updateProduct(deps, owner, usdc.productId, { price: "1.125" });
    expect(await codeOf(updateProduct(deps, owner, usdc.productId, { currency: "WGT" }))).toBe(decimals === "2" ? "VALIDATION_ERROR" : "OK");
  }
});

test("a product priced in a token the service no longer has: other edits work; a new price needs a currency", async () => {
  const dir = mkdtempSync(join(tmpdir(), "wg-products-"));
  try {
    const before = await testDeps({}, { dbPath: join(dir, "db") });
    const owner = newWallet().address;
    const wgt = await createProduct(before.deps, owner, { title: "Pass", description: "", type: "access", price: "2", currency: "WGT" });
    before.db.close();
    const { deps, db } = await testDeps({ SERVICE_TOKEN_SYMBOL: "abc" }, { dbPath: join(dir, "db") });
    expect(await updateProduct(deps, owner, wgt.productId, { title: "Day pass" })).toMatchObject({ title: "Day pass", price: "2", currency: "WGT" });
    expect(await codeOf(updateProduct(deps, owner, wgt.productId, { price: "3" }))).toBe("VALIDATION_ERROR");
    expect(await codeOf(updateProduct(deps, owner, wgt.productId, { currency: "USDC" }))).toBe("VALIDATION_ERROR");
    expect(await updateProduct(deps, owner, wgt.productId, { currency: "USDC", price: "3" })).toMatchObject({ price: "3", currency: "USDC" });
    db.close();
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("payTo must be a wallet: a program, sysvar, mint (wrapped SOL's too) or token account is VALIDATION_ERROR on payTo, in a new product and in an edit", async () => {
  const { deps } = await testDeps();
  const owner = newWallet().address;
  const holder = newWallet().address;
  await deps.ledger.airdrop(holder, { sol: 1_000_000_000n, usdc: 1_000_000n });
  const usdcMint = (await deps.ledger.tokens()).find((t) => t.key === "usdc")!.mint!;
  const pass = { title: "Pass", description: "", type: "access" as const, price: "1" };
  const product = await createProduct(deps, owner, pass);
  const refusal = async (p: Promise<unknown>) => {
    const err = (await p.catch((e: unknown) => e)) as { code?: string; message?: string; extra?: { details?: { fields?: { field: string }[] } } };
    return [err.code, err.extra?.details?.fields?.[0]?.field, err.message?.includes("not a wallet")];
  };
  const unfit = ["11111111111111111111111111111111", "SysvarRent111111111111111111111111111111111", "TokenkegQfeZyiNwAJbNbGKPFXCWuBvf9Ss623VQ5DA", usdcMint, associatedTokenAddress(holder, usdcMint)];
  // wrapped SOL's mint, which every cluster has and the embedded ledger keeps no account for
  unfit.push("So11111111111111111111111111111111111111112");
  for (const payTo of unfit) {
    expect(await refusal(createProduct(deps, owner, { ...pass, payTo }))).toEqual(["VALIDATION_ERROR", "payTo", true]);
    expect(await refusal(updateProduct(deps, owner, product.productId, { payTo }))).toEqual(["VALIDATION_ERROR", "payTo", true]);
  }
  expect((await getProduct(deps, owner, product.productId)).payTo).toBe(owner);
  // A wallet, funded or not yet, is fine.
  expect((await createProduct(deps, owner, { ...pass, payTo: holder })).payTo).toBe(holder);
  expect((await updateProduct(deps, owner, product.productId, { payTo: newWallet().address })).payTo).not.toBe(owner);
});

test("edits of different fields at once all land, each answer and event as written", async () => {
  const { deps } = await testDeps();
  const owner = newWallet().address;
  const product = await createProduct(deps, owner, { title: "Pass", description: "", type: "access", price: "1" });
  const payTo = newWallet().address;
  const answers = await Promise.all([
    updateProduct(deps, owner, product.productId, { title: "Day pass" }),
    updateProduct(deps, owner, product.productId, { payTo }),
    updateProduct(deps, owner, product.productId, { description: "One day" }),
    updateProduct(deps, owner, product.productId, { price: "2.5" }),
    updateProduct(deps, owner, product.productId, { accessDays: 1 }),
  ]);
  const final = await getProduct(deps, owner, product.productId);
  expect(final).toMatchObject({ title: "Day pass", payTo, description: "One day", price: "2.5", accessDays: 1 });
  // Each answer is the product as its own write left it: times strictly increasing, the last one the product's.
  const times = answers.map((a) => a.updatedAt).sort();
  expect(new Set(times).size).toBe(answers.length);
  expect(times.at(-1)).toBe(final.updatedAt);
  const events = deps.db.sqlite.query("SELECT id FROM outbox_events WHERE type = 'product.updated' ORDER BY rowid").all() as { id: string }[];
  expect(events).toHaveLength(answers.length);
  expect(JSON.parse((await eventBody(deps, events.at(-1)!.id))!)).toMatchObject({ productTitle: "Day pass", price: "2.5", timestamp: final.updatedAt });
});

test("an edit that sends payTo back unchanged does not ask the chain about it (the dashboard's form always sends it)", async () => {
  const { deps } = await testDeps();
  const owner = newWallet().address;
  const payTo = newWallet().address;
  const product = await createProduct(deps, owner, { title: "Pass", description: "", type: "access", price: "1", payTo });
  let asked = 0;
  const counting = { ...deps, ledger: { ...deps.ledger, programAccount: (a: string) => (asked++, deps.ledger.programAccount(a)) } };
  expect((await updateProduct(counting, owner, product.productId, { title: "Day pass", payTo })).title).toBe("Day pass");
  expect(asked).toBe(0);
  await updateProduct(counting, owner, product.productId, { payTo: newWallet().address });
  expect(asked).toBe(1);
});

test("an archive in the same millisecond as the product's last change answers and tells the time the row has", async () => {
  const { deps } = await testDeps();
  const owner = newWallet().address;
  const product = await createProduct(deps, owner, { title: "Pass", description: "", type: "access", price: "1" });
  const archived = await archiveProduct(deps, owner, product.productId); // the test clock has not moved
  expect(archived.updatedAt).not.toBe(product.updatedAt);
  expect(archived.updatedAt).toBe((await getProduct(deps, owner, product.productId)).updatedAt);
  const [event] = deps.db.sqlite.query("SELECT id FROM outbox_events WHERE type = 'product.archived'").all() as { id: string }[];
  expect(JSON.parse((await eventBody(deps, event!.id))!).timestamp).toBe(archived.updatedAt);
});

test("each field's rule refuses as VALIDATION_ERROR naming the field, in a new product and in an edit; its limits pass", async () => {
  const { deps } = await testDeps();
  const owner = newWallet().address;
  const base = { title: "Pro", description: "", type: "feature_unlock" as const, price: "1", featureIds: ["export"] };
  const product = await createProduct(deps, owner, base);
  const fieldOf = async (p: Promise<unknown>) => {
    const err = (await p.then(() => null, (e: unknown) => e)) as { code?: string; extra?: { details?: { fields?: { field: string }[] } } } | null;
    return err === null ? "accepted" : `${err.code}:${err.extra?.details?.fields?.[0]?.field}`;
  };
  const ids = (n: number) => Array.from({ length: n }, (_, i) => `f${i}`);
  const refused: [string, Record<string, unknown>][] = [
    ["featureIds", { featureIds: ids(51) }],
    ["featureIds", { featureIds: ["has space"] }],
    ["featureIds", { featureIds: ["<b>x</b>"] }],
    ["featureIds", { featureIds: ["-starts-with-a-dash"] }],
    ["featureIds", { featureIds: ["a".repeat(65)] }],
    ["featureIds", { featureIds: [] }], // a feature unlock unlocks at least one
    ["redirectOrigins", { redirectOrigins: Array.from({ length: 11 }, (_, i) => `https://a${i}.example`) }],
    ["redirectOrigins", { redirectOrigins: ["not a url"] }],
    ["redirectOrigins", { redirectOrigins: ["ftp://files.example"] }],
    ["redirectOrigins", { redirectOrigins: ["https://shop.example/path"] }],
    ["accessDays", { accessDays: 0 }],
    ["accessDays", { accessDays: 1.5 }],
    ["accessDays", { accessDays: 36_501 }],
    ["title", { title: "" }],
    ["title", { title: "T".repeat(201) }],
    ["description", { description: "D".repeat(2001) }],
  ];
  for (const [field, patch] of refused) {
    expect([field, patch, await fieldOf(createProduct(deps, owner, { ...base, ...patch } as never))]).toEqual([field, patch, `VALIDATION_ERROR:${field}`]);
    expect([field, patch, await fieldOf(updateProduct(deps, owner, product.productId, patch as never))]).toEqual([field, patch, `VALIDATION_ERROR:${field}`]);
  }
  expect(await fieldOf(createProduct(deps, owner, { ...base, type: "subscription" } as never))).toBe("VALIDATION_ERROR:type");
  expect(await fieldOf(updateProduct(deps, owner, product.productId, { type: "access" }))).toBe("VALIDATION_ERROR:type");
  expect(await getProduct(deps, owner, product.productId)).toMatchObject({ title: "Pro", featureIds: ["export"], accessDays: null, redirectOrigins: [] }); // no refused edit landed
  // At their limits they pass.
  const limits = {
    featureIds: [...ids(49), `a${"b".repeat(59)}:.-_`],
    redirectOrigins: Array.from({ length: 10 }, (_, i) => `https://a${i}.example${i === 0 ? ":8443" : ""}`),
    accessDays: 36_500,
    title: "T".repeat(200),
    description: "D".repeat(2000),
  };
  expect(await fieldOf(createProduct(deps, owner, { ...base, ...limits }))).toBe("accepted");
  expect(await updateProduct(deps, owner, product.productId, { ...limits, redirectOrigins: ["http://localhost:3000/"] })).toMatchObject({ accessDays: 36_500, redirectOrigins: ["http://localhost:3000"] });
});
