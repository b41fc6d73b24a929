-- What each feature token's purchase bought, in ms (the checkout's access days), apart from what it carried
-- over from the buyer's live tokens of the product: when one of those is revoked, the tokens extended from
-- it lose what they carried (paygate.md: access ends when the purchase's token is revoked). NULL for a
-- token without an expiry, and for tokens from before this migration, which keep their expiry as it is.
ALTER TABLE feature_tokens ADD COLUMN access_ms INTEGER CHECK (access_ms IS NULL OR access_ms > 0);
