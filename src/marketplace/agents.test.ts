// Agents in-process: registration and its checks, the sealed webhook secret, updates with kept and removed
// services, and search (category, maxPrice, words through FTS5, ordering, paging, hostile queries).
import { describe, expect, test } from "bun:test";
import { encodeBase58 } from "../lib/encoding.ts";
import { cryptoRandom } from "../lib/ids.ts";
import { openWebhookSecret } from "../webhooks/endpoints.ts";
import { codeOf } from "../../test/helpers/errors.ts";
import { testDeps } from "../../test/helpers/deps.ts";
import type { Deps } from "../deps.ts";
import { ftsQueryOf, getAgent, MAX_AGENTS_PER_OWNER, ratingOf, registerAgent, searchAgents, updateAgent, type ProfileInput, type ServiceInput } from "./agents.ts";
import * as store from "./store.ts";

const wallet = () => encodeBase58(cryptoRandom(32));

function register(deps: Deps, owner: string, profile: Partial<ProfileInput> = {}, services: ServiceInput[] = [], endpoint = "https://agent.example/hook") {
  return registerAgent(deps, owner, { endpoint, profile: { name: "Agent", basePrice: "10", ...profile }, services });
}

async function complete(deps: Deps, agentId: string, ratings: (number | null)[]) {
  await deps.db.write(() => {
    for (const r of ratings) store.recordOrderCompletedInWrite(deps.db, agentId, r);
  });
}

describe("registerAgent", () => {
  test(`a wallet owns at most ${MAX_AGENTS_PER_OWNER} agents: one more is INVALID_STATE`, async () => {
    const { deps } = await testDeps();
    const owner = wallet();
    for (let i = 0; i < MAX_AGENTS_PER_OWNER; i++) await register(deps, owner, { name: `Agent ${i}` });
    expect(await codeOf(register(deps, owner, { name: "One more" }))).toBe("INVALID_STATE");
    expect(await codeOf(register(deps, wallet()))).toBe("OK");
  });

  test("an active agent with services, and a whsec_ secret of 32 bytes that is stored sealed and opens to the same", async () => {
    const { deps } = await testDeps();
    const owner = wallet();
    const agent = await register(deps, owner, { name: "  Lingua  ", tagline: "Translations", categories: ["Translation", "translation", " Legal "] }, [
      { title: "Page", description: "one page", price: 2.5, deliveryTime: 60 },
    ]);
    expect(agent.agentId).toMatch(/^agt_/);
    expect(agent.services[0]!.serviceId).toMatch(/^svc_/);
    expect(agent).toMatchObject({
      ownerWallet: owner,
      endpoint: "https://agent.example/hook",
      endpointGone: false,
      name: "Lingua",
      categories: ["Translation", "Legal"],
      basePrice: "10",
      currency: "USDC",
      services: [{ title: "Page", description: "one page", price: "2.5", deliveryTime: 60 }],
      status: "active",
      rating: null,
      ratingCount: 0,
      completedOrders: 0,
    });
    expect(agent.webhookSecret).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/);
    expect(Buffer.from(agent.webhookSecret.slice(6), "base64")).toHaveLength(32);
    const row = (await store.findAgent(deps.db, agent.agentId))!;
    expect(Buffer.from(row.secretCiphertext).includes(Buffer.from(agent.webhookSecret.slice(6), "base64"))).toBe(false);
    expect(openWebhookSecret(deps, row.id, row.secretIv, row.secretCiphertext)).toBe(agent.webhookSecret);
    // Never shown again, not even to the owner.
    const again = await getAgent(deps, agent.agentId, owner);
    expect(JSON.stringify(again)).not.toContain("whsec_");
    // A stranger sees neither the endpoint nor the secret.
    expect(await getAgent(deps, agent.agentId, wallet())).not.toHaveProperty("endpoint");
  });

  test("bad endpoints, profiles and services are VALIDATION_ERROR naming the field", async () => {
    const { deps } = await testDeps();
    const owner = wallet();
    const field = async (p: Promise<unknown>) => {
      try {
        await p;
        return "OK";
      } catch (e) {
        return `${(e as { code: string }).code} ${((e as { extra: { details?: { fields: { field: string }[] } } }).extra.details?.fields ?? [])[0]?.field}`;
      }
    };
    for (const endpoint of ["ftp://agent.example/x", "not a url", "https://user:pw@agent.example/", "https://agent.example/#x", ""]) {
      expect(await field(register(deps, owner, {}, [], endpoint))).toBe("VALIDATION_ERROR endpoint");
    }
    expect(await field(register(deps, owner, {}, [], "http://agent.example/hook"))).toBe("OK"); // http off mainnet
    expect(await field(register(deps, owner, { name: "   " }))).toBe("VALIDATION_ERROR profile.name");
    expect(await field(register(deps, owner, { basePrice: "0" }))).toBe("VALIDATION_ERROR profile.basePrice");
    expect(await field(register(deps, owner, { basePrice: "1.0000001" }))).toBe("VALIDATION_ERROR profile.basePrice");
    expect(await field(register(deps, owner, { basePrice: -1 }))).toBe("VALIDATION_ERROR profile.basePrice");
    expect(await field(register(deps, owner, { categories: Array.from({ length: 11 }, (_, i) => `c${i}`) }))).toBe("VALIDATION_ERROR profile.categories");
    expect(await field(register(deps, owner, { categories: [" "] }))).toBe("VALIDATION_ERROR profile.categories");
    expect(await field(register(deps, owner, {}, [{ title: "x", price: 1, deliveryTime: 0 }]))).toBe("VALIDATION_ERROR services.0.deliveryTime");
    expect(await field(register(deps, owner, {}, [{ title: "x", price: 1, deliveryTime: 1 }, { title: "", price: 1, deliveryTime: 1 }]))).toBe(
      "VALIDATION_ERROR services.1.title",
    );
    expect(await field(register(deps, owner, {}, [{ serviceId: "svc_x", title: "x", price: 1, deliveryTime: 1 }]))).toBe("VALIDATION_ERROR services.0.serviceId");
  });

  test("https only on mainnet", async () => {
    const { deps } = await testDeps();
    const mainnet = { ...deps, config: { ...deps.config, network: "mainnet" as const } };
    expect(await codeOf(register(mainnet, wallet(), {}, [], "http://agent.example/hook"))).toBe("VALIDATION_ERROR");
  });
});

