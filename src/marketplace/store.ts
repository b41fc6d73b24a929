// SQL of the marketplace's agents, their services and search index, conversations and messages.
// Functions named …InWrite run inside a caller's db.write (they never open one themselves); orders call
// them to add system messages and count completed orders in their own writes.
import type { Db } from "../db/open.ts";

// ---------------------------------------------------------------------------------------------------
// Agents

export type AgentStatus = "active" | "paused";

export type AgentRow = {
  id: string;
  ownerWallet: string;
  endpoint: string;
  name: string;
  tagline: string;
  description: string;
  /** as the provider wrote them */
  categories: string[];
  /** USDC base units, up to 2^63-1 (read as text: beyond 2^53 a JS number is not exact) */
  basePrice: bigint;
  status: AgentStatus;
  secretIv: Uint8Array;
  secretCiphertext: Uint8Array;
  ratingSum: number;
  ratingCount: number;
  completedOrders: number;
  /** set by a `410 Gone` answer to a notification; notifications stop until the endpoint or status is changed */
  endpointGoneAt: number | null;
  createdAt: number;
  updatedAt: number;
};

type RawAgent = Omit<AgentRow, "categories" | "basePrice"> & { categories: string; basePrice: string };

const AGENT_COLUMNS = `a.id, a.owner_wallet AS ownerWallet, a.endpoint, a.name, a.tagline, a.description, a.categories,
  CAST(a.base_price AS TEXT) AS basePrice, a.status, a.secret_iv AS secretIv, a.secret_ciphertext AS secretCiphertext,
  a.rating_sum AS ratingSum, a.rating_count AS ratingCount, a.completed_orders AS completedOrders,
  a.endpoint_gone_at AS endpointGoneAt, a.created_at AS createdAt, a.updated_at AS updatedAt`;

function toAgent(raw: RawAgent | null): AgentRow | null {
  return raw === null ? null : { ...raw, basePrice: BigInt(raw.basePrice), categories: JSON.parse(raw.categories) as string[] };
}

export type ServiceRow = {
  id: string;
  agentId: string;
  position: number;
  title: string;
  description: string;
  /** USDC base units, up to 2^63-1 */
  price: bigint;
  deliveryTimeMin: number;
  removedAt: number | null;
  createdAt: number;
  updatedAt: number;
};

type RawService = Omit<ServiceRow, "price"> & { price: string };
const toService = (raw: RawService): ServiceRow => ({ ...raw, price: BigInt(raw.price) });

const SERVICE_COLUMNS = `id, agent_id AS agentId, position, title, description, CAST(price AS TEXT) AS price, delivery_time_min AS deliveryTimeMin,
  removed_at AS removedAt, created_at AS createdAt, updated_at AS updatedAt`;

/** A service as an insert or update gives it: `id` is a new `svc_` id or one of the agent's current ones. */
export type ServiceWrite = { id: string; title: string; description: string; price: bigint; deliveryTimeMin: number };

export type NewAgent = Omit<AgentRow, "ratingSum" | "ratingCount" | "completedOrders" | "endpointGoneAt" | "updatedAt">;

function writeCategoriesInWrite(db: Db, agentId: string, categoryKeys: readonly string[]): void {
  db.sqlite.query("DELETE FROM market_agent_categories WHERE agent_id = ?").run(agentId);
  const insert = db.sqlite.query("INSERT INTO market_agent_categories (category_key, agent_id) VALUES (?, ?) ON CONFLICT DO NOTHING");
  for (const key of categoryKeys) insert.run(key, agentId);
}

/**
 * Makes `services` the agent's list, in that order: listed ids are updated, new ones inserted, the rest
 * marked removed (and deleted unless an order names them).
 */
