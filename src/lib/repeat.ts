// A background loop that never overlaps itself and stops cleanly.

export type Repeating = { stop(): Promise<void> };

/** Runs `task` every `periodMs` after the previous run finished; errors go to `onError`. */
export function startRepeating(task: () => Promise<unknown>, periodMs: number, onError: (err: unknown) => void): Repeating {
  let timer: ReturnType<typeof setTimeout> | null = null;
  let running: Promise<void> | null = null;
  let stopped = false;
  const schedule = () => {
    if (!stopped) timer = setTimeout(run, periodMs);
  };
  const run = () => {
    timer = null;
    running = task()
      .then(() => undefined, onError)
      .finally(() => {
        running = null;
        schedule();
      });
  };
  schedule();
  return {
    async stop() {
      stopped = true;
      if (timer !== null) clearTimeout(timer);
      if (running !== null) await running;
    },
  };
}
