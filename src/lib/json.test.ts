import { describe, expect, test } from "bun:test";
import { jsonNestsDeeperThan } from "./json.ts";

describe("jsonNestsDeeperThan", () => {
  test("counts arrays and objects, not brackets inside strings or escaped quotes", () => {
    expect(jsonNestsDeeperThan('{"a":[1,{"b":2}]}', 3)).toBe(false);
    expect(jsonNestsDeeperThan('{"a":[1,{"b":[]}]}', 3)).toBe(true);
    expect(jsonNestsDeeperThan(`{"a":"${"[".repeat(100)}"}`, 1)).toBe(false);
    expect(jsonNestsDeeperThan(`{"a":"\\"${"{".repeat(100)}\\""}`, 1)).toBe(false);
    expect(jsonNestsDeeperThan(`{"a":"\\\\",${'"b":'.repeat(1)}[[]]}`, 2)).toBe(true); // an escaped backslash ends before the quote
    expect(jsonNestsDeeperThan("[".repeat(33) + "]".repeat(33), 32)).toBe(true);
    expect(jsonNestsDeeperThan("[".repeat(32) + "]".repeat(32), 32)).toBe(false);
    expect(jsonNestsDeeperThan("", 0)).toBe(false);
  });
});
