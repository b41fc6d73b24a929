// The MCP part of the purge: ended records after a day, idle ones once every token they could hold is dead,
// and records with or without a wallet past their caps.
import { expect, test } from "bun:test";
import { testDeps } from "../../test/helpers/deps.ts";
import { purgeMcpSessions } from "./purge.ts";
import { endSession, findSession, insertSession, BOUND_SURPLUS_FROM, UNBOUND_SURPLUS } from "./store.ts";
import { STEP_ROWS } from "../db/steps.ts";

test("ended, long-idle and idle never-bound MCP session records are purged; live ones stay", async () => {
  const { deps, clock } = await testDeps();
  const base = { protocolVersion: "2025-06-18", fingerprint: null, wallet: "W", sessionId: "s", jti: "j", tokenExpiresAtS: null, boundBy: "binding" as const };
  const now = clock.now();
  await insertSession(deps.db, { id: "live", createdAt: now, lastActivityAt: now, ...base });
  await insertSession(deps.db, { id: "ended", createdAt: now, lastActivityAt: now, ...base });
  await endSession(deps.db, "ended", now);
  await insertSession(deps.db, { id: "idle", createdAt: now, lastActivityAt: now - 40 * 86_400_000, ...base });
  expect(await purgeMcpSessions(deps)).toEqual({ mcpSessions: 1 }); // idle past 30 days + a day
  clock.advance(2 * 86_400_000);
  expect(await purgeMcpSessions(deps)).toEqual({ mcpSessions: 1 }); // ended more than a day ago
  expect(await findSession(deps.db, "live")).not.toBeNull();
  expect(await findSession(deps.db, "ended")).toBeNull();
  // A session that never bound a wallet is kept as long (a client idle for hours is rebuilt, not 404)…
  const unbound = { ...base, wallet: null, sessionId: null, jti: null, boundBy: null };
  await insertSession(deps.db, { id: "anonymous", createdAt: clock.now(), lastActivityAt: clock.now(), ...unbound });
  clock.advance(10 * deps.config.mcpSessionTimeoutMs);
  expect(await purgeMcpSessions(deps)).toEqual({ mcpSessions: 0 });
  expect(await findSession(deps.db, "anonymous")).not.toBeNull();
  clock.advance(31 * 86_400_000);
  expect(await purgeMcpSessions(deps)).toEqual({ mcpSessions: 2 }); // it and "live", both idle past 30 days + a day
});

test("records without a wallet are bounded in number: past the cap the least recently active go", async () => {
  const { deps, clock } = await testDeps();
  const unbound = { protocolVersion: "2025-06-18", fingerprint: null, wallet: null, sessionId: null, jti: null, tokenExpiresAtS: null, boundBy: null };
  const bound = { ...unbound, wallet: "W", sessionId: "s", jti: "j", boundBy: "binding" as const };
  const now = clock.now();
  const idle = 2 * deps.config.mcpSessionTimeoutMs + 60_000; // no server holds a session idle this long in memory
  for (let i = 0; i < 5; i++) await insertSession(deps.db, { id: `anon-${i}`, createdAt: now, lastActivityAt: now - idle - 1 - i * 1000, ...unbound });
  await insertSession(deps.db, { id: "bound-old", createdAt: now, lastActivityAt: now - idle - 60_000, ...bound });
  await insertSession(deps.db, { id: "anon-ended", createdAt: now, lastActivityAt: now - idle - 60_000, ...unbound });
  await endSession(deps.db, "anon-ended", now); // ended: its 404 is kept for a day, whatever the cap
  // Sessions that may be live in a server's memory are never counted, however many newer ones there are.
  for (let i = 0; i < 3; i++) await insertSession(deps.db, { id: `recent-${i}`, createdAt: now, lastActivityAt: now - i * 1000, ...unbound });
  expect(await purgeMcpSessions(deps, { unboundKept: 2 })).toEqual({ mcpSessions: 3 });
  for (const [id, kept] of [["anon-0", true], ["anon-1", true], ["anon-2", false], ["anon-4", false], ["bound-old", true], ["anon-ended", true], ["recent-2", true]] as const) {
    expect([id, (await findSession(deps.db, id)) !== null]).toEqual([id, kept]);
  }
  // The surplus is found through the partial index, not a scan of every record: the store's own query.
  const plan = deps.db.sqlite.query(`EXPLAIN QUERY PLAN ${UNBOUND_SURPLUS}`).all(now, 2) as { detail: string }[];
  expect(plan.map((p) => p.detail).join("; ")).toContain("mcp_sessions_unbound_activity");
});

