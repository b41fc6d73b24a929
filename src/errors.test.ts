// The error catalogue against spec/README.md's table, and the shape fieldError gives a refusal of input.
import { expect, test } from "bun:test";
import { readShared } from "../test/helpers/shared.ts";
import { AppError, ERROR_STATUS, fieldError, requirePage, textField, type ErrorCode } from "./errors.ts";


/** What `fn` threw (an AppError, or a test failure if anything else), or null when it returned. */
function thrownBy(fn: () => unknown): AppError | null {
  try {
    fn();
  } catch (err) {
    if (err instanceof AppError) return err;
    throw err;
  }
  return null;
}

test("every code of the spec's error table, and only those, with the spec's HTTP status", () => {
  const rows = [...readShared("spec/README.md").matchAll(/^\| ([A-Z_]+) \| (\d{3}) \|/gm)].map((m) => [m[1]!, Number(m[2])] as const);
  expect(rows.length).toBeGreaterThan(20);
  expect(Object.fromEntries(rows)).toEqual(ERROR_STATUS);
  for (const [code, status] of rows) expect(new AppError(code as ErrorCode, "x").status).toBe(status);
});

test("fieldError is a VALIDATION_ERROR naming its field in details.fields (test/architecture.test.ts holds the source to it)", () => {
  expect(fieldError("tier", "tier must be one of free, pro").extra).toEqual({ details: { fields: [{ field: "tier", message: "tier must be one of free, pro" }] } });
  expect(fieldError("tier", "x").code).toBe("VALIDATION_ERROR");
});

test("requirePage: defaults, the ranges, and a refusal that says the range (every list pages through it)", () => {
  const range = { default: 20, max: 100 };
  expect(requirePage({}, range)).toEqual({ limit: 20, offset: 0 });
  expect(requirePage({ limit: 100, offset: Number.MAX_SAFE_INTEGER }, range)).toEqual({ limit: 100, offset: Number.MAX_SAFE_INTEGER });
  const refusal = (page: { limit?: number; offset?: number }) => thrownBy(() => requirePage(page, range))?.extra.details ?? null;
  for (const limit of [0, 101, 1.5, -1, Number.NaN]) {
    expect(refusal({ limit })).toEqual({ fields: [{ field: "limit", message: "limit: must be a whole number from 1 to 100" }] });
  }
  // 2^53 and 1e20 are whole numbers of 0 or more: the refusal names the largest one taken.
  for (const offset of [-1, 0.5, 2 ** 53, 1e20]) {
    expect(refusal({ offset })).toEqual({ fields: [{ field: "offset", message: "offset: must be a whole number from 0 to 9007199254740991" }] });
  }
});

test("textField: a lone surrogate is refused (SQLite would store U+FFFD instead); a pair, as in an emoji, is text", () => {
  expect(textField(" Caf\u00e9 \ud83d\ude00 ", "title", 10, true)).toBe("Caf\u00e9 \ud83d\ude00");
  for (const text of ["a\ud800b", "\udc00", "end \ud83d", "\ude00\ud83d"]) {
    const caught = thrownBy(() => textField(text, "title", 100, true));
    expect(caught).toBeInstanceOf(AppError);
    expect(caught?.code).toBe("VALIDATION_ERROR");
    expect(caught?.message).toBe("title: must be well-formed Unicode: a surrogate (\\uD800\u2013\\uDFFF) needs its pair");
    expect(caught?.extra).toEqual({ details: { fields: [{ field: "title", message: caught?.message }] } });
  }
});
