// A background loop that never overlaps itself and stops cleanly.

export type Repeating = { stop(): Promise<void> };

/**
 * Runs `task` every `periodMs` after the previous run finished (first at once when `runNow` is true, after
 * `runNow` ms when it is a number, else after a period);
 * errors go to `onError`. Timers do not keep the process alive.
 *
 * `task` gets a signal that aborts when stop() is called: a run that works through a list (or waits on
 * the network) should end early on it, since stop() waits for the run in progress. An error of a run cut
 * short by stop() is a consequence of the stop, not reported.
 */
export function startRepeating(
  task: (stopping: AbortSignal) => Promise<unknown>,
  periodMs: number,
  onError: (err: unknown) => void,
  runNow: boolean | number = false,
): Repeating {
  let timer: ReturnType<typeof setTimeout> | null = null;
  let running: Promise<void> | null = null;
  const stopping = new AbortController();
  const schedule = (afterMs = periodMs) => {
    if (!stopping.signal.aborted) timer = setTimeout(run, afterMs).unref();
  };
  const run = () => {
    timer = null;
    running = Promise.resolve()
      .then(() => task(stopping.signal))
      .then(
        () => undefined,
        (err) => {
          if (!stopping.signal.aborted) onError(err);
        },
      )
      .finally(() => {
        running = null;
        schedule();
      });
  };
  if (runNow === true) run();
  else schedule(runNow === false ? periodMs : runNow);
  return {
    async stop() {
      stopping.abort();
      if (timer !== null) clearTimeout(timer);
      if (running !== null) await running;
    },
  };
}
