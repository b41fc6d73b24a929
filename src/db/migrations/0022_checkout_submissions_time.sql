-- The checkout watcher looks at checkouts /submit recently sent a transaction for before the others: a
-- payment whose answer a crash cut off is completed on the first round after the restart, not when the
-- watcher's turn through every open checkout comes round to it.
CREATE INDEX checkout_submissions_submitted_at ON checkout_submissions (submitted_at);
