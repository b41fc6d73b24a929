-- Indexes for requests whose work grew with other users' rows; checkouts keep the terms they sell.
-- checkout_pay (and /pay/:productId/submit) look for the wallet's open checkouts of a product: without
-- this, every open checkout of the server was read and sorted (~250 ms at 200,000).
CREATE INDEX checkouts_open_of ON checkouts (product_id, wallet, created_at) WHERE status = 'open';
-- provider_register/provider_update delete an agent's removed services: the agent_id index covers only
-- services not removed, so the delete read every agent's services.
CREATE INDEX market_agent_services_removed ON market_agent_services (agent_id) WHERE removed_at IS NOT NULL;
-- consumer_search_agents with maxPrice: the price in the rank index, so the ranked walk checks it from the
-- index and stops at the page, instead of every agent under the price being fetched whole and sorted.
DROP INDEX market_agents_rank;
CREATE INDEX market_agents_rank ON market_agents (status, rating_tenths DESC, completed_orders DESC, created_at, id, base_price);

-- What a checkout sells, fixed when it opens as its price is: {"accessDays": n|null, "featureIds": [...]}.
-- A product changed while its buyer pays no longer changes what the payment buys. NULL: opened before this
-- migration (the product's terms at payment apply, as they did).
ALTER TABLE checkouts ADD COLUMN terms TEXT CHECK (terms IS NULL OR json_valid(terms));
