// Counting text as people and SQLite do: by characters (code points), not by UTF-16 units.

/**
 * Characters as the tools' schemas (JSON Schema's maxLength) and SQLite's length() count them: code
 * points, so an emoji is one, not the two UTF-16 units of `string.length`.
 */
export function characters(text: string): number {
  return [...text].length; // a string's iterator yields code points (a lone surrogate is one)
}

/** The first `max` characters (code points) of `text`, never splitting a surrogate pair. */
export function firstCharacters(text: string, max: number): string {
  if (text.length <= max) return text;
  let end = 0;
  for (let count = 0; count < max && end < text.length; count++) end += text.codePointAt(end)! > 0xffff ? 2 : 1;
  return text.slice(0, end);
}
