-- Records of MCP sessions that never bound a wallet (or unbound it) are kept as long as bound ones, so that
-- a client idle for hours is still rebuilt rather than answered 404, which the SDK's client never recovers
-- from (mcp.md). Their number is capped instead: past the cap the purge drops the least recently active,
-- found through this index.
CREATE INDEX mcp_sessions_unbound_activity ON mcp_sessions (last_activity_at) WHERE wallet IS NULL AND ended_at IS NULL;
