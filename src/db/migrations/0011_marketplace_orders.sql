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
  -- paying, releasing and refunding exist on RPC networks only: the escrow transaction is signed and
  -- recorded (pending_*) before it is sent, and the order finishes or goes back once the chain answers.
  status TEXT NOT NULL CHECK (status IN (
    'proposed', 'declined', 'withdrawn', 'paid', 'delivered', 'completed', 'cancelled', 'expired', 'disputed', 'refunded',
    'paying', 'releasing', 'refunding'
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
  -- SHA-256 (hex) of the escrow payment's message handed unsigned to a connected consumer: what it signs must be that
  offer_hash TEXT,
  -- the escrow transaction in flight on an RPC network: what it does (JSON), the state to go back to, its
  -- signature and wire bytes (sent again until it lands or its blockhash expires) and that expiry height
  pending_move TEXT,
  pending_from TEXT,
  pending_tx TEXT,
  pending_wire BLOB,
  pending_valid_height INTEGER,
  created_at INTEGER NOT NULL,
  updated_at INTEGER NOT NULL
) STRICT;
CREATE INDEX market_orders_conversation ON market_orders (conversation_id, created_at);
CREATE INDEX market_orders_consumer ON market_orders (consumer_wallet, created_at);
CREATE INDEX market_orders_provider ON market_orders (provider_wallet, created_at);
CREATE INDEX market_orders_due ON market_orders (due_at) WHERE due_at IS NOT NULL;
CREATE INDEX market_orders_pending ON market_orders (updated_at) WHERE pending_tx IS NOT NULL;

-- One custodial escrow wallet per network (its key is in custodial_wallets like any other).
CREATE TABLE market_escrow (
  network TEXT PRIMARY KEY,
  address TEXT NOT NULL,
  created_at INTEGER NOT NULL
) STRICT;
