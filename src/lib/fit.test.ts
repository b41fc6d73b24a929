import { expect, test } from "bun:test";
import { headWithin } from "./fit.ts";

test("headWithin keeps the longest head whose JSON fits, one item at least", () => {
  const items = ["aaaa", "bbbb", "cccc"]; // 6 characters each as JSON
  expect(headWithin(items, 12)).toEqual(["aaaa", "bbbb"]);
  expect(headWithin(items, 11)).toEqual(["aaaa"]);
  expect(headWithin(items, 1)).toEqual(["aaaa"]);
  expect(headWithin(items, 18)).toEqual(items);
  expect(headWithin([], 1)).toEqual([]);
});
