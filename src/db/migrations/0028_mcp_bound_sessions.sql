-- Records of MCP sessions bound to a wallet are capped in number too (migration 27 caps the unbound ones):
-- after one sign-in, fingerprint restore binds every new session from the same client, so bound records can
-- be made as fast as unbound ones (one initialize each). Past the cap the purge drops the least recently
-- active, found through this index (ties in activity taken in id order).
CREATE INDEX mcp_sessions_bound_activity ON mcp_sessions (last_activity_at, id) WHERE wallet IS NOT NULL AND ended_at IS NULL;
