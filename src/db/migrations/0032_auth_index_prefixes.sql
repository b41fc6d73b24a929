-- Token rows and fingerprint links are found by (wallet, jti), both random, so every sign-in inserts an
-- entry at a random place of each index: each commit writes one index leaf per sign-in, and leaves that
-- fill up split. Indexed by the first 8 characters of each instead of the whole values (about 26 bytes an
-- entry against about 90), the token index has under a third as many leaves, which split that much less
-- often: 1.50 log frames per token inserted instead of 1.82 (150,000 rows, 12 inserts a commit;
-- BENCHMARKS.md, twenty-sixth pass). Statements name the prefixes, which the index finds, then the whole
-- values (auth/store.ts). A token's jti stays unique without a unique index: a new session's is a random
-- UUID v4, and a refresh's, derived from its parent's, is looked for in the write that records it.
DROP INDEX auth_tokens_wallet_jti;
CREATE INDEX auth_tokens_by_prefixes ON auth_tokens (substr(wallet, 1, 8), substr(jti, 1, 8));
DROP INDEX fingerprint_wallet_links_wallet_jti;
CREATE INDEX fingerprint_wallet_links_by_prefixes ON fingerprint_wallet_links (substr(wallet, 1, 8), substr(jti, 1, 8));
