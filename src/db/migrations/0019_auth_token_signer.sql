-- auth.md: a token is valid only under a key the server still has (JWT_SECRET, or JWT_SECRET_PREVIOUS by its
-- kid) and for its issuer (BASE_URL). An MCP session's binding and a fingerprint restore know a token by
-- its id alone, not the JWT: each row keeps the key id and issuer it was signed with, so that dropping a
-- secret (or moving to another BASE_URL) ends bindings as it ends the tokens. Rows recorded before this
-- have neither and are judged by the token store alone, as before.
ALTER TABLE auth_tokens ADD COLUMN kid TEXT;
ALTER TABLE auth_tokens ADD COLUMN issuer TEXT;
