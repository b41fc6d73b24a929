-- The wall clock against the machine's boot clock at the server's last step or start (lib/clock-steps.ts),
-- so that a step of the wall clock while the server was stopped is seen at its next start (a retry set on a
-- clock that was ahead moves back with it), and how far the purge stays behind a clock stepped forward, so
-- that a restart does not forget it. One row, rewritten only at a step or a start on another boot.
CREATE TABLE clock_mark (
  id INTEGER PRIMARY KEY CHECK (id = 1),
  boot_id TEXT,
  wall_ms INTEGER NOT NULL,
  boot_ms REAL,
  ahead_ms INTEGER NOT NULL CHECK (ahead_ms >= 0),
  since_forward_ms INTEGER
) STRICT;