function writeServicesInWrite(db: Db, agentId: string, services: readonly ServiceWrite[], now: number): void {
  const keep = services.map((s) => s.id);
  db.sqlite
    .query(
      `UPDATE market_agent_services SET removed_at = ?, updated_at = ?
       WHERE agent_id = ? AND removed_at IS NULL AND id NOT IN (SELECT value FROM json_each(?))`,
    )
    .run(now, now, agentId, JSON.stringify(keep));
  // Removed services no order names are deleted: every update may replace twenty of them, and rows kept
  // for nothing would grow without bound. (Orders name theirs; the provider's orders are found by index.)
  db.sqlite
    .query(
      `DELETE FROM market_agent_services WHERE agent_id = ? AND removed_at IS NOT NULL AND id NOT IN (
         SELECT service_id FROM market_orders
         WHERE provider_wallet = (SELECT owner_wallet FROM market_agents WHERE id = ?) AND service_id IS NOT NULL)`,
    )
    .run(agentId, agentId);
  const upsert = db.sqlite.query(
    `INSERT INTO market_agent_services (id, agent_id, position, title, description, price, delivery_time_min, created_at, updated_at)
     VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
     ON CONFLICT (id) DO UPDATE SET position = excluded.position, title = excluded.title, description = excluded.description,
       price = excluded.price, delivery_time_min = excluded.delivery_time_min, removed_at = NULL, updated_at = excluded.updated_at
     WHERE market_agent_services.agent_id = excluded.agent_id`,
  );
  services.forEach((s, position) => upsert.run(s.id, agentId, position, s.title, s.description, s.price, s.deliveryTimeMin, now, now));
}

