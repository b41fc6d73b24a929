// Pages bounded by size as well as by count: an answer is built whole in memory (and, over MCP, sent twice:
// as structured content and as its JSON text), so a page of items at their size limits must not reach many
// MB. A page cut short this way is said by the caller (`hasMore`, or `total` against offset + the items).

/** The characters of JSON a page's items may add up to. */
export const PAGE_MAX_CHARS = 1_000_000;

/**
 * The longest head of `items` whose JSON, with the commas between them, adds up to at most `maxChars` (the
 * array's JSON then has at most `maxChars` + 2: its brackets); one item at least, however large.
 */
export function headWithin<T>(items: readonly T[], maxChars = PAGE_MAX_CHARS): T[] {
  let chars = 0;
  for (let i = 0; i < items.length; i++) {
    chars += JSON.stringify(items[i]).length + (i === 0 ? 0 : 1);
    if (chars > maxChars) return items.slice(0, Math.max(1, i));
  }
  return [...items];
}
