-- An endpoint's deliveries go in the order they were written when they are due at the same millisecond (the
-- payment.completed and feature.unlocked of one purchase, written together), not in the order of their random
-- ids: the claim orders each endpoint's due rows by due time, then rowid, which this index gives as stored
-- (every index entry ends with its rowid).
DROP INDEX webhook_deliveries_pending;
CREATE INDEX webhook_deliveries_pending ON webhook_deliveries (endpoint_kind, endpoint_id, next_attempt_at) WHERE status = 'pending';
