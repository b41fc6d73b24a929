// One at a time per key, in this process: async work for one key runs in the order it was asked for, and
// work for different keys runs side by side.

export type KeyedLock = {
  run<T>(key: string, work: () => Promise<T>): Promise<T>;
};

export function createKeyedLock(): KeyedLock {
  const tails = new Map<string, Promise<unknown>>();
  return {
    run(key, work) {
      const before = tails.get(key) ?? Promise.resolve();
      const result = before.then(work, work);
      const tail = result.catch(() => undefined);
      tails.set(key, tail);
      void tail.then(() => {
        if (tails.get(key) === tail) tails.delete(key); // nothing queued behind it: forget the key
      });
      return result;
    },
  };
}
