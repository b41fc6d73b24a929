// Waiting that a stop can cut short.

/** Resolves after `ms`, or at once when `signal` aborts (already aborted included); never rejects. */
export function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) return resolve();
    const done = () => {
      clearTimeout(timer);
      signal.removeEventListener("abort", done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal.addEventListener("abort", done, { once: true });
  });
}

/**
 * Waits for `promise` to settle, for `ms` at most (less when `signal` aborts): true when it settled in time.
 * Never rejects (the promise's own outcome is its caller's), and leaves no timer behind once it settled.
 */
export async function settlesWithin(promise: Promise<unknown>, ms: number, signal?: AbortSignal): Promise<boolean> {
  let settled = false;
  const done = new AbortController();
  void promise
    .then(
      () => (settled = true),
      () => (settled = true),
    )
    .finally(() => done.abort());
  await sleep(ms, signal === undefined ? done.signal : AbortSignal.any([done.signal, signal]));
  return settled;
}
