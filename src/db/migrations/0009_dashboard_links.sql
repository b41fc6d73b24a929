-- One-time dashboard sign-in links (dashboard.md "Sign-in", `walletgate dashboard-link`): only the
-- SHA-256 of each code is kept; a link is spent by setting used_at. Times are Unix milliseconds.

CREATE TABLE dashboard_links (
  code_hash TEXT PRIMARY KEY,
  wallet TEXT NOT NULL,
  created_at INTEGER NOT NULL,
  expires_at INTEGER NOT NULL,
  used_at INTEGER
) STRICT;
-- No index on expires_at: a handful of rows at most, and only the hourly purge asks by it.
