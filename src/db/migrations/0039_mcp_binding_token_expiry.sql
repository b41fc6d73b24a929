-- When the token an MCP session is bound to expires (Unix seconds; null for records bound before). Its row
-- is purged a day after that while the session's record is kept longer: a client back after the purge is
-- then told its token expired (TOKEN_EXPIRED), not that it is unknown.
ALTER TABLE mcp_sessions ADD COLUMN token_expires_at INTEGER;
