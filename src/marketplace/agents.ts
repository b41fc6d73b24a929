// Provider agents (marketplace.md "Records", "Search"): register with a sealed webhook secret, update,
// read, and search by category, price and words through the full-text index.
import type { Deps } from "../deps.ts";
import { headWithin } from "../lib/fit.ts";
import { AppError, amountField, invalidField, textField, requirePage } from "../errors.ts";
import { characters, firstCharacters } from "../lib/text.ts";
import { formatAmount } from "../lib/amounts.ts";
import { toIso } from "../lib/clock.ts";
import { newId } from "../lib/ids.ts";
import type { TokenInfo } from "../ledger/ledger.ts";
import { checkEndpointUrl, sealWebhookSecret } from "../webhooks/endpoints.ts";
import { formatWebhookSecret, WEBHOOK_SECRET_BYTES } from "../webhooks/signing.ts";
import * as store from "./store.ts";

export const AGENT_LIMITS = {
  name: 100,
  tagline: 200,
  description: 4000,
  categories: 10,
  categoryChars: 50,
  services: 20,
  serviceTitle: 200,
  serviceDescription: 2000,
  /** minutes: one year */
  deliveryTime: 525_600,
} as const;
/** A wallet may own several agents (marketplace.md), up to this many. */
export const MAX_AGENTS_PER_OWNER = 20;
export const SEARCH_PAGE = { default: 20, max: 100 } as const;
/** Words of a search query used, and characters of the query read. */
export const SEARCH_QUERY = { words: 12, chars: 200 } as const;

export type AgentService = { serviceId: string; title: string; description: string; price: string; deliveryTime: number };

/** What anyone signed in sees of an agent. */
export type Agent = {
  agentId: string;
  ownerWallet: string;
  name: string;
  tagline: string;
  description: string;
  categories: string[];
  /** decimal string, USDC */
  basePrice: string;
  currency: "USDC";
  services: AgentService[];
  status: store.AgentStatus;
  /** average of the ratings, 1 decimal; null until the first rated order */
  rating: number | null;
  ratingCount: number;
  completedOrders: number;
  createdAt: string;
  updatedAt: string;
};

/** What the owner sees: also the endpoint, and whether it answered `410 Gone` (notifications stopped). */
export type OwnedAgent = Agent & { endpoint: string; endpointGone: boolean };

export type ProfileInput = {
  name?: string | undefined;
  tagline?: string | undefined;
  description?: string | undefined;
  categories?: string[] | undefined;
  basePrice?: string | number | undefined;
};

export type ServiceInput = {
  /** update only: keep this existing service's id */
  serviceId?: string | undefined;
  title: string;
  description?: string | undefined;
  price: string | number;
  /** minutes */
  deliveryTime: number;
};

const notFound = () => new AppError("NOT_FOUND", "no such agent");

/** USDC as the ledger of this network knows it (its decimals price every agent and service). */
export async function usdcToken(deps: Deps): Promise<TokenInfo> {
  const token = (await deps.ledger.tokens()).find((t) => t.key === "usdc");
  if (token === undefined) throw new AppError("NOT_SUPPORTED", "USDC is not available on this network");
  return token;
}

/** Average in tenths rounded half up, as the database's rating_tenths column computes it; null while unrated. */
export function ratingOf(ratingSum: number, ratingCount: number): number | null {
  if (ratingCount === 0) return null;
  return Math.floor((ratingSum * 20 + ratingCount) / (ratingCount * 2)) / 10;
}

const checkText = textField;

/** USDC base units (amountField's rules), and required. */
function checkPrice(value: string | number | undefined, field: string, usdc: TokenInfo): bigint {
  if (value === undefined) throw invalidField(field, "required");
  return amountField(value, usdc.decimals, field);
}

