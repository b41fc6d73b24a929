-- The transaction /submit (and checkout_pay) last sent for a checkout, recorded before it is sent: its
-- outcome is then read by its signature, however many strangers' transactions carry the reference too.
ALTER TABLE checkouts ADD COLUMN submitted_tx TEXT;
