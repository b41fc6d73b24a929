// Steps of the wall clock (an NTP correction, `date -s`, a VM's clock set right), told apart from the
// passing of time by a clock no step moves. Timers stored as wall times (a webhook's next attempt) move
// with a step back, so that a clock set back an hour does not hold them an hour longer, and the purge
// stays behind a clock jumped forward, so that a wrong clock cannot delete live rows (src/server.ts).
import { readFileSync } from "node:fs";

/** The clocks a watch compares. */
export interface ClockSources {
  /** Unix time in milliseconds: the clock that steps. */
  wall(): number;
  /** Milliseconds from any fixed origin, never stepped; it stands still while the machine is suspended. */
  mono(): number;
  /** Milliseconds from any fixed origin that run on through a suspend too; null where the system does not tell. */
  boot(): number | null;
  /** What names this boot of the machine (the boot clock's origin); null where the system does not tell. */
  bootId?(): string | null;
}

/**
 * What a watch leaves for the next process (db/clock-mark.ts keeps it), so that a step of the wall clock
 * while the server was stopped is seen at its next start, and the purge stays behind a clock stepped
 * forward across a restart. Written at a step, and at a start that finds none or one of another boot.
 */
export type ClockMark = {
  bootId: string | null;
  /** The wall and boot clocks at one look. */
  wallMs: number;
  bootMs: number | null;
  /** aheadMs() then, and the time passed since the last step forward (null: none, or forgotten). */
  aheadMs: number;
  sinceForwardMs: number | null;
};

/** Differences smaller than this are not steps (NTP slews small errors; a check itself takes time). */
export const STEP_THRESHOLD_MS = 1_000;

/** How often the running server looks. A timer stored within this long after a step moves with it too. */
export const STEP_CHECK_MS = 1_000;

/** Linux's time since boot, counting suspend (`/proc/uptime`, in hundredths of a second); null elsewhere. */
function uptimeMs(): number | null {
  try {
    const seconds = Number.parseFloat(readFileSync("/proc/uptime", "latin1"));
    return Number.isFinite(seconds) ? seconds * 1000 : null;
  } catch {
    return null;
  }
}

/** Linux's id of this boot: /proc/uptime counts from it. */
function linuxBootId(): string | null {
  try {
    return readFileSync("/proc/sys/kernel/random/boot_id", "latin1").trim() || null;
  } catch {
    return null;
  }
}

export const systemClockSources: ClockSources = { wall: () => Date.now(), mono: () => performance.now(), boot: uptimeMs, bootId: linuxBootId };

/** Told of a step: `stepMs` is how far the wall clock moved beyond the time that passed (negative: set back). */
export type StepListener = (stepMs: number, now: number, mark: ClockMark) => Promise<unknown>;

export interface ClockSteps {
  /** Looks for a step since the last look; resolves once the listeners of every step seen so far have run. Returns this look's step, or 0. */
  check(): Promise<number>;
  onStep(listener: StepListener): void;
  /**
   * Looks for a step first, then: how far the wall clock has been stepped forward, less the steps back
   * since (never below 0), until `forgetAfterMs` has passed since the last step forward; 0 after that.
   */
  aheadMs(): number;
  /** The state to keep for the next start (see ClockMark), as of the last look. */
  mark(): ClockMark;
  /** Whether the mark given at the start is missing, of another boot, or told a step: then it is to be written anew. */
  markStale(): boolean;
}

/**
 * Watches `sources` from now on. A forward difference the boot clock accounts for (a suspend: time did
 * pass) is no step; where there is no boot clock (not Linux) every forward difference is taken for a
 * suspend, and only steps back are told. Listeners run one step at a time, in order; a listener's
 * failure goes to `onError`, and the others still run.
 */