/** Inserts the agent with its categories and services unless its owner already has `maxPerOwner`; false when over. */
export function insertAgent(
  db: Db,
  row: NewAgent,
  categoryKeys: readonly string[],
  services: readonly ServiceWrite[],
  maxPerOwner: number,
): Promise<boolean> {
  return db.write(() => {
    const { count } = db.sqlite.query("SELECT COUNT(*) AS count FROM market_agents WHERE owner_wallet = ?").get(row.ownerWallet) as { count: number };
    if (count >= maxPerOwner) return false;
    db.sqlite
      .query(
        `INSERT INTO market_agents (id, owner_wallet, endpoint, name, tagline, description, categories, base_price, status,
           secret_iv, secret_ciphertext, created_at, updated_at)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
      )
      .run(
        row.id,
        row.ownerWallet,
        row.endpoint,
        row.name,
        row.tagline,
        row.description,
        JSON.stringify(row.categories),
        row.basePrice,
        row.status,
        row.secretIv,
        row.secretCiphertext,
        row.createdAt,
        row.createdAt,
      );
    writeCategoriesInWrite(db, row.id, categoryKeys);
    writeServicesInWrite(db, row.id, services, row.createdAt);
    return true;
  });
}

/** Any agent by id, its owner's wallet included (domain code decides who may see what). */
export async function findAgent(db: Db, id: string): Promise<AgentRow | null> {
  return toAgent(db.sqlite.query(`SELECT ${AGENT_COLUMNS} FROM market_agents a WHERE a.id = ?`).get(id) as RawAgent | null);
}

/** The wallet that owns the agent, inside a caller's write; null when there is no such agent. */
export function findAgentOwnerInWrite(db: Db, id: string): string | null {
  const row = db.sqlite.query("SELECT owner_wallet AS owner FROM market_agents WHERE id = ?").get(id) as { owner: string } | null;
  return row?.owner ?? null;
}

export type AgentPatch = {
  endpoint?: string;
  name?: string;
  tagline?: string;
  description?: string;
  categories?: { display: string[]; keys: string[] };
  basePrice?: bigint;
  status?: AgentStatus;
  services?: readonly ServiceWrite[];
};

/**
 * Applies the patch to the owner's agent; null when it is not theirs. A new endpoint or status clears
 * a `410 Gone` mark, so notifications flow again.
 */
export function updateAgent(db: Db, ownerWallet: string, id: string, patch: AgentPatch, now: number): Promise<AgentRow | null> {
  return db.write(() => {
    const clearsGone = patch.endpoint !== undefined || patch.status !== undefined;
    const updated = db.sqlite
      .query(
        `UPDATE market_agents SET endpoint = COALESCE(?, endpoint), name = COALESCE(?, name), tagline = COALESCE(?, tagline),
           description = COALESCE(?, description), categories = COALESCE(?, categories), base_price = COALESCE(?, base_price),
           status = COALESCE(?, status), endpoint_gone_at = CASE WHEN ? THEN NULL ELSE endpoint_gone_at END, updated_at = ?
         WHERE id = ? AND owner_wallet = ? RETURNING id`,
      )
      .get(
        patch.endpoint ?? null,
        patch.name ?? null,
        patch.tagline ?? null,
        patch.description ?? null,
        patch.categories === undefined ? null : JSON.stringify(patch.categories.display),
        patch.basePrice ?? null,
        patch.status ?? null,
        clearsGone ? 1 : 0,
        now,
        id,
        ownerWallet,
      );
    if (updated === null) return null;
    if (patch.categories !== undefined) writeCategoriesInWrite(db, id, patch.categories.keys);
    if (patch.services !== undefined) writeServicesInWrite(db, id, patch.services, now);
    return toAgent(db.sqlite.query(`SELECT ${AGENT_COLUMNS} FROM market_agents a WHERE a.id = ?`).get(id) as RawAgent);
  });
}

/**
 * A `410 Gone` answer to a notification sent to `endpoint`: the agent is paused and receives nothing until
 * its owner changes endpoint or status; unless the endpoint was changed while the notification ran. True
 * when it was paused. SYNCHRONOUS, inside the write that records that attempt (webhooks/outbox.ts).
 */
export function markEndpointGoneInWrite(db: Db, id: string, endpoint: string, now: number): boolean {
  return db.sqlite.query("UPDATE market_agents SET status = 'paused', endpoint_gone_at = ?, updated_at = ? WHERE id = ? AND endpoint = ?").run(now, now, id, endpoint).changes > 0;
}

/**
 * Counts a completed order for the agent and, when given, its rating (a whole number 1-5). SYNCHRONOUS,
 * inside the caller's write (the order's completion), so the counters move with the order's state.
 */
export function recordOrderCompletedInWrite(db: Db, agentId: string, rating: number | null): void {
  if (rating !== null && !(Number.isInteger(rating) && rating >= 1 && rating <= 5)) throw new RangeError("a rating is a whole number from 1 to 5");
  const changed = db.sqlite
    .query(
      `UPDATE market_agents SET completed_orders = completed_orders + 1, rating_sum = rating_sum + ?, rating_count = rating_count + ?
       WHERE id = ?`,
    )
    .run(rating ?? 0, rating === null ? 0 : 1, agentId).changes;
  if (changed === 0) throw new Error(`no agent ${agentId}`);
}

/** The current (not removed) services of these agents, in each agent's order. */
export async function listServices(db: Db, agentIds: readonly string[]): Promise<ServiceRow[]> {
  if (agentIds.length === 0) return [];
  return (db.sqlite
    .query(
      `SELECT ${SERVICE_COLUMNS} FROM market_agent_services
       WHERE agent_id IN (SELECT value FROM json_each(?)) AND removed_at IS NULL ORDER BY agent_id, position`,
    )
    .all(JSON.stringify(agentIds)) as RawService[]).map(toService);
}

/** One of the agent's services, removed ones included (removedAt says so): an order may name an old one. */
export async function findService(db: Db, agentId: string, serviceId: string): Promise<ServiceRow | null> {
  const raw = db.sqlite.query(`SELECT ${SERVICE_COLUMNS} FROM market_agent_services WHERE id = ? AND agent_id = ?`).get(serviceId, agentId) as RawService | null;
  return raw === null ? null : toService(raw);
}

export type AgentSearch = {
  /** lower-cased */
  categoryKey: string | null;
  /** USDC base units */
  maxBasePrice: bigint | null;
  /** an FTS5 MATCH expression built from quoted words (never the user's raw text) */
  match: string | null;
  limit: number;
  offset: number;
};

/** Active agents that pass every given filter, best rated first, then most completed orders; and how many there are. */
/**
 * A price-filtered search with at most this many matches sorts them (found through the price index); with
 * more, it walks the ranking (whose index holds the price, migration 30) and stops at the page. Each plan is
 * cheap where the other is not: sorting every match of a broad filter (~45 ms at 200,000 agents), walking
 * the whole ranking for a filter few agents pass (~8 ms, ~60 ms with a category).
 */
const SORTED_MATCHES_AT_MOST = 2_000;

export async function searchAgents(db: Db, search: AgentSearch): Promise<{ rows: AgentRow[]; total: number }> {
  const where = ["a.status = 'active'"];
  const args: (string | number | bigint)[] = [];
  if (search.categoryKey !== null) {
    where.push("a.id IN (SELECT agent_id FROM market_agent_categories WHERE category_key = ?)");
    args.push(search.categoryKey);
  }
  if (search.maxBasePrice !== null) {
    where.push("a.base_price <= ?");
    args.push(search.maxBasePrice);
  }
  if (search.match !== null) {
    where.push("a.seq IN (SELECT rowid FROM market_agents_fts WHERE market_agents_fts MATCH ?)");
    args.push(search.match);
  }
  const condition = where.join(" AND ");
  const { total } = db.sqlite.query(`SELECT COUNT(*) AS total FROM market_agents a WHERE ${condition}`).get(...args) as { total: number };
  // `+` keeps the planner off the price index: the price is then checked on the ranking's entries as they are walked.
  const ranked = search.maxBasePrice !== null && total > SORTED_MATCHES_AT_MOST ? condition.replace("a.base_price <=", "+a.base_price <=") : condition;
  // Unrated agents (rating_tenths NULL) come last: SQLite sorts NULL lowest, so last when descending.
  const rows = db.sqlite
    .query(
      `SELECT ${AGENT_COLUMNS} FROM market_agents a WHERE ${ranked}
       ORDER BY a.rating_tenths DESC, a.completed_orders DESC, a.created_at, a.id LIMIT ? OFFSET ?`,
    )
    .all(...args, search.limit, search.offset) as RawAgent[];
  return { rows: rows.map((r) => toAgent(r)!), total };
}

// ---------------------------------------------------------------------------------------------------
// Conversations and messages

export type ConversationStatus = "active" | "archived";
export type ConversationRow = { id: string; agentId: string; consumerWallet: string; status: ConversationStatus; createdAt: number; lastMessageAt: number };

const CONVERSATION_COLUMNS = "c.id, c.agent_id AS agentId, c.consumer_wallet AS consumerWallet, c.status, c.created_at AS createdAt, c.last_message_at AS lastMessageAt";

export type Sender = "consumer" | "provider" | "system";

export type MessageRow = {
  /** the order of messages ("since" pages by it) */
  seq: number;
  id: string;
  conversationId: string;
  from: Sender;
  text: string;
  orderId: string | null;
  eventId: string | null;
  replyTo: string | null;
  createdAt: number;
};

const MESSAGE_COLUMNS = `seq, id, conversation_id AS conversationId, sender AS "from", text, order_id AS orderId, event_id AS eventId,
  reply_to AS replyTo, created_at AS createdAt`;

export type NewMessage = {
  id: string;
  conversationId: string;
  from: Sender;
  /** 1 to 4000 characters */
  text: string;
  orderId?: string | null;
  /** the outbox event that tells the agent about this message */
  eventId?: string | null;
  /** a synchronous reply: the message id it answers (one reply each) */
  replyTo?: string | null;
  createdAt: number;
};

/**
 * Adds a message to a conversation and moves its lastMessageAt. SYNCHRONOUS, inside the caller's write.
 * Returns the message's `seq`, or null when it is a reply to a message already answered (nothing written).
 */
export function insertMessageInWrite(db: Db, message: NewMessage): number | null {
  const inserted = db.sqlite
    .query(
      `INSERT INTO market_messages (id, conversation_id, sender, text, order_id, event_id, reply_to, created_at)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (reply_to) DO NOTHING RETURNING seq`,
    )
    .get(
      message.id,
      message.conversationId,
      message.from,
      message.text,
      message.orderId ?? null,
      message.eventId ?? null,
      message.replyTo ?? null,
      message.createdAt,
    ) as { seq: number } | null;
  if (inserted === null) return null;
  db.sqlite.query("UPDATE market_conversations SET last_message_at = MAX(last_message_at, ?) WHERE id = ?").run(message.createdAt, message.conversationId);
  return inserted.seq;
}

/** A new conversation with its first message; `alsoInWrite` runs in the same write (the agent's notification). */
export function insertConversation(db: Db, conversation: ConversationRow, first: NewMessage, alsoInWrite?: () => void): Promise<void> {
  return db.write(() => {
    db.sqlite
      .query("INSERT INTO market_conversations (id, agent_id, consumer_wallet, status, created_at, last_message_at) VALUES (?, ?, ?, ?, ?, ?)")
      .run(conversation.id, conversation.agentId, conversation.consumerWallet, conversation.status, conversation.createdAt, conversation.lastMessageAt);
    insertMessageInWrite(db, first);
    alsoInWrite?.();
  });
}

/** One message in its own write, with `alsoInWrite` in the same write; null when it was a duplicate reply. */
export function insertMessage(db: Db, message: NewMessage, alsoInWrite?: () => void): Promise<number | null> {
  return db.write(() => {
    const seq = insertMessageInWrite(db, message);
    if (seq !== null) alsoInWrite?.();
    return seq;
  });
}

/** Any conversation by id, with its agent id and consumer wallet (domain code decides who may see it). */
export async function findConversation(db: Db, id: string): Promise<ConversationRow | null> {
  return (db.sqlite.query(`SELECT ${CONVERSATION_COLUMNS} FROM market_conversations c WHERE c.id = ?`).get(id) as ConversationRow | null) ?? null;
}

export type ConversationSummaryRow = ConversationRow & {
  messageCount: number;
  lastMessageId: string | null;
  lastMessageFrom: Sender | null;
  lastMessageText: string | null;
  lastMessageOrderId: string | null;
  lastMessageCreatedAt: number | null;
};

/** Conversations of the agents `ownerWallet` owns (or of one of them), most recently active first; and how many. */
export async function listOwnerConversations(
  db: Db,
  ownerWallet: string,
  agentId: string | null,
  limit: number,
  offset: number,
): Promise<{ rows: ConversationSummaryRow[]; total: number }> {
  const condition = agentId === null ? "a.owner_wallet = ?" : "a.owner_wallet = ? AND c.agent_id = ?";
  const args = agentId === null ? [ownerWallet] : [ownerWallet, agentId];
  // The page's ids first, then the counts and last messages of those alone: summarizing every conversation
  // of the owner before the sort cost ~10 µs each (20,000 conversations: ~70 ms a call).
  const rows = db.sqlite
    .query(
      `WITH page AS (
         SELECT c.id FROM market_conversations c JOIN market_agents a ON a.id = c.agent_id
         WHERE ${condition} ORDER BY c.last_message_at DESC, c.id LIMIT ? OFFSET ?)
       SELECT ${CONVERSATION_COLUMNS},
         (SELECT COUNT(*) FROM market_messages WHERE conversation_id = c.id) AS messageCount,
         m.id AS lastMessageId, m.sender AS lastMessageFrom, m.text AS lastMessageText, m.order_id AS lastMessageOrderId,
         m.created_at AS lastMessageCreatedAt
       FROM page JOIN market_conversations c ON c.id = page.id
       LEFT JOIN market_messages m ON m.seq = (SELECT MAX(seq) FROM market_messages WHERE conversation_id = c.id)
       ORDER BY c.last_message_at DESC, c.id`,
    )
    .all(...args, limit, offset) as ConversationSummaryRow[];
  const { total } = db.sqlite
    .query(`SELECT COUNT(*) AS total FROM market_conversations c JOIN market_agents a ON a.id = c.agent_id WHERE ${condition}`)
    .get(...args) as { total: number };
  return { rows, total };
}

/** The position (`seq`) of a message in its conversation; null when the id is not one of its messages. */
export async function findMessageSeq(db: Db, conversationId: string, messageId: string): Promise<number | null> {
  const row = db.sqlite.query("SELECT seq FROM market_messages WHERE id = ? AND conversation_id = ?").get(messageId, conversationId) as { seq: number } | null;
  return row?.seq ?? null;
}

/** Up to `limit` messages written after `afterSeq` (0: from the start), oldest first. */
export async function listMessages(db: Db, conversationId: string, afterSeq: number, limit: number): Promise<MessageRow[]> {
  return db.sqlite
    .query(`SELECT ${MESSAGE_COLUMNS} FROM market_messages WHERE conversation_id = ? AND seq > ? ORDER BY seq LIMIT ?`)
    .all(conversationId, afterSeq, limit) as MessageRow[];
}

/** The message an outbox event told an agent about (a synchronous reply answers it). */
export async function findMessageByEvent(db: Db, eventId: string): Promise<MessageRow | null> {
  return (db.sqlite.query(`SELECT ${MESSAGE_COLUMNS} FROM market_messages WHERE event_id = ?`).get(eventId) as MessageRow | null) ?? null;
}
