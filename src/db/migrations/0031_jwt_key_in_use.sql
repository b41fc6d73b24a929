-- The key id of the JWT secret the server signs sessions with (auth.md: the first 16 hex digits of its
-- SHA-256, which reveals nothing usable), recorded at each start. `walletgate mcp`, which signs sessions in
-- the same database, is refused under another secret: the server would refuse its tokens, and it the server's.
CREATE TABLE jwt_key_in_use (
  id INTEGER PRIMARY KEY CHECK (id = 1),
  kid TEXT NOT NULL
) STRICT;