describe("prices past 2^53 base units", () => {
  test("base and service prices up to 2^63-1 base units are kept exactly and searched exactly; one unit more is refused", async () => {
    const { deps } = await testDeps();
    const owner = wallet();
    const most = "9223372036854.775807"; // 2^63-1 base units of USDC
    const big = await register(deps, owner, { name: "Big", basePrice: "9007199254.740993" }, [{ title: "All", description: "", price: most, deliveryTime: 60 }]); // 2^53+1
    expect(big).toMatchObject({ basePrice: "9007199254.740993", services: [{ price: most }] });
    const bigger = await register(deps, owner, { name: "Bigger", basePrice: "9007199254.740994" });
    // As numbers, 2^53+1 and 2^53+2 base units compare as one price; here the filter tells them apart.
    const ids = async (maxPrice: string) => (await searchAgents(deps, { maxPrice })).agents.map((a) => a.agentId).sort();
    expect(await ids("9007199254.740993")).toEqual([big.agentId]);
    expect(await ids(most)).toEqual([big.agentId, bigger.agentId].sort());
    const updated = await updateAgent(deps, owner, bigger.agentId, { profile: { basePrice: most } });
    expect(updated).toMatchObject({ basePrice: most });
    expect((await getAgent(deps, big.agentId, owner)).services[0]).toMatchObject({ price: most });
    expect(await codeOf(register(deps, owner, { basePrice: "9223372036854.775808" }))).toBe("VALIDATION_ERROR");
    expect(await codeOf(searchAgents(deps, { maxPrice: "9223372036854.775808" }))).toBe("VALIDATION_ERROR");
  });
});

