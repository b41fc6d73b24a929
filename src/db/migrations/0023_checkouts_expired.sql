-- The purge deletes checkouts that expired unpaid a week ago (paygate/purge.ts): found by this index,
-- not by a scan of every checkout ever opened.
CREATE INDEX checkouts_expired ON checkouts (expires_at) WHERE status = 'expired';
