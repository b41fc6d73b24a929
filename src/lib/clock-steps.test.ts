import { describe, expect, test } from "bun:test";
import { STEP_THRESHOLD_MS, systemClockSources, watchClockSteps, type ClockSources } from "./clock-steps.ts";

/** Clocks moved by hand: `pass` is time passing, `step` a step of the wall clock, `suspend` a suspended machine. */
function clocks(withBoot = true) {
  let wall = Date.UTC(2026, 10, 28, 12);
  let mono = 5_000;
  let boot = 90_000;
  const sources: ClockSources = { wall: () => wall, mono: () => mono, boot: () => (withBoot ? boot : null) };
  return {
    sources,
    pass(ms: number) {
      wall += ms;
      mono += ms;
      boot += ms;
    },
    step(ms: number) {
      wall += ms;
    },
    suspend(ms: number) {
      wall += ms;
      boot += ms;
    },
    now: () => wall,
  };
}

function watch(c: ReturnType<typeof clocks>) {
  const errors: unknown[] = [];
  const told: { stepMs: number; now: number }[] = [];
  const steps = watchClockSteps(c.sources, (err) => errors.push(err));
  steps.onStep(async (stepMs, now) => {
    told.push({ stepMs, now });
  });
  return { steps, told, errors };
}

describe("clock steps", () => {
  test("time passing is no step, however long between checks", async () => {
    const c = clocks();
    const { steps, told } = watch(c);
    c.pass(1_000);
    expect(await steps.check()).toBe(0);
    c.pass(3 * 86_400_000);
    expect(await steps.check()).toBe(0);
    expect(told).toEqual([]);
    expect(steps.aheadMs()).toBe(0);
  });

  test("a step back is told with its size and the time after it; the purge is not held back by it", async () => {
    const c = clocks();
    const { steps, told } = watch(c);
    c.pass(400);
    c.step(-3_600_000);
    c.pass(300);
    expect(await steps.check()).toBe(-3_600_000);
    expect(told).toEqual([{ stepMs: -3_600_000, now: c.now() }]);
    expect(steps.aheadMs()).toBe(0);
    c.pass(1_000);
    expect(await steps.check()).toBe(0); // told once
    expect(told).toHaveLength(1);
  });

  test("a step forward is told, and the purge stays that far behind until a step back makes up for it", async () => {
    const c = clocks();
    const { steps, told } = watch(c);
    c.step(2 * 86_400_000);
    c.pass(500);
    expect(await steps.check()).toBe(2 * 86_400_000);
    expect(steps.aheadMs()).toBe(2 * 86_400_000);
    c.step(-86_400_000);
    expect(await steps.check()).toBe(-86_400_000);
    expect(steps.aheadMs()).toBe(86_400_000);
    c.step(-2 * 86_400_000); // past where it started: the purge is behind by nothing, not by a negative amount
    expect(await steps.check()).toBe(-2 * 86_400_000);
    expect(steps.aheadMs()).toBe(0);
    expect(told.map((t) => t.stepMs)).toEqual([2 * 86_400_000, -86_400_000, -2 * 86_400_000]);
    // A step and its undoing measured a few milliseconds apart (the boot clock reads in hundredths) leave nothing.
    c.step(3_600_000 + 7);
    await steps.check();
    c.step(-3_600_000);
    await steps.check();
    expect(steps.aheadMs()).toBe(0);
  });

  test("the purge's distance is looked up afresh at every read, and forgotten once forgetAfterMs has passed since the last step forward", async () => {
    const c = clocks();
    const told: number[] = [];
    const steps = watchClockSteps(c.sources, () => undefined, 10 * 86_400_000);
    steps.onStep(async (stepMs) => {
      told.push(stepMs);
    });
    c.step(2 * 86_400_000);
    expect(steps.aheadMs()).toBe(2 * 86_400_000); // seen without a check: the purge never reads a stale distance
    await steps.check();
    expect(told).toEqual([2 * 86_400_000]); // told once, by whichever look saw it
    c.pass(10 * 86_400_000 - 1);
    expect(steps.aheadMs()).toBe(2 * 86_400_000);
    c.pass(1);
    expect(steps.aheadMs()).toBe(0); // no row live before the step can still need it
    c.step(3_600_000); // a new step forward counts from itself
    expect(steps.aheadMs()).toBe(3_600_000);
    c.suspend(9 * 86_400_000); // time passed while suspended counts too
    expect(steps.aheadMs()).toBe(3_600_000);
    c.suspend(86_400_000);
    expect(steps.aheadMs()).toBe(0);
  });

  test("a suspended machine is no step: the boot clock shows the time passed; a step during it still counts", async () => {
    const c = clocks();
    const { steps, told } = watch(c);
    c.suspend(8 * 3_600_000);
    c.pass(200);
    expect(await steps.check()).toBe(0);
    c.suspend(600_000);
    c.step(-120_000);
    expect(await steps.check()).toBe(-120_000);
    c.suspend(600_000);
    c.step(90_000);
    expect(await steps.check()).toBe(90_000);
    expect(told.map((t) => t.stepMs)).toEqual([-120_000, 90_000]);
  });

  test("without a boot clock, a forward difference is taken for a suspend; a step back is still told", async () => {
    const c = clocks(false);
    const { steps, told } = watch(c);
    c.step(5 * 86_400_000);
    expect(await steps.check()).toBe(0);
    expect(steps.aheadMs()).toBe(0);
    c.step(-3_600_000);
    expect(await steps.check()).toBe(-3_600_000);
    expect(told.map((t) => t.stepMs)).toEqual([-3_600_000]);
  });

  test("differences under the threshold (NTP's slewing, a check's own time) are not steps, either way", async () => {
    const c = clocks();
    const { steps, told } = watch(c);
    c.step(STEP_THRESHOLD_MS - 1);
    expect(await steps.check()).toBe(0);
    c.step(-(STEP_THRESHOLD_MS - 1));
    expect(await steps.check()).toBe(0);
    c.step(-STEP_THRESHOLD_MS);
    expect(await steps.check()).toBe(-STEP_THRESHOLD_MS);
    expect(told).toHaveLength(1);
  });

  test("every listener runs, in order, before check resolves; one that fails is reported and the next still runs", async () => {
    const c = clocks();
    const order: string[] = [];
    const errors: unknown[] = [];
    const steps = watchClockSteps(c.sources, (err) => errors.push(err));
    steps.onStep(async () => {
      await Bun.sleep(20);
      order.push("first");
    });
    steps.onStep(async () => {
      throw new Error("database locked");
    });
    steps.onStep(async () => {
      order.push("third");
    });
    c.step(-60_000);
    await steps.check();
    expect(order).toEqual(["first", "third"]);
    expect(errors.map((e) => (e as Error).message)).toEqual(["database locked"]);
  });

  test("the system's clocks: no step between two checks, and Linux's boot clock is read", async () => {
    const steps = watchClockSteps(systemClockSources, () => undefined);
    await Bun.sleep(30);
    expect(await steps.check()).toBe(0);
    if (process.platform === "linux") expect(systemClockSources.boot()).toBeGreaterThan(0);
  });
});
