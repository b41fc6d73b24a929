// The numbered migrations, embedded in the executable as text and applied in order.
import m0001 from "./migrations/0001_auth.sql" with { type: "text" };
import m0002 from "./migrations/0002_ledger.sql" with { type: "text" };
import m0003 from "./migrations/0003_wallets.sql" with { type: "text" };
import m0004 from "./migrations/0004_ledger_audit.sql" with { type: "text" };
import m0005 from "./migrations/0005_mcp_sessions.sql" with { type: "text" };
import m0006 from "./migrations/0006_paygate.sql" with { type: "text" };
import m0007 from "./migrations/0007_purchases.sql" with { type: "text" };
import m0008 from "./migrations/0008_webhooks.sql" with { type: "text" };
import m0009 from "./migrations/0009_dashboard_links.sql" with { type: "text" };
import m0010 from "./migrations/0010_marketplace.sql" with { type: "text" };
import m0011 from "./migrations/0011_marketplace_orders.sql" with { type: "text" };
import m0012 from "./migrations/0012_webhook_retention.sql" with { type: "text" };
import m0013 from "./migrations/0013_order_offers.sql" with { type: "text" };
import m0014 from "./migrations/0014_auth_by_wallet_jti.sql" with { type: "text" };
import m0015 from "./migrations/0015_sealed_event_bodies.sql" with { type: "text" };
import m0016 from "./migrations/0016_checkout_submissions.sql" with { type: "text" };
import m0017 from "./migrations/0017_webhook_previous_secrets.sql" with { type: "text" };
import m0018 from "./migrations/0018_ledger_message_hash.sql" with { type: "text" };
import m0019 from "./migrations/0019_auth_token_signer.sql" with { type: "text" };
import m0020 from "./migrations/0020_sealing_key_check.sql" with { type: "text" };
import m0021 from "./migrations/0021_market_offer_wire.sql" with { type: "text" };
import m0022 from "./migrations/0022_checkout_submissions_time.sql" with { type: "text" };
import m0023 from "./migrations/0023_checkouts_expired.sql" with { type: "text" };
import m0024 from "./migrations/0024_webhook_fair_claim.sql" with { type: "text" };
import m0025 from "./migrations/0025_market_order_fee_terms.sql" with { type: "text" };
import m0026 from "./migrations/0026_market_order_withdraw_request.sql" with { type: "text" };
import m0027 from "./migrations/0027_mcp_unbound_sessions.sql" with { type: "text" };
import m0028 from "./migrations/0028_mcp_bound_sessions.sql" with { type: "text" };
import m0029 from "./migrations/0029_webhook_attempts_rowid.sql" with { type: "text" };
import m0030 from "./migrations/0030_indexes_checkout_terms.sql" with { type: "text" };
import m0031 from "./migrations/0031_jwt_key_in_use.sql" with { type: "text" };
import m0032 from "./migrations/0032_auth_index_prefixes.sql" with { type: "text" };
import m0033 from "./migrations/0033_jwt_issuer_in_use.sql" with { type: "text" };
import m0034 from "./migrations/0034_webhook_order_written.sql" with { type: "text" };
import m0035 from "./migrations/0035_network_in_use.sql" with { type: "text" };
import m0036 from "./migrations/0036_feature_token_access_ms.sql" with { type: "text" };
import m0037 from "./migrations/0037_market_payout_retry.sql" with { type: "text" };
import m0038 from "./migrations/0038_webhook_answers_without_tokens.sql" with { type: "text" };
import m0039 from "./migrations/0039_mcp_binding_token_expiry.sql" with { type: "text" };
import m0040 from "./migrations/0040_webhook_endpoint_deletions.sql" with { type: "text" };
import m0041 from "./migrations/0041_checkout_chain_expiry.sql" with { type: "text" };
import m0042 from "./migrations/0042_owner_listing_indexes.sql" with { type: "text" };
import m0043 from "./migrations/0043_clock_mark.sql" with { type: "text" };
import m0044 from "./migrations/0044_checkout_submit_leases.sql" with { type: "text" };
import m0045 from "./migrations/0045_checkout_idempotency_keys.sql" with { type: "text" };
import m0046 from "./migrations/0046_transfer_idempotency_keys.sql" with { type: "text" };
import m0047 from "./migrations/0047_checkout_submission_heights.sql" with { type: "text" };
import m0048 from "./migrations/0048_order_idempotency_keys.sql" with { type: "text" };
import m0049 from "./migrations/0049_transfer_keys_strict.sql" with { type: "text" };

