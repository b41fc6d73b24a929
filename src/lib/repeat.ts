// A background loop that never overlaps itself and stops cleanly.

export type Repeating = { stop(): Promise<void> };

/**
 * Runs `task` every `periodMs` after the previous run finished (first at once when `runNow`);
 * errors go to `onError`. Timers do not keep the process alive.
 */
export function startRepeating(
  task: () => Promise<unknown>,
  periodMs: number,
  onError: (err: unknown) => void,
  runNow = false,
): Repeating {
  let timer: ReturnType<typeof setTimeout> | null = null;
  let running: Promise<void> | null = null;
  let stopped = false;
  const schedule = () => {
    if (!stopped) timer = setTimeout(run, periodMs).unref();
  };
  const run = () => {
    timer = null;
    running = Promise.resolve()
      .then(task)
      .then(() => undefined, onError)
      .finally(() => {
        running = null;
        schedule();
      });
  };
  if (runNow) run();
  else schedule();
  return {
    async stop() {
      stopped = true;
      if (timer !== null) clearTimeout(timer);
      if (running !== null) await running;
    },
  };
}