/** Trimmed, non-empty, deduplicated ignoring case (the first spelling is kept); and their lower-cased keys. */
function checkCategories(categories: string[]): { display: string[]; keys: string[] } {
  if (categories.length > AGENT_LIMITS.categories) throw invalidField("profile.categories", `at most ${AGENT_LIMITS.categories}`);
  const display: string[] = [];
  const keys: string[] = [];
  for (const raw of categories) {
    const category = raw.trim();
    if (category.length === 0 || characters(category) > AGENT_LIMITS.categoryChars) {
      throw invalidField("profile.categories", `each category is 1 to ${AGENT_LIMITS.categoryChars} characters`);
    }
    textField(category, "profile.categories", AGENT_LIMITS.categoryChars, true); // no control characters
    const key = category.toLowerCase();
    if (keys.includes(key)) continue;
    keys.push(key);
    display.push(category);
  }
  return { display, keys };
}

function checkServices(
  deps: Deps,
  services: ServiceInput[],
  usdc: TokenInfo,
  current: readonly store.ServiceRow[],
): store.ServiceWrite[] {
  if (services.length > AGENT_LIMITS.services) throw invalidField("services", `at most ${AGENT_LIMITS.services}`);
  const seen = new Set<string>();
  return services.map((s, i) => {
    const field = `services.${i}`;
    let id: string;
    if (s.serviceId !== undefined) {
      if (!current.some((c) => c.id === s.serviceId) || seen.has(s.serviceId)) {
        throw invalidField(`${field}.serviceId`, "not one of this agent's services (leave it out to add a new one)");
      }
      id = s.serviceId;
    } else {
      id = newId("svc", deps.random);
    }
    seen.add(id);
    if (!Number.isInteger(s.deliveryTime) || s.deliveryTime < 1 || s.deliveryTime > AGENT_LIMITS.deliveryTime) {
      throw invalidField(`${field}.deliveryTime`, `whole minutes, 1 to ${AGENT_LIMITS.deliveryTime}`);
    }
    return {
      id,
      title: checkText(s.title, `${field}.title`, AGENT_LIMITS.serviceTitle, true),
      description: checkText(s.description, `${field}.description`, AGENT_LIMITS.serviceDescription, false),
      price: checkPrice(s.price, `${field}.price`, usdc),
      deliveryTimeMin: s.deliveryTime,
    };
  });
}

function serviceView(row: store.ServiceRow, usdc: TokenInfo): AgentService {
  return { serviceId: row.id, title: row.title, description: row.description, price: formatAmount(row.price, usdc.decimals), deliveryTime: row.deliveryTimeMin };
}

function publicView(row: store.AgentRow, services: readonly store.ServiceRow[], usdc: TokenInfo): Agent {
  return {
    agentId: row.id,
    ownerWallet: row.ownerWallet,
    name: row.name,
    tagline: row.tagline,
    description: row.description,
    categories: row.categories,
    basePrice: formatAmount(row.basePrice, usdc.decimals),
    currency: "USDC",
    services: services.filter((s) => s.agentId === row.id).map((s) => serviceView(s, usdc)),
    status: row.status,
    rating: ratingOf(row.ratingSum, row.ratingCount),
    ratingCount: row.ratingCount,
    completedOrders: row.completedOrders,
    createdAt: toIso(row.createdAt),
    updatedAt: toIso(row.updatedAt),
  };
}

async function ownedView(deps: Deps, row: store.AgentRow): Promise<OwnedAgent> {
  const [usdc, services] = await Promise.all([usdcToken(deps), store.listServices(deps.db, [row.id])]);
  return { ...publicView(row, services, usdc), endpoint: row.endpoint, endpointGone: row.endpointGoneAt !== null };
}

/**
 * provider_register: a new active agent owned by `ownerWallet`. The webhookSecret (`whsec_` + base64 of
 * 32 random bytes) that signs its notifications is returned here only; it is stored sealed.
 */
