-- Marketplace agents (providers), their search index, conversations and messages (marketplace.md).
-- Times are Unix milliseconds; prices are integers of USDC base units (formatted at the edge).

-- A provider agent. `seq` is an explicit rowid alias because the full-text index below refers to rows
-- by rowid, and VACUUM may renumber the implicit rowid of a table without one.
CREATE TABLE market_agents (
  seq INTEGER PRIMARY KEY,
  id TEXT NOT NULL UNIQUE,
  owner_wallet TEXT NOT NULL,
  endpoint TEXT NOT NULL,
  name TEXT NOT NULL CHECK (length(name) BETWEEN 1 AND 100),
  tagline TEXT NOT NULL CHECK (length(tagline) <= 200),
  description TEXT NOT NULL CHECK (length(description) <= 4000),
  -- JSON array of the categories as the provider wrote them; market_agent_categories is what search reads
  categories TEXT NOT NULL,
  base_price INTEGER NOT NULL CHECK (base_price > 0),
  status TEXT NOT NULL CHECK (status IN ('active', 'paused')),
  -- The `whsec_` signing secret's 32 bytes, sealed with AES-256-GCM under WALLET_ENCRYPTION_KEY with the
  -- agent id as additional authenticated data (as webhook_endpoints does with the endpoint id).
  secret_iv BLOB NOT NULL CHECK (length(secret_iv) = 12),
  secret_ciphertext BLOB NOT NULL CHECK (length(secret_ciphertext) = 48),
  -- ratings of completed orders (1-5 each): the average is rating_sum / rating_count
  rating_sum INTEGER NOT NULL DEFAULT 0,
  rating_count INTEGER NOT NULL DEFAULT 0 CHECK (rating_count >= 0),
  completed_orders INTEGER NOT NULL DEFAULT 0 CHECK (completed_orders >= rating_count),
  -- the average in tenths, rounded half up (45 = 4.5); NULL while unrated. Search orders by it.
  rating_tenths INTEGER GENERATED ALWAYS AS (
    CASE WHEN rating_count = 0 THEN NULL ELSE (rating_sum * 20 + rating_count) / (rating_count * 2) END
  ) VIRTUAL,
  -- set when the endpoint answered a notification `410 Gone` (the agent is then paused); notifications
  -- stop until the owner changes the endpoint or the status
  endpoint_gone_at INTEGER,
  created_at INTEGER NOT NULL,
  updated_at INTEGER NOT NULL,
  CHECK (rating_sum BETWEEN rating_count AND 5 * rating_count)
) STRICT;
CREATE INDEX market_agents_owner ON market_agents (owner_wallet, created_at);
-- Search's order: rating, then completed orders, then oldest first (a stable order for paging).
CREATE INDEX market_agents_rank ON market_agents (status, rating_tenths DESC, completed_orders DESC, created_at, id);
CREATE INDEX market_agents_price ON market_agents (status, base_price);

-- Each category of an agent, lower-cased (JavaScript's toLowerCase, not SQLite's ASCII-only lower()),
-- for search's exact, case-insensitive category filter.
CREATE TABLE market_agent_categories (
  category_key TEXT NOT NULL,
  agent_id TEXT NOT NULL REFERENCES market_agents (id),
  PRIMARY KEY (category_key, agent_id)
) STRICT, WITHOUT ROWID;
CREATE INDEX market_agent_categories_agent ON market_agent_categories (agent_id);

-- An agent's services. An update replaces the list; a service left out is marked removed, not deleted,
-- so an order that names it still finds what it was.
CREATE TABLE market_agent_services (
  id TEXT PRIMARY KEY,
  agent_id TEXT NOT NULL REFERENCES market_agents (id),
  position INTEGER NOT NULL CHECK (position >= 0),
  title TEXT NOT NULL CHECK (length(title) BETWEEN 1 AND 200),
  description TEXT NOT NULL CHECK (length(description) <= 2000),
  price INTEGER NOT NULL CHECK (price > 0),
  delivery_time_min INTEGER NOT NULL CHECK (delivery_time_min > 0),
  removed_at INTEGER,
  created_at INTEGER NOT NULL,
  updated_at INTEGER NOT NULL
) STRICT;
CREATE INDEX market_agent_services_agent ON market_agent_services (agent_id, position) WHERE removed_at IS NULL;

-- Full-text index of name, tagline and description (FTS5, external content: the text lives in
-- market_agents only), kept in step by the triggers below.
CREATE VIRTUAL TABLE market_agents_fts USING fts5 (
  name, tagline, description,
  content = 'market_agents', content_rowid = 'seq',
  tokenize = 'unicode61 remove_diacritics 2'
);
CREATE TRIGGER market_agents_fts_insert AFTER INSERT ON market_agents BEGIN
  INSERT INTO market_agents_fts (rowid, name, tagline, description) VALUES (new.seq, new.name, new.tagline, new.description);
END;
CREATE TRIGGER market_agents_fts_delete AFTER DELETE ON market_agents BEGIN
  INSERT INTO market_agents_fts (market_agents_fts, rowid, name, tagline, description) VALUES ('delete', old.seq, old.name, old.tagline, old.description);
END;
-- Only a change of the indexed text re-indexes (not ratings, status or counters).
CREATE TRIGGER market_agents_fts_update AFTER UPDATE OF name, tagline, description ON market_agents BEGIN
  INSERT INTO market_agents_fts (market_agents_fts, rowid, name, tagline, description) VALUES ('delete', old.seq, old.name, old.tagline, old.description);
  INSERT INTO market_agents_fts (rowid, name, tagline, description) VALUES (new.seq, new.name, new.tagline, new.description);
END;

CREATE TABLE market_conversations (
  id TEXT PRIMARY KEY,
  agent_id TEXT NOT NULL REFERENCES market_agents (id),
  consumer_wallet TEXT NOT NULL,
  status TEXT NOT NULL CHECK (status IN ('active', 'archived')),
  created_at INTEGER NOT NULL,
  last_message_at INTEGER NOT NULL
) STRICT;
CREATE INDEX market_conversations_agent ON market_conversations (agent_id, last_message_at);
CREATE INDEX market_conversations_consumer ON market_conversations (consumer_wallet, last_message_at);

-- Messages in the order they were written: `seq` (AUTOINCREMENT, so never reused) is what "since a
-- message id" pages by; times can tie.
CREATE TABLE market_messages (
  seq INTEGER PRIMARY KEY AUTOINCREMENT,
  id TEXT NOT NULL UNIQUE,
  conversation_id TEXT NOT NULL REFERENCES market_conversations (id),
  sender TEXT NOT NULL CHECK (sender IN ('consumer', 'provider', 'system')),
  text TEXT NOT NULL CHECK (length(text) BETWEEN 1 AND 4000),
  -- the order a system message is about; no foreign key, orders come in a later migration
  order_id TEXT,
  -- the outbox event that told the agent about this message (conversation.started, message.received)
  event_id TEXT UNIQUE,
  -- a synchronous reply: the message it answers, at most one reply each
  reply_to TEXT UNIQUE,
  created_at INTEGER NOT NULL
) STRICT;
CREATE INDEX market_messages_conversation ON market_messages (conversation_id, seq);
