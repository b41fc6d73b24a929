-- Marketplace orders and the escrow wallet of each network (marketplace.md "Order states").
-- Amounts are integers in the token's base units; times are Unix milliseconds.

CREATE TABLE market_orders (
  id TEXT PRIMARY KEY,
  conversation_id TEXT NOT NULL,
  agent_id TEXT NOT NULL,
  consumer_wallet TEXT NOT NULL,
  provider_wallet TEXT NOT NULL,
  service_id TEXT,
  description TEXT NOT NULL,
  -- the price as the provider wrote it (decimal string) and in base units of `token`
  price TEXT NOT NULL,
  amount INTEGER NOT NULL CHECK (amount > 0),
  token TEXT NOT NULL,
  delivery_time_min INTEGER NOT NULL CHECK (delivery_time_min > 0),
  status TEXT NOT NULL CHECK (status IN (
    'proposed', 'declined', 'withdrawn', 'paid', 'delivered', 'completed', 'cancelled', 'expired', 'disputed', 'refunded'
  )),
  -- when the current state ends by itself: proposal expiry, delivery deadline or auto-release; NULL otherwise
  due_at INTEGER,
  deadline INTEGER,
  escrow_tx TEXT,
  release_tx TEXT,
  refund_tx TEXT,
  fee_amount INTEGER,
  result TEXT,
  rating INTEGER CHECK (rating BETWEEN 1 AND 5),
  review TEXT,
  reason TEXT,
  created_at INTEGER NOT NULL,
  updated_at INTEGER NOT NULL
) STRICT;
CREATE INDEX market_orders_conversation ON market_orders (conversation_id, created_at);
CREATE INDEX market_orders_consumer ON market_orders (consumer_wallet, created_at);
CREATE INDEX market_orders_provider ON market_orders (provider_wallet, created_at);
CREATE INDEX market_orders_due ON market_orders (due_at) WHERE due_at IS NOT NULL;

-- One custodial escrow wallet per network (its key is in custodial_wallets like any other).
CREATE TABLE market_escrow (
  network TEXT PRIMARY KEY,
  address TEXT NOT NULL,
  created_at INTEGER NOT NULL
) STRICT;
