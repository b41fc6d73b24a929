import { expect, test } from "bun:test";
import { headWithin } from "./fit.ts";

test("headWithin keeps the longest head whose JSON fits, commas counted, one item at least", () => {
  const items = ["aaaa", "bbbb", "cccc"]; // 6 characters each as JSON, and a comma between two
  expect(headWithin(items, 13)).toEqual(["aaaa", "bbbb"]);
  expect(headWithin(items, 12)).toEqual(["aaaa"]);
  expect(headWithin(items, 1)).toEqual(["aaaa"]);
  expect(headWithin(items, 20)).toEqual(items);
  expect(headWithin(items, 19)).toEqual(["aaaa", "bbbb"]);
  expect(headWithin([], 1)).toEqual([]);
  // The array's JSON is the items, the commas and its two brackets.
  for (let max = 6; max <= 25; max++) expect(JSON.stringify(headWithin(items, max)).length).toBeLessThanOrEqual(max + 2);
});