describe("updateAgent", () => {
  test("profile fields, services kept by id or removed (deleted unless an order names them), status; only by the owner", async () => {
    const { deps, clock } = await testDeps();
    const owner = wallet();
    const agent = await register(deps, owner, { name: "Old name" }, [
      { title: "A", price: 1, deliveryTime: 10 },
      { title: "B", price: 2, deliveryTime: 20 },
    ]);
    const [a, b] = agent.services;
    clock.advance(1000);
    const updated = await updateAgent(deps, owner, agent.agentId, {
      profile: { name: "New name", basePrice: "3.25" },
      services: [
        { serviceId: b!.serviceId, title: "B2", price: "2.5", deliveryTime: 25 },
        { title: "C", price: 3, deliveryTime: 30 },
      ],
      status: "paused",
    });
    expect(updated).toMatchObject({ name: "New name", basePrice: "3.25", status: "paused", tagline: "" });
    expect(updated.services.map((s) => [s.serviceId === b!.serviceId, s.title, s.price])).toEqual([
      [true, "B2", "2.5"],
      [false, "C", "3"],
    ]);
    expect(updated.updatedAt > updated.createdAt).toBe(true);
    expect(await store.findService(deps.db, agent.agentId, a!.serviceId)).toBeNull(); // removed, and no order names it
    expect(await codeOf(updateAgent(deps, wallet(), agent.agentId, { status: "active" }))).toBe("NOT_FOUND");
    expect(await codeOf(updateAgent(deps, owner, "agt_nope", { status: "active" }))).toBe("NOT_FOUND");
    // A service id of another agent cannot be taken over.
    const other = await register(deps, owner, {}, [{ title: "X", price: 1, deliveryTime: 1 }]);
    expect(await codeOf(updateAgent(deps, owner, agent.agentId, { services: [{ serviceId: other.services[0]!.serviceId, title: "X", price: 1, deliveryTime: 1 }] }))).toBe(
      "VALIDATION_ERROR",
    );
  });

  test("a serviceId listed twice in one update is VALIDATION_ERROR, not two services folded into one", async () => {
    const { deps } = await testDeps();
    const owner = wallet();
    const agent = await register(deps, owner, {}, [{ title: "A", price: 1, deliveryTime: 10 }]);
    const id = agent.services[0]!.serviceId;
    const twice = updateAgent(deps, owner, agent.agentId, {
      services: [
        { serviceId: id, title: "A1", price: 1, deliveryTime: 10 },
        { serviceId: id, title: "A2", price: 2, deliveryTime: 20 },
      ],
    });
    expect(await codeOf(twice)).toBe("VALIDATION_ERROR");
    // Nothing was written: the agent keeps its one service as it was.
    expect((await getAgent(deps, agent.agentId)).services.map((s) => [s.serviceId, s.title])).toEqual([[id, "A"]]);
  });

  test("the search index follows a change of name", async () => {
    const { deps } = await testDeps();
    const owner = wallet();
    const agent = await register(deps, owner, { name: "Zebra helper" });
    expect((await searchAgents(deps, { query: "zebra" })).total).toBe(1);
    await updateAgent(deps, owner, agent.agentId, { profile: { name: "Giraffe helper" } });
    expect((await searchAgents(deps, { query: "zebra" })).total).toBe(0);
    expect((await searchAgents(deps, { query: "giraffe" })).agents.map((x) => x.agentId)).toEqual([agent.agentId]);
  });
});

describe("ratings", () => {
  test("average to one decimal, rounded half up, as the database orders by it", async () => {
    expect(ratingOf(0, 0)).toBeNull();
    expect(ratingOf(9, 2)).toBe(4.5);
    expect(ratingOf(13, 3)).toBe(4.3);
    expect(ratingOf(17, 4)).toBe(4.3); // 4.25 → 4.3
    expect(ratingOf(14, 3)).toBe(4.7);
    const { deps } = await testDeps();
    const agent = await register(deps, wallet());
    await complete(deps, agent.agentId, [5, 4, null, 4, 4]);
    expect(await getAgent(deps, agent.agentId)).toMatchObject({ rating: 4.3, ratingCount: 4, completedOrders: 5 });
    await expect(deps.db.write(() => store.recordOrderCompletedInWrite(deps.db, agent.agentId, 6))).rejects.toThrow(RangeError);
    await expect(deps.db.write(() => store.recordOrderCompletedInWrite(deps.db, "agt_nope", 5))).rejects.toThrow();
  });
});

