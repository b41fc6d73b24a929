-- An owner's webhook endpoint deleted: its id and when. A restore (db/restore.ts) deletes an endpoint the
-- backup still holds when the database it replaces recorded that deletion, and keeps these records, so a
-- restore sends no event (access tokens among them) to a URL the owner took away. Unix-ms times; purged a
-- year after the deletion (webhooks/purge.ts).
CREATE TABLE webhook_endpoint_deletions (
  id TEXT PRIMARY KEY,
  deleted_at INTEGER NOT NULL
) STRICT;
CREATE INDEX webhook_endpoint_deletions_at ON webhook_endpoint_deletions (deleted_at);
