-- WEBHOOK_RETENTION_DAYS: the purge finds finished deliveries by their last change, and events by age.
CREATE INDEX webhook_deliveries_finished ON webhook_deliveries (updated_at) WHERE status <> 'pending';
CREATE INDEX outbox_events_created ON outbox_events (created_at);
