-- A kept checkout transaction's landing limit: the block height past which it can no longer land (the latest
-- blockhash's last valid height when it was sent, plus a margin for a node behind). It is judged dead by the
-- chain's height, not only by the wall clock, which may be stepped. NULL for rows kept before: judged as then.
ALTER TABLE checkout_submissions ADD COLUMN valid_height INTEGER;
