-- The issuer (BASE_URL) the server signs sessions for, recorded at each start beside the key id. Tokens name
-- their issuer and are checked against it, so `walletgate mcp` under another BASE_URL (say, the server's PORT
-- not given to it) would refuse the server's tokens and the server its: it is refused at start, naming the
-- server's. Null where a server of an earlier version recorded the key id.
ALTER TABLE jwt_key_in_use ADD COLUMN issuer TEXT;
