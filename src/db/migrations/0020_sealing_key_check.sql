-- The wallet encryption key's fingerprint (an HMAC under the key of a fixed text, so it reveals nothing of
-- it): a database is opened only under the key its sealed data (custodial wallets, feature tokens, webhook
-- secrets, agents' secrets) was sealed with. A backup restored into a DATA_DIR that generated a key of its
-- own would otherwise start, open none of that data, and seal new data beside it under another key.
CREATE TABLE sealing_key_check (
  id INTEGER PRIMARY KEY CHECK (id = 1),
  key_check TEXT NOT NULL
) STRICT;