describe("searchAgents", () => {
  test("filters, ordering by rating then completed orders, paging with total", async () => {
    const { deps, clock } = await testDeps();
    const owner = wallet();
    const make = async (name: string, profile: Partial<ProfileInput>) => {
      clock.advance(1);
      return (await register(deps, owner, { name, ...profile })).agentId;
    };
    const lingua = await make("Lingua", { tagline: "German legal translation", categories: ["Translation"], basePrice: "20" });
    const cheap = await make("Cheap words", { description: "Fast translation of short texts", categories: ["translation", "Writing"], basePrice: "5" });
    const coder = await make("Coder", { description: "TypeScript reviews", categories: ["Code"], basePrice: "50" });
    const unrated = await make("Newcomer", { description: "translations too", categories: ["Translation"], basePrice: "1" });
    const paused = await make("Paused translator", { categories: ["Translation"], basePrice: "1" });
    await updateAgent(deps, owner, paused, { status: "paused" });
    await complete(deps, lingua, [5, 4]); // 4.5, 2 orders
    await complete(deps, cheap, [5, 4, null, null]); // 4.5, 4 orders
    await complete(deps, coder, [5]); // 5.0, 1 order

    const ids = async (input: Parameters<typeof searchAgents>[1]) => (await searchAgents(deps, input)).agents.map((a) => a.agentId);
    expect(await ids({})).toEqual([coder, cheap, lingua, unrated]);
    expect(await ids({ category: "TRANSLATION" })).toEqual([cheap, lingua, unrated]);
    expect(await ids({ category: "transl" })).toEqual([]); // exact
    expect(await ids({ category: "writing" })).toEqual([cheap]);
    expect(await ids({ maxPrice: "20" })).toEqual([cheap, lingua, unrated]);
    expect(await ids({ maxPrice: 4.99 })).toEqual([unrated]);
    expect(await ids({ query: "Translation" })).toEqual([cheap, lingua, unrated]); // word beginnings: "translations" too
    expect(await ids({ query: "fast" })).toEqual([cheap]);
    expect(await ids({ query: "typescript REVIEW" })).toEqual([coder]);
    expect(await ids({ query: "german translation" })).toEqual([lingua]); // every word
    expect(await ids({ query: "german code" })).toEqual([]);
    expect(await ids({ query: "translation", category: "translation", maxPrice: "10" })).toEqual([cheap, unrated]);
    expect(await ids({ query: "short", category: "writing", maxPrice: "5" })).toEqual([cheap]);

    const page = await searchAgents(deps, { limit: 2, offset: 1 });
    expect(page).toMatchObject({ total: 4, limit: 2, offset: 1 });
    expect(page.agents.map((a) => a.agentId)).toEqual([cheap, lingua]);
    expect((await searchAgents(deps, { offset: 10 })).agents).toEqual([]);
    expect(page.agents[0]).not.toHaveProperty("endpoint");
    expect(page.agents[0]).toMatchObject({ rating: 4.5, ratingCount: 2, completedOrders: 4 });

    for (const bad of [{ limit: 0 }, { limit: 101 }, { offset: -1 }, { maxPrice: "0" }, { maxPrice: "abc" }]) {
      expect(await codeOf(searchAgents(deps, bad))).toBe("VALIDATION_ERROR");
    }
  });

  test("a word ending in three letters or more is a prefix; a shorter one matches only itself (a prefix of one letter matches nearly every agent)", async () => {
    expect(ftsQueryOf("a bc def trans-l ai.")).toBe('"a" "bc" "def"* "trans-l" "ai."');
    expect(ftsQueryOf("\u{1F600}ab éta")).toBe('"\u{1F600}ab" "éta"*');
    // Letters SQLite's tokenizer reads as separators do not make a short word long (U+19B0: a letter to JavaScript).
    expect(ftsQueryOf("a\u19b0\u19b0\u19b0 b\u1cf2\u1cf2")).toBe('"a\u19b0\u19b0\u19b0" "b\u1cf2\u1cf2"');
    // Written without spaces, two characters of Han, kana or Hangul are a word, and a prefix.
    expect(ftsQueryOf("翻訳 日 번역")).toBe('"翻訳"* "日" "번역"*');
    const { deps } = await testDeps();
    const agent = await register(deps, wallet(), { name: "AI translator", description: "translates documents" });
    for (const query of ["ai", "AI", "tra", "translat", "ai transl"]) {
      expect({ query, found: (await searchAgents(deps, { query })).agents.map((a) => a.agentId) }).toEqual({ query, found: [agent.agentId] });
    }
    for (const query of ["a", "t", "tr", "a b c d", "a\u19b0\u19b0\u19b0"]) expect({ query, total: (await searchAgents(deps, { query })).total }).toEqual({ query, total: 0 });
    const japanese = await register(deps, wallet(), { name: "翻訳エージェント", description: "日本語の文書を翻訳します" });
    for (const query of ["翻訳", "日本", "翻訳エ"]) {
      expect({ query, found: (await searchAgents(deps, { query })).agents.map((a) => a.agentId) }).toEqual({ query, found: [japanese.agentId] });
    }
  });

  test("a query is cut at 200 characters as the tool's schema counts them: an emoji is one", () => {
    // 150 emoji (300 UTF-16 units) and a word: 155 characters, all of them searched.
    expect(ftsQueryOf(`${"\u{1F600}".repeat(150)} zqxw`)).toBe('"zqxw"*');
    expect(ftsQueryOf(`${"x".repeat(199)} zqxw`)).toBe(`"${"x".repeat(199)}"*`); // the word is past the 200th
  });

  test("FTS syntax in a query is text, never an operator or an error", async () => {
    const { deps } = await testDeps();
    const agent = await register(deps, wallet(), { name: 'The "quoted" AND NEAR agent', description: "col:umn * ^caret" });
    expect(ftsQueryOf('a"b  OR c')).toBe('"a""b" "OR" "c"');
    expect(ftsQueryOf("  -- * ( ) ")).toBeNull();
    for (const query of ['"', '""', "AND", "OR NOT", "NEAR(a b)", "name:agent", "*", "^caret", "col:umn", "(", "a)", "'", "quoted\"", "-", "\u0000"]) {
      const result = await searchAgents(deps, { query });
      expect(result.total).toBeGreaterThanOrEqual(0);
    }
    expect((await searchAgents(deps, { query: '"quoted"' })).agents.map((a) => a.agentId)).toEqual([agent.agentId]);
    expect((await searchAgents(deps, { query: "near and" })).agents.map((a) => a.agentId)).toEqual([agent.agentId]);
    expect((await searchAgents(deps, { query: "col:umn" })).agents.map((a) => a.agentId)).toEqual([agent.agentId]);
    // Only punctuation: no word to look for, so the query does not filter.
    expect((await searchAgents(deps, { query: "--" })).total).toBe(1);
  });
});