export function watchClockSteps(
  sources: ClockSources,
  onError: (err: unknown) => void,
  forgetAfterMs = Number.POSITIVE_INFINITY,
  /**
   * The last process's mark (undefined: none to look at). Its step since then is told at the first look.
   * On the same boot the two clocks tell it whole; after a reboot only a wall clock now behind the mark's
   * is seen, as a step back of at least that much (a step forward is then time the machine was off).
   */
  resumed?: ClockMark | null,
): ClockSteps {
  const listeners: StepListener[] = [];
  let last = { wall: sources.wall(), mono: sources.mono(), boot: sources.boot() };
  const bootId = sources.bootId?.() ?? null;
  /** Time passed since the watch began (the boot clock's where there is one). */
  let passed = 0;
  let ahead = 0;
  let lastForwardAt = Number.NEGATIVE_INFINITY;
  let told: Promise<void> = Promise.resolve();
  /** A step made while no process watched, told at the first look. */
  let carried = 0;
  let stale = resumed !== undefined;
  if (resumed !== undefined && resumed !== null) {
    const sameBoot = bootId !== null && resumed.bootId === bootId && resumed.bootMs !== null && last.boot !== null;
    const sinceMark = sameBoot ? last.boot! - resumed.bootMs! : Math.max(0, last.wall - resumed.wallMs);
    carried = sameBoot ? last.wall - resumed.wallMs - sinceMark : Math.min(0, last.wall - resumed.wallMs);
    ahead = resumed.aheadMs;
    if (resumed.sinceForwardMs !== null) lastForwardAt = -(resumed.sinceForwardMs + sinceMark);
    stale = !sameBoot || Math.abs(carried) >= STEP_THRESHOLD_MS;
  }

  /** Compares the clocks with the last look (synchronous: no caller acts on a clock it has not looked at). */
  function look(): number {
    const now = { wall: sources.wall(), mono: sources.mono(), boot: sources.boot() };
    // The time passed is the boot clock's where there is one (a suspend included); the monotonic clock's,
    // which misses a suspend, otherwise: then a forward difference may be a suspend, and is not told.
    const withBoot = now.boot !== null && last.boot !== null;
    const elapsed = withBoot ? now.boot! - last.boot! : now.mono - last.mono;
    let stepMs = now.wall - last.wall - elapsed;
    if (!withBoot) stepMs = Math.min(stepMs, 0);
    stepMs += carried;
    carried = 0;
    last = now;
    passed += Math.max(0, elapsed);
    if (Math.abs(stepMs) < STEP_THRESHOLD_MS) return 0;
    ahead += stepMs;
    if (ahead < STEP_THRESHOLD_MS) ahead = 0; // a step back past it, or what is left of a step and its undoing (the boot clock reads in hundredths)
    if (stepMs > 0) lastForwardAt = passed;
    // The mark as of this step (not of whenever a listener asks: a later step seen meanwhile is not yet handled).
    const mark = markOf(now);
    told = told.then(async () => {
      for (const listener of listeners) {
        try {
          await listener(stepMs, now.wall, mark);
        } catch (err) {
          onError(err);
        }
      }
    });
    return stepMs;
  }

  /** Whether forgetAfterMs has passed since the last step forward (or there was none: it is at -Infinity). */
  const forwardForgotten = () => passed - lastForwardAt >= forgetAfterMs;

  function markOf(at: { wall: number; boot: number | null }): ClockMark {
    const forgotten = forwardForgotten();
    return { bootId, wallMs: at.wall, bootMs: at.boot, aheadMs: forgotten ? 0 : ahead, sinceForwardMs: forgotten ? null : passed - lastForwardAt };
  }

  function aheadMs(): number {
    look();
    if (ahead > 0 && forwardForgotten()) ahead = 0;
    return ahead;
  }

  return {
    async check() {
      const stepMs = look();
      await told;
      return stepMs;
    },
    onStep(listener) {
      listeners.push(listener);
    },
    aheadMs,
    mark() {
      aheadMs();
      return markOf(last);
    },
    markStale() {
      return stale;
    },
  };
}
