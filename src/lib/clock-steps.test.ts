import { describe, expect, test } from "bun:test";
import { STEP_THRESHOLD_MS, systemClockSources, watchClockSteps, type ClockMark, type ClockSources } from "./clock-steps.ts";

/** Clocks moved by hand: `pass` is time passing, `step` a step of the wall clock, `suspend` a suspended machine. */
function clocks(withBoot = true) {
  let wall = Date.UTC(2026, 10, 28, 12);
  let mono = 5_000;
  let boot = 90_000;
  let bootId = "boot-1";
  const sources: ClockSources = { wall: () => wall, mono: () => mono, boot: () => (withBoot ? boot : null), bootId: () => (withBoot ? bootId : null) };
  return {
    sources,
    /** The machine restarted `offMs` after now: the boot and monotonic clocks begin again, the wall clock ran on. */
    reboot(offMs: number) {
      wall += offMs;
      boot = 20_000;
      mono = 1_000;
      bootId = `boot-${Number(bootId.slice(5)) + 1}`;
    },
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

  test("the system's clocks: no step between two checks, and Linux's boot clock and boot id are read", async () => {
    const steps = watchClockSteps(systemClockSources, () => undefined);
    await Bun.sleep(30);
    expect(await steps.check()).toBe(0);
    if (process.platform === "linux") {
      expect(systemClockSources.boot()).toBeGreaterThan(0);
      expect(systemClockSources.bootId!()).toMatch(/^[0-9a-f-]{36}$/);
    }
  });
});

describe("clock steps while no process watched (the mark a start or step leaves)", () => {
  /** A watch resumed from `mark` (null: none stored), telling its steps. */
  function resumed(c: ReturnType<typeof clocks>, mark: ClockMark | null, forgetAfterMs = Number.POSITIVE_INFINITY) {
    const told: number[] = [];
    const steps = watchClockSteps(c.sources, () => undefined, forgetAfterMs, mark);
    steps.onStep(async (stepMs) => {
      told.push(stepMs);
    });
    return { steps, told };
  }

  test("on the same boot, a step made while stopped is told at the first look, whatever time passed; none: nothing to write", async () => {
    const c = clocks();
    const before = watchClockSteps(c.sources, () => undefined, Number.POSITIVE_INFINITY, null);
    expect(before.markStale()).toBe(true); // none stored: to be written
    const mark = before.mark();
    c.pass(3 * 86_400_000); // stopped three days: time passing, no step
    const quiet = resumed(c, mark);
    expect([quiet.steps.markStale(), await quiet.steps.check(), quiet.told]).toEqual([false, 0, []]);

    c.pass(600_000);
    c.step(-3_600_000); // set back an hour while stopped
    c.pass(600_000);
    const { steps, told } = resumed(c, mark);
    expect(steps.markStale()).toBe(true);
    expect(await steps.check()).toBe(-3_600_000);
    expect(told).toEqual([-3_600_000]);
    expect(await steps.check()).toBe(0); // told once
    // The mark written after it tells the next start nothing more.
    c.pass(60_000);
    expect(await resumed(c, steps.mark()).steps.check()).toBe(0);
  });

  test("each step is told with the mark as of itself: a later step seen while the first's listener runs is not in it", async () => {
    const c = clocks();
    const steps = watchClockSteps(c.sources, () => undefined, Number.POSITIVE_INFINITY, null);
    let open: () => void = () => undefined;
    const gate = new Promise<void>((r) => (open = r));
    const marks: ClockMark[] = [];
    steps.onStep(async (_stepMs, _now, mark) => {
      if (marks.length === 0) await gate; // the first step's moves, still running
      marks.push(mark);
    });
    c.step(-3_600_000);
    const first = steps.check();
    c.pass(2_000);
    c.step(-600_000);
    steps.aheadMs(); // a look meanwhile (a /metrics scrape) sees the second step
    open();
    await first;
    await steps.check();
    // A crash after the first listener saved its mark: the next start still finds the second step.
    const next = resumed(c, marks[0]!);
    expect(await next.steps.check()).toBe(-600_000);
    expect(await resumed(c, marks[1]!).steps.check()).toBe(0);
  });

  test("the purge's distance outlives a restart, and is forgotten counting the time before it", async () => {
    const c = clocks();
    const before = resumed(c, null, 10 * 86_400_000);
    c.step(2 * 86_400_000);
    await before.steps.check();
    c.pass(4 * 86_400_000);
    const mark = before.steps.mark();
    expect(mark).toMatchObject({ aheadMs: 2 * 86_400_000, sinceForwardMs: 4 * 86_400_000 });
    c.pass(5 * 86_400_000); // stopped five days
    const after = resumed(c, mark, 10 * 86_400_000);
    expect(after.steps.aheadMs()).toBe(2 * 86_400_000); // nine days since the step
    expect(after.told).toEqual([]);
    c.pass(86_400_000);
    expect(after.steps.aheadMs()).toBe(0);
    const mark2 = after.steps.mark();
    expect(mark2).toMatchObject({ aheadMs: 0, sinceForwardMs: null });
    // A step forward made while stopped holds the purge back from the start.
    c.step(86_400_000);
    const third = resumed(c, mark2, 10 * 86_400_000);
    expect(third.steps.aheadMs()).toBe(86_400_000);
    await third.steps.check(); // the listeners of the step the first look saw have run
    expect(third.told).toEqual([86_400_000]);
  });

  test("after a reboot only a wall clock behind the mark's is seen, as a step back of at least that much", async () => {
    const c = clocks();
    const mark = resumed(c, null).steps.mark();
    c.reboot(3_600_000); // off an hour, then up: no step
    const up = resumed(c, mark);
    expect([up.steps.markStale(), await up.steps.check()]).toEqual([true, 0]); // another boot's mark: written anew
    const mark2 = up.steps.mark();
    c.reboot(600_000);
    c.step(-2 * 3_600_000); // set back two hours: the clock reads 1 h 50 min before the mark
    const back = resumed(c, mark2);
    expect(await back.steps.check()).toBe(-(2 * 3_600_000 - 600_000));
    c.reboot(600_000);
    c.step(5 * 86_400_000); // a step forward across a reboot is time the machine was off, for all one can tell
    expect(await resumed(c, back.steps.mark()).steps.check()).toBe(0);
  });
});