test("more records than a purge step takes: every idle one and the whole surplus go", async () => {
  const { deps, clock } = await testDeps();
  const now = clock.now();
  const idle = 2 * deps.config.mcpSessionTimeoutMs + 60_000;
  const insert = deps.db.sqlite.query(
    "INSERT INTO mcp_sessions (id, created_at, last_activity_at, protocol_version, wallet, session_id, jti) VALUES (?, ?, ?, '2025-06-18', ?, ?, ?)",
  );
  deps.db.sqlite.run("BEGIN");
  for (let i = 0; i < STEP_ROWS + 40; i++) insert.run(`old-${i}`, now, now - 40 * 86_400_000, "W", "s", "j"); // idle past any token
  for (let i = 0; i < 2 * STEP_ROWS + 9; i++) insert.run(`anon-${i}`, now, now - idle - 1 - i, null, null, null); // never bound
  deps.db.sqlite.run("COMMIT");
  expect(await purgeMcpSessions(deps, { unboundKept: 5 })).toEqual({ mcpSessions: STEP_ROWS + 40 + 2 * STEP_ROWS + 4 });
  const left = deps.db.sqlite.query("SELECT id FROM mcp_sessions ORDER BY last_activity_at DESC").values().flat();
  expect(left).toEqual(["anon-0", "anon-1", "anon-2", "anon-3", "anon-4"]); // the cap keeps the most recently active
});

test("records bound to a wallet are bounded in number too: past their cap the least recently active go", async () => {
  const { deps, clock } = await testDeps();
  const now = clock.now();
  const idle = 2 * deps.config.mcpSessionTimeoutMs + 60_000;
  const insert = deps.db.sqlite.query(
    "INSERT INTO mcp_sessions (id, created_at, last_activity_at, protocol_version, wallet, session_id, jti, bound_by) VALUES (?, ?, ?, '2025-06-18', ?, ?, ?, ?)",
  );
  // One sign-in's fingerprint binds every session its client opens: as many bound records as initializes.
  deps.db.sqlite.run("BEGIN");
  for (let i = 0; i < STEP_ROWS + 7; i++) insert.run(`fp-${i}`, now, now - idle - 10 - i * 2, "W", "s", "j", "fingerprint");
  for (let i = 0; i < 3; i++) insert.run(`anon-${i}`, now, now - idle - 5 - i * 10, null, null, null, null);
  insert.run("live", now, now, "W", "s", "j", "binding"); // may be in a server's memory: never counted
  deps.db.sqlite.run("COMMIT");
  await insertSession(deps.db, { id: "ended", createdAt: now, lastActivityAt: now - idle - 100_000, protocolVersion: "2025-06-18", fingerprint: null, wallet: "W", sessionId: "s", jti: "j", tokenExpiresAtS: null, boundBy: "binding" });
  await endSession(deps.db, "ended", now); // ended: its 404 is kept for a day, whatever the cap
  expect(await purgeMcpSessions(deps, { boundKept: 5 })).toEqual({ mcpSessions: STEP_ROWS + 7 - 5 });
  const left = deps.db.sqlite.query("SELECT id FROM mcp_sessions ORDER BY last_activity_at DESC").values().flat();
  expect(left).toEqual(["live", "anon-0", "fp-0", "fp-1", "fp-2", "anon-1", "fp-3", "fp-4", "anon-2", "ended"]); // unbound ones count toward their own cap
  // The surplus's start is found through the partial index, not a scan of every record.
  const plan = deps.db.sqlite.query(`EXPLAIN QUERY PLAN ${BOUND_SURPLUS_FROM}`).all(now, 5) as { detail: string }[];
  expect(plan.map((p) => p.detail).join("; ")).toContain("mcp_sessions_bound_activity");
  expect(await purgeMcpSessions(deps, { boundKept: 5 })).toEqual({ mcpSessions: 0 }); // at the cap: nothing more
  // Records idle since the same moment: exactly the cap is kept, not fewer.
  await deps.db.write(() => {
    for (let i = 0; i < 10; i++) insert.run(`tie-${i}`, now, now - idle - 50_000, "W", "s", "j", "fingerprint");
  });
  expect(await purgeMcpSessions(deps, { boundKept: 8 })).toEqual({ mcpSessions: 7 }); // the 5 fp-* kept above, 3 of the 10 ties
  expect(deps.db.sqlite.query("SELECT id FROM mcp_sessions WHERE id LIKE 'tie-%' ORDER BY id").values().flat()).toEqual(["tie-7", "tie-8", "tie-9"]);
});
