// Loads modules while dropping one known, harmless console notice (pure helper).

/**
 * bigint-buffer (beneath @solana/spl-token) prints "bigint: Failed to load bindings, pure JS will be
 * used" when its optional native addon is absent, as it always is in the executable. The pure-JS path is
 * the one we mean to use, so that one line is dropped while `load` runs; other warnings pass.
 */
export async function importQuietly<T>(load: () => Promise<T>): Promise<T> {
  const warn = console.warn;
  console.warn = (...args: unknown[]) => {
    if (typeof args[0] === "string" && args[0].startsWith("bigint: Failed to load bindings")) return;
    warn(...args);
  };
  try {
    return await load();
  } finally {
    console.warn = warn;
  }
}