test("a control character in any text is VALIDATION_ERROR (a NUL used to reach SQLite's checks: 500); search strips them", async () => {
  const { deps } = await testDeps();
  const owner = encodeBase58(cryptoRandom(32));
  const endpoint = "https://agent.example/hook";
  expect(await codeOf(registerAgent(deps, owner, { endpoint, profile: { name: "\u0000Evil", basePrice: "1" } }))).toBe("VALIDATION_ERROR");
  expect(await codeOf(registerAgent(deps, owner, { endpoint, profile: { name: "Ok", basePrice: "1" }, services: [{ title: "t\u0007", price: 1, deliveryTime: 1 }] }))).toBe("VALIDATION_ERROR");
  const agent = await registerAgent(deps, owner, { endpoint, profile: { name: "Tab\tand\nlines", basePrice: "1" } }); // these are fine
  const { startConversation } = await import("./conversations.ts");
  expect(await codeOf(startConversation(deps, encodeBase58(cryptoRandom(32)), agent.agentId, "\u0000hi"))).toBe("VALIDATION_ERROR");
  expect(await codeOf(searchAgents(deps, { query: "tr\u0000x" }))).toBe("OK");
  expect(ftsQueryOf("tr\u0000x")).toBe('"tr" "x"');
});

describe("search pages", () => {
  test("stop short of limit at about 1 MB of agents; the next page starts where it stopped, and total tells the end", async () => {
    const { deps } = await testDeps();
    const services: ServiceInput[] = Array.from({ length: 20 }, (_, i) => ({ title: `Service ${i}`, description: "s".repeat(2_000), price: 1, deliveryTime: 60 }));
    for (const owner of [wallet(), wallet()]) {
      for (let i = 0; i < 13; i++) await register(deps, owner, { name: `Big ${i}`, description: "d".repeat(4_000) }, services);
    }
    const first = await searchAgents(deps, { limit: 100 });
    expect(first.total).toBe(26);
    expect(first.agents.length).toBeLessThan(26);
    expect(JSON.stringify(first.agents).length).toBeLessThanOrEqual(1_000_000);
    const rest = await searchAgents(deps, { limit: 100, offset: first.agents.length });
    const ids = [...first.agents, ...rest.agents].map((a) => a.agentId);
    expect(new Set(ids).size).toBe(26);
    // A page holds one agent at least, however large.
    expect((await searchAgents(deps, { limit: 1 })).agents).toHaveLength(1);
  });
});

test("provider_update counts against its owner's writes (120 a minute): one more is RATE_LIMITED, a minute later it goes through", async () => {
  const { deps, clock } = await testDeps({ AUTH_RATE_LIMIT: "on" });
  const { createToolRegistry } = await import("../mcp/tools.ts");
  const registry = createToolRegistry(deps);
  const owner = wallet();
  const { agentId } = await register(deps, owner);
  const ctx = {
    deps,
    caller: { kind: "wallet" as const, walletAddress: owner, sessionId: "s", jti: "j", token: null, issuedAtS: 0, expiresAtS: 2_000_000_000, source: "binding" as const },
    session: { id: null, bind: async () => undefined, unbind: async () => undefined },
    client: { ip: "192.0.2.1", userAgent: "t" },
  };
  const update = (i: number) => registry.call(ctx, "provider_update", { agentId, profile: { tagline: `t${i}` } });
  for (let i = 0; i < 120; i++) expect((await update(i)).success).toBe(true);
  expect(await update(120)).toMatchObject({ success: false, code: "RATE_LIMITED" });
  expect((await getAgent(deps, agentId, owner)).tagline).toBe("t119"); // the refused one changed nothing
  clock.advance(60_000);
  expect((await update(121)).success).toBe(true);
});