export type Migration = { version: number; name: string; sql: string };

export const MIGRATIONS: readonly Migration[] = [
  { version: 1, name: "auth", sql: m0001 },
  { version: 2, name: "ledger", sql: m0002 },
  { version: 3, name: "wallets", sql: m0003 },
  { version: 4, name: "ledger_audit", sql: m0004 },
  { version: 5, name: "mcp_sessions", sql: m0005 },
  { version: 6, name: "paygate", sql: m0006 },
  { version: 7, name: "purchases", sql: m0007 },
  { version: 8, name: "webhooks", sql: m0008 },
  { version: 9, name: "dashboard_links", sql: m0009 },
  { version: 10, name: "marketplace", sql: m0010 },
  { version: 11, name: "marketplace_orders", sql: m0011 },
  { version: 12, name: "webhook_retention", sql: m0012 },
  { version: 13, name: "order_offers", sql: m0013 },
  { version: 14, name: "auth_by_wallet_jti", sql: m0014 },
  { version: 15, name: "sealed_event_bodies", sql: m0015 },
  { version: 16, name: "checkout_submissions", sql: m0016 },
  { version: 17, name: "webhook_previous_secrets", sql: m0017 },
  { version: 18, name: "ledger_message_hash", sql: m0018 },
  { version: 19, name: "auth_token_signer", sql: m0019 },
  { version: 20, name: "sealing_key_check", sql: m0020 },
  { version: 21, name: "market_offer_wire", sql: m0021 },
  { version: 22, name: "checkout_submissions_time", sql: m0022 },
  { version: 23, name: "checkouts_expired", sql: m0023 },
  { version: 24, name: "webhook_fair_claim", sql: m0024 },
  { version: 25, name: "market_order_fee_terms", sql: m0025 },
  { version: 26, name: "market_order_withdraw_request", sql: m0026 },
  { version: 27, name: "mcp_unbound_sessions", sql: m0027 },
  { version: 28, name: "mcp_bound_sessions", sql: m0028 },
  { version: 29, name: "webhook_attempts_rowid", sql: m0029 },
  { version: 30, name: "indexes_checkout_terms", sql: m0030 },
  { version: 31, name: "jwt_key_in_use", sql: m0031 },
  { version: 32, name: "auth_index_prefixes", sql: m0032 },
  { version: 33, name: "jwt_issuer_in_use", sql: m0033 },
  { version: 34, name: "webhook_order_written", sql: m0034 },
  { version: 35, name: "network_in_use", sql: m0035 },
  { version: 36, name: "feature_token_access_ms", sql: m0036 },
  { version: 37, name: "market_payout_retry", sql: m0037 },
  { version: 38, name: "webhook_answers_without_tokens", sql: m0038 },
  { version: 39, name: "mcp_binding_token_expiry", sql: m0039 },
  { version: 40, name: "webhook_endpoint_deletions", sql: m0040 },
  { version: 41, name: "checkout_chain_expiry", sql: m0041 },
  { version: 42, name: "owner_listing_indexes", sql: m0042 },
  { version: 43, name: "clock_mark", sql: m0043 },
  { version: 44, name: "checkout_submit_leases", sql: m0044 },
  { version: 45, name: "checkout_idempotency_keys", sql: m0045 },
  { version: 46, name: "transfer_idempotency_keys", sql: m0046 },
  { version: 47, name: "checkout_submission_heights", sql: m0047 },
  { version: 48, name: "order_idempotency_keys", sql: m0048 },
  { version: 49, name: "transfer_keys_strict", sql: m0049 },
];
