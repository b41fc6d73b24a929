// The background loop: never overlaps itself, can run at once, and stop() waits for a run in progress.
import { expect, test } from "bun:test";
import { startRepeating } from "./repeat.ts";
import { until } from "../../test/helpers/until.ts";

test("runs never overlap, even when a run outlasts the period", async () => {
  let active = 0;
  let maxActive = 0;
  let runs = 0;
  const loop = startRepeating(
    async () => {
      active++;
      maxActive = Math.max(maxActive, active);
      runs++;
      await Bun.sleep(30);
      active--;
    },
    5,
    () => undefined,
  );
  await until(() => runs >= 3, 10_000, 5).catch(() => undefined); // then the expects below say what is missing
  await loop.stop();
  expect(runs).toBeGreaterThanOrEqual(3);
  expect(maxActive).toBe(1);
});

test("runNow runs at once; stop() waits for the running task and nothing runs after", async () => {
  let finished = 0;
  let started = 0;
  const loop = startRepeating(
    async () => {
      started++;
      await Bun.sleep(50);
      finished++;
    },
    10_000,
    () => undefined,
    true,
  );
  await Bun.sleep(5);
  expect(started).toBe(1);
  await loop.stop();
  expect(finished).toBe(1);
  await Bun.sleep(20);
  expect(started).toBe(1);
});

test("a failing run is reported and the loop goes on", async () => {
  const errors: unknown[] = [];
  let runs = 0;
  const loop = startRepeating(
    async () => {
      runs++;
      throw new Error("boom");
    },
    5,
    (e) => errors.push(e),
  );
  await until(() => runs >= 2, 10_000, 5).catch(() => undefined); // then the expects below say what is missing
  await loop.stop();
  expect(runs).toBeGreaterThanOrEqual(2);
  expect(errors.length).toBe(runs);
});

test("stop() aborts the running task's signal; the error of a run cut short is not reported", async () => {
  const errors: unknown[] = [];
  let seen: AbortSignal | null = null;
  const loop = startRepeating(
    (stopping) =>
      new Promise((_, reject) => {
        seen = stopping;
        stopping.addEventListener("abort", () => reject(new Error("cut short")));
      }),
    10_000,
    (e) => errors.push(e),
    true,
  );
  await Bun.sleep(5);
  expect(seen!.aborted).toBe(false);
  await loop.stop(); // would never end if the task were not told
  expect(seen!.aborted).toBe(true);
  expect(errors).toEqual([]);
});

test("a run in progress at stop() schedules nothing after it, however short the period (mutation review)", async () => {
  // repeat.ts schedule(): `if (!stopping.signal.aborted) timer = …` → `timer = …`: the run's finally would
  // set a new timer, and the task would run again after stop() (after shutdown closed the database).
  let started = 0;
  const loop = startRepeating(
    async () => {
      started++;
      await Bun.sleep(30);
    },
    5,
    () => undefined,
    true,
  );
  await Bun.sleep(5);
  expect(started).toBe(1);
  await loop.stop();
  await Bun.sleep(60); // many periods
  expect(started).toBe(1);
});

test("runNow as a number is the first run's delay, not the period (the order timers' first look a second after start)", async () => {
  // repeat.ts: `schedule(runNow === false ? periodMs : runNow)` → `schedule(periodMs)`
  let started = 0;
  const loop = startRepeating(
    async () => {
      started++;
    },
    60_000,
    () => undefined,
    20,
  );
  try {
    await until(() => started >= 1, 2_000, 5).catch(() => undefined);
    expect(started).toBe(1);
  } finally {
    await loop.stop();
  }
});
