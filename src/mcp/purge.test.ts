// The MCP part of the purge: ended records after a day, idle ones once every token they could hold is dead.
import { expect, test } from "bun:test";
import { testDeps } from "../../test/helpers/deps.ts";
import { purgeMcpSessions } from "./purge.ts";
import { endSession, findSession, insertSession } from "./store.ts";

test("ended, long-idle and idle never-bound MCP session records are purged; live ones stay", async () => {
  const { deps, clock } = await testDeps();
  const base = { protocolVersion: "2025-06-18", fingerprint: null, wallet: "W", sessionId: "s", jti: "j", boundBy: "binding" as const };
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
  const unbound = { ...base, wallet: null, sessionId: null, jti: null, boundBy: null };
  await insertSession(deps.db, { id: "anonymous", createdAt: clock.now(), lastActivityAt: clock.now(), ...unbound });
  clock.advance(2 * deps.config.mcpSessionTimeoutMs + 1);
  expect(await purgeMcpSessions(deps)).toEqual({ mcpSessions: 1 });
  expect(await findSession(deps.db, "anonymous")).toBeNull();
  expect(await findSession(deps.db, "live")).not.toBeNull();
});
