// Text cut and counted by characters (code points), as the schemas and SQLite count them.
import { expect, test } from "bun:test";
import { characters, firstCharacters } from "./text.ts";

test("firstCharacters counts code points: a pair (an emoji) is one character and is never split; a lone surrogate is one", () => {
  expect(firstCharacters("abc", 5)).toBe("abc");
  expect(firstCharacters("abcdef", 3)).toBe("abc");
  expect(firstCharacters("\u{1F600}".repeat(4), 3)).toBe("\u{1F600}".repeat(3));
  expect(firstCharacters("a\u{1F600}b", 2)).toBe("a\u{1F600}");
  expect(firstCharacters("\ud800x\u{1F600}y", 3)).toBe("\ud800x\u{1F600}");
  expect(firstCharacters("\u{1F600}".repeat(4), 0)).toBe("");
});

test("characters counts code points: an emoji is one, a lone surrogate is one", () => {
  expect(characters("")).toBe(0);
  expect(characters("abc")).toBe(3);
  expect(characters("\u{1F600}\u{1F600}")).toBe(2);
  expect(characters("\ud800a")).toBe(2);
});
