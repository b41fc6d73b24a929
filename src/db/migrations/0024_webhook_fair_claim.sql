-- The delivery worker shares its slots out by owner and claims from each endpoint's head instead of
-- sorting the whole due backlog (docs/decisions.md "Webhook endpoints").
-- An agent's notifications count against the wallet that owns the agent, as an owner's events count
-- against the owner (their target_id): NULL for owner events, and for an agent that was gone when its
-- event was written (its notifications then count against the agent itself).
ALTER TABLE outbox_events ADD COLUMN agent_owner TEXT;
UPDATE outbox_events SET agent_owner = (SELECT owner_wallet FROM market_agents a WHERE a.id = outbox_events.target_id)
  WHERE target_kind = 'agent';
-- Each endpoint's pending deliveries in the order they are sent: the claim steps from one endpoint to the
-- next through it and reads only the first few of each, however many are due.
CREATE INDEX webhook_deliveries_pending ON webhook_deliveries (endpoint_kind, endpoint_id, next_attempt_at, id) WHERE status = 'pending';