export async function registerAgent(
  deps: Deps,
  ownerWallet: string,
  input: { endpoint: string; profile: ProfileInput; services?: ServiceInput[] | undefined },
): Promise<OwnedAgent & { webhookSecret: string }> {
  const usdc = await usdcToken(deps);
  const endpoint = checkEndpointUrl(deps, input.endpoint, "endpoint");
  const categories = checkCategories(input.profile.categories ?? []);
  const id = newId("agt", deps.random);
  const row: Omit<store.NewAgent, "secretIv" | "secretCiphertext"> = {
    id,
    ownerWallet,
    endpoint,
    name: checkText(input.profile.name, "profile.name", AGENT_LIMITS.name, true),
    tagline: checkText(input.profile.tagline, "profile.tagline", AGENT_LIMITS.tagline, false),
    description: checkText(input.profile.description, "profile.description", AGENT_LIMITS.description, false),
    categories: categories.display,
    basePrice: checkPrice(input.profile.basePrice, "profile.basePrice", usdc),
    status: "active",
    createdAt: deps.clock.now(),
  };
  const services = checkServices(deps, input.services ?? [], usdc, []);
  const secretBytes = deps.random(WEBHOOK_SECRET_BYTES);
  try {
    const sealed = sealWebhookSecret(deps, id, secretBytes);
    if (!(await store.insertAgent(deps.db, { ...row, ...sealed }, categories.keys, services, MAX_AGENTS_PER_OWNER))) {
      throw new AppError("INVALID_STATE", `a wallet can own at most ${MAX_AGENTS_PER_OWNER} agents`);
    }
    deps.log.info("marketplace agent registered", { agentId: id, ownerWallet });
    const agent = await store.findAgent(deps.db, id);
    return { ...(await ownedView(deps, agent!)), webhookSecret: formatWebhookSecret(secretBytes) };
  } finally {
    secretBytes.fill(0);
  }
}

/** The agent if `wallet` owns it; anyone else's, or an unknown id, is NOT_FOUND. */
export async function ownedAgent(deps: Deps, wallet: string, agentId: string): Promise<store.AgentRow> {
  const row = await store.findAgent(deps.db, agentId);
  if (row === null || row.ownerWallet !== wallet) throw notFound();
  return row;
}

/**
 * provider_update: any of profile fields, services (the whole new list; an item with a serviceId keeps
 * that service's id), endpoint, status. Not the owner's: NOT_FOUND.
 */
export async function updateAgent(
  deps: Deps,
  ownerWallet: string,
  agentId: string,
  patch: {
    profile?: ProfileInput | undefined;
    services?: ServiceInput[] | undefined;
    endpoint?: string | undefined;
    status?: store.AgentStatus | undefined;
  },
): Promise<OwnedAgent> {
  await ownedAgent(deps, ownerWallet, agentId);
  const usdc = await usdcToken(deps);
  const fields: store.AgentPatch = {};
  const profile = patch.profile ?? {};
  if (patch.endpoint !== undefined) fields.endpoint = checkEndpointUrl(deps, patch.endpoint, "endpoint");
  if (profile.name !== undefined) fields.name = checkText(profile.name, "profile.name", AGENT_LIMITS.name, true);
  if (profile.tagline !== undefined) fields.tagline = checkText(profile.tagline, "profile.tagline", AGENT_LIMITS.tagline, false);
  if (profile.description !== undefined) fields.description = checkText(profile.description, "profile.description", AGENT_LIMITS.description, false);
  if (profile.categories !== undefined) fields.categories = checkCategories(profile.categories);
  if (profile.basePrice !== undefined) fields.basePrice = checkPrice(profile.basePrice, "profile.basePrice", usdc);
  if (patch.status !== undefined) fields.status = patch.status;
  if (patch.services !== undefined) fields.services = checkServices(deps, patch.services, usdc, await store.listServices(deps.db, [agentId]));
  const row = await store.updateAgent(deps.db, ownerWallet, agentId, fields, deps.clock.now());
  if (row === null) throw notFound();
  deps.log.info("marketplace agent updated", { agentId, ownerWallet, fields: Object.keys(fields) });
  return ownedView(deps, row);
}

/** consumer_get_agent: any agent, paused ones included (status says so); its owner also sees the endpoint. */
export async function getAgent(deps: Deps, agentId: string, viewerWallet: string | null = null): Promise<Agent | OwnedAgent> {
  const row = await store.findAgent(deps.db, agentId);
  if (row === null) throw notFound();
  if (row.ownerWallet === viewerWallet) return ownedView(deps, row);
  const [usdc, services] = await Promise.all([usdcToken(deps), store.listServices(deps.db, [row.id])]);
  return publicView(row, services, usdc);
}

