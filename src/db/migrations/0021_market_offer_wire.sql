-- marketplace.md: escrow holds exactly what paid, delivered and disputed orders owe. A connected consumer
-- asking for the escrow offer twice (a retry, a second tab) got two different transactions; signing and
-- sending both paid twice for one order, and the first payment stayed in escrow with no order covering it.
-- The offer's unsigned transaction is kept, and handed out again while its blockhash can still land.
ALTER TABLE market_orders ADD COLUMN offer_wire BLOB;
