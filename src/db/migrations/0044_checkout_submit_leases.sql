-- One /pay/:productId/submit or checkout_pay at a time per wallet and product, across every process on the
-- database (the server, each `walletgate mcp`): from its look for an earlier payment to the record of its own
-- transaction, which is written only while its lease holds. Two at once in two processes would each find
-- nothing and both pay. A lease, so that a process that dies holding it holds it no longer than `until`.
CREATE TABLE checkout_submit_leases (
  wallet TEXT NOT NULL,
  product_id TEXT NOT NULL,
  holder TEXT NOT NULL,
  until INTEGER NOT NULL,
  PRIMARY KEY (wallet, product_id)
) STRICT;