/**
 * An FTS5 MATCH expression from a user's words: each word becomes a quoted FTS string (quotes doubled), so
 * no operator, column filter or syntax error can come from the input, and all words must match. A word
 * ending in at least PREFIX_MIN letters or digits matches as a prefix (`*`); a shorter one only as itself:
 * the prefix "a"* expands to every indexed word beginning with a, and a query of a dozen such words cost
 * time in proportion to every agent listed (1.3 s at 10,000). Words without a letter or digit are dropped;
 * null when none is left.
 */
export function ftsQueryOf(query: string): string | null {
  const words = firstCharacters(query, SEARCH_QUERY.chars) // as the tool's schema counts them: an emoji is one
    .replace(/[\u0000-\u001f\u007f]/g, " ") // a NUL inside a quoted word ends FTS5's string
    .split(/\s+/)
    .filter((w) => /[\p{L}\p{N}]/u.test(w))
    .slice(0, SEARCH_QUERY.words);
  if (words.length === 0) return null;
  return words.map((w) => `"${w.replaceAll('"', '""')}"${searchedAsPrefix(w) ? "*" : ""}`).join(" ");
}

/**
 * Whether a word's last letters make a prefix that is long enough: three letters or digits of Latin, Greek
 * or Cyrillic, or two of Han, kana or Hangul (written without spaces, a two-character word is common there,
 * and each is a narrow prefix). Only characters of those long-assigned blocks count: the search index's
 * tokenizer (SQLite's unicode61) reads letters by an older Unicode than JavaScript's, and a letter it takes
 * for a separator (U+19B0, say) would otherwise make "a" look long enough to be a prefix.
 */
function searchedAsPrefix(word: string): boolean {
  let narrow = 0;
  let wide = 0;
  for (const c of /[\p{L}\p{N}]*$/u.exec(word)![0]) {
    if (WIDE_LETTER.test(c)) wide++;
    else if (NARROW_LETTER.test(c)) narrow++;
  }
  return narrow + wide >= 3 || wide >= 2;
}

/** ASCII letters and digits, Latin-1 and Latin Extended-A/B letters, Greek and Cyrillic (see searchedAsPrefix). */
const NARROW_LETTER = /^[0-9A-Za-z\u00c0-\u00d6\u00d8-\u00f6\u00f8-\u024f\u0386-\u03ce\u0400-\u0481\u048a-\u04ff]$/u;
/** Han (CJK Unified Ideographs of Unicode 1.1), hiragana, katakana and Hangul syllables. */
const WIDE_LETTER = /^[\u4e00-\u9fa5\u3041-\u3096\u30a1-\u30fa\uac00-\ud7a3]$/u;

export type SearchInput = {
  category?: string | undefined;
  maxPrice?: string | number | undefined;
  query?: string | undefined;
  limit?: number | undefined;
  offset?: number | undefined;
};

/**
 * consumer_search_agents: active agents by category (exact, ignoring case), basePrice ≤ maxPrice (USDC)
 * and words of `query` in name, tagline or description (prefixes match: "transl" finds "translator");
 * best rated first, then most completed orders, then oldest.
 */
export async function searchAgents(deps: Deps, input: SearchInput): Promise<{ agents: Agent[]; total: number; limit: number; offset: number }> {
  const { limit, offset } = requirePage(input, SEARCH_PAGE);
  const usdc = await usdcToken(deps);
  const category = input.category?.trim() ?? "";
  const { rows, total } = await store.searchAgents(deps.db, {
    categoryKey: category === "" ? null : category.toLowerCase(),
    maxBasePrice: input.maxPrice === undefined ? null : checkPrice(input.maxPrice, "maxPrice", usdc),
    match: input.query === undefined ? null : ftsQueryOf(input.query),
    limit,
    offset,
  });
  const services = await store.listServices(deps.db, rows.map((r) => r.id));
  // A page stops short of `limit` at PAGE_MAX_CHARS of agents (lib/fit.ts): one at their size limits is ~50 KB.
  return { agents: headWithin(rows.map((row) => publicView(row, services, usdc))), total, limit, offset };
}
