// Steps of the real server's wall clock, made with libfaketime (apt-get install faketime): its offset is
// read from a file at every call, so the test sets the clock back or forward while the server runs; the
// monotonic clock stays real, as under an NTP step. A webhook retry set back 4 minutes, while the server
// runs or while it is stopped, still goes 5 s after its failure, and a clock jumped two days forward, then
// set right, has deleted no live session, across a restart too.
import { afterAll, describe, expect, test } from "bun:test";
import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { verifyingReceiver, type Receiver } from "./helpers/receiver.ts";
import { startTestServer, type TestServer } from "./helpers/server.ts";
import { until } from "./helpers/until.ts";
import { call, newWallet, signIn } from "./helpers/wallet.ts";

/** Debian's libfaketime, on any architecture. */
const libfaketime = [...new Bun.Glob("/usr/lib/*/faketime/libfaketime.so.1").scanSync({ onlyFiles: true, absolute: true })][0] ?? null;
if (libfaketime === null) {
  if (process.env.CI) throw new Error("libfaketime is missing: .ci/run installs it (apt-get install faketime)");
  console.warn("libfaketime is not installed: the tests of clock steps on a running server are skipped (apt-get install faketime)");
}

const servers: TestServer[] = [];
const receivers: Receiver[] = [];
const dirs: string[] = [];
afterAll(async () => {
  for (const r of receivers) await r.stop();
  for (const s of servers) await s.dispose();
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

/** A server whose wall clock is offset by what `setOffset` last wrote ("+0", "-240", "+2d": libfaketime's forms). */
async function serverWithMovableClock(env: Record<string, string>) {
  const dir = mkdtempSync(join(tmpdir(), "walletgate-test-clock-"));
  dirs.push(dir);
  const offsetFile = join(dir, "offset");
  const setOffset = (offset: string) => writeFileSync(offsetFile, `${offset}\n`);
  setOffset("+0");
  const server = await startTestServer({
    ...env,
    LD_PRELOAD: libfaketime!,
    FAKETIME_TIMESTAMP_FILE: offsetFile,
    FAKETIME_NO_CACHE: "1",
    FAKETIME_DONT_FAKE_MONOTONIC: "1",
  });
  servers.push(server);
  return { server, setOffset };
}

/** The server's log lines with message `msg`, parsed. */
const linesOf = (server: TestServer, msg: string) =>
  server
    .output()
    .split("\n")
    .filter((line) => line.includes(`"msg":"${msg}"`))
    .map((line) => JSON.parse(line) as Record<string, unknown>);

const STEPPED = "the wall clock was stepped";

/** A webhook endpoint whose first delivery fails (a retry is then due 5 s on) and the next succeeds; resolves at that first delivery. */
async function firstDeliveryFails(server: TestServer): Promise<Receiver> {
  let failures = 1;
  const hook = verifyingReceiver({ answer: () => (failures-- > 0 ? new Response("try later", { status: 500 }) : new Response("ok")) });
  receivers.push(hook);
  const token = (await signIn(server.url, newWallet())).sessionToken;
  const endpoint = await call(server.url, "/dashboard/api/webhooks", { token, body: { url: hook.url, events: ["product.created"] } });
  expect(endpoint.status).toBe(201);
  hook.setSecret(endpoint.body.secret as string);
  const product = { title: "Pro", description: "", type: "feature_unlock", price: "5", featureIds: ["pro"] };
  expect((await call(server.url, "/dashboard/api/products", { token, body: product })).status).toBe(201);
  await until(() => hook.received.length >= 1, 10_000);
  return hook;
}

describe.skipIf(libfaketime === null)("a step of the running server's wall clock", () => {
  test("set back 4 minutes after a failed attempt, the retry still goes 5 s after it, signed at the new time", async () => {
    const { server, setOffset } = await serverWithMovableClock({ ALLOW_PRIVATE_NETWORK_TARGETS: "true" });
    const hook = await firstDeliveryFails(server);
    await Bun.sleep(500); // the failure is recorded: its retry is due 5 s after it
    setOffset("-240");
    // Not moved, the retry would wait 4 minutes more. (Within the receiver's 5-minute timestamp tolerance.)
    await until(() => hook.received.length >= 2, 15_000);
    expect(hook.received.map((d) => [d.id, d.verified])).toEqual([
      [hook.received[0]!.id, true],
      [hook.received[0]!.id, true],
    ]);
    const [step] = linesOf(server, STEPPED);
    expect(step).toMatchObject({ level: "warn", webhookRetries: 1, payoutHolds: 0, purgeBehindMs: 0 });
    expect(Math.abs((step!.stepMs as number) + 240_000)).toBeLessThan(2_000);
  }, 40_000);

  test("set back 4 minutes while the server was stopped, the retry still goes 5 s after the failure, from the next start", async () => {
    const { server, setOffset } = await serverWithMovableClock({ ALLOW_PRIVATE_NETWORK_TARGETS: "true" });
    const hook = await firstDeliveryFails(server);
    const failedAt = Date.now();
    await Bun.sleep(300); // the failure is recorded: its retry is due 5 s after it
    expect(await server.stop()).toBe(0);

    setOffset("-240");
    const again = await server.restart();
    servers.push(again);
    await until(() => hook.received.length >= 2, 15_000);
    expect(Date.now() - failedAt).toBeLessThan(15_000); // not 4 minutes more
    expect(hook.received.map((d) => d.verified)).toEqual([true, true]);
    const [step] = linesOf(again, STEPPED);
    expect(step).toMatchObject({ level: "warn", webhookRetries: 1, purgeBehindMs: 0 });
    expect(Math.abs((step!.stepMs as number) + 240_000)).toBeLessThan(2_000);
    expect(linesOf(server, STEPPED)).toEqual([]);

    // Restarted again with no step: nothing is told.
    const third = await again.restart();
    servers.push(third);
    await Bun.sleep(1_500);
    expect(linesOf(third, STEPPED)).toEqual([]);
  }, 40_000);

  test("jumped two days forward, the purge deletes no live session; set right again, the session still works", async () => {
    const { server, setOffset } = await serverWithMovableClock({
      SESSION_TTL_S: "600",
      SESSION_MAX_AGE_S: "600",
      PURGE_INTERVAL_MS: "200",
      LOG_LEVEL: "debug",
      BASE_URL: "http://walletgate.test", // the tokens' issuer, the same after the restart on another port
      ALLOW_PRIVATE_NETWORK_TARGETS: "true",
    });
    const token = (await signIn(server.url, newWallet())).sessionToken;
    expect((await call(server.url, "/auth/session", { token })).status).toBe(200);
    // A retry pending when the clock jumps: a step forward leaves it where it is (it may be time that did pass).
    const hook = verifyingReceiver({ answer: () => new Response("try later", { status: 500 }) });
    receivers.push(hook);
    const endpoint = await call(server.url, "/dashboard/api/webhooks", { token, body: { url: hook.url, events: ["product.created"] } });
    hook.setSecret(endpoint.body.secret as string);
    const product = { title: "Pro", description: "", type: "feature_unlock", price: "5", featureIds: ["pro"] };
    expect((await call(server.url, "/dashboard/api/products", { token, body: product })).status).toBe(201);
    await until(() => hook.received.length >= 1, 10_000);
    await Bun.sleep(300); // its retry is due 5 s on

    setOffset("+2d"); // the token's row, 10 minutes from its expiry, looks expired for a day and 23 h 50 min
    await until(() => linesOf(server, STEPPED).length === 1, 10_000);
    const purgesBefore = linesOf(server, "purge").length;
    await until(() => linesOf(server, "purge").length >= purgesBefore + 3, 10_000); // purges ran at the wrong time
    const [ahead] = linesOf(server, STEPPED);
    expect(ahead).toMatchObject({ level: "warn", webhookRetries: 0, payoutHolds: 0 }); // a step forward moves no retry
    expect(Math.abs((ahead!.purgeBehindMs as number) - 2 * 86_400_000)).toBeLessThan(2_000);
    expect(linesOf(server, "purge").every((p) => p.tokens === 0)).toBe(true);
    const behind = async (s: TestServer) => Number(/^walletgate_purge_behind_seconds (\S+)$/m.exec(await (await fetch(`${s.url}/metrics`)).text())![1]);
    expect(Math.abs((await behind(server)) - 2 * 86_400)).toBeLessThan(2);

    // Restarted with the clock still ahead: the purge stays as far behind (kept in the database), from its first run.
    const again = await server.restart();
    servers.push(again);
    await until(() => linesOf(again, "purge").length >= 3, 10_000);
    expect(linesOf(again, "purge").every((p) => p.tokens === 0)).toBe(true);
    expect(Math.abs((await behind(again)) - 2 * 86_400)).toBeLessThan(2);
    expect(linesOf(again, STEPPED)).toEqual([]); // seen already: not told again

    setOffset("+0");
    await until(() => linesOf(again, STEPPED).length === 1, 10_000);
    expect(linesOf(again, STEPPED)[0]).toMatchObject({ purgeBehindMs: 0 });
    expect(await behind(again)).toBe(0);
    const session = await call(again.url, "/auth/session", { token });
    expect([session.status, session.body.code]).toEqual([200, undefined]);
  }, 40_000);
});
