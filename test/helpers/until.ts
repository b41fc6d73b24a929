// Polls `what` until it gives a value (not undefined, nor false: a condition written as a comparison waits
// for it to hold), or throws after `timeoutMs`: for outcomes a test waits on without a signal of their own (a
// webhook delivery, a background worker's write).
export async function until<T>(what: () => T | undefined | Promise<T | undefined>, timeoutMs = 10_000, intervalMs = 50): Promise<Exclude<T, false>> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await what();
    if (value !== undefined && value !== false) return value as Exclude<T, false>;
    if (Date.now() > deadline) throw new Error("timed out waiting");
    await new Promise((resolve) => setTimeout(resolve, intervalMs));
  }
}
