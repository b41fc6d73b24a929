// The error catalogue against spec/README.md's table, and the shape fieldError gives a refusal of input.
import { expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { AppError, ERROR_STATUS, fieldError, type ErrorCode } from "./errors.ts";

const SPEC_README = join(import.meta.dir, "../../shared/spec/README.md");

test("every code of the spec's error table, and only those, with the spec's HTTP status", () => {
  const rows = [...readFileSync(SPEC_README, "utf8").matchAll(/^\| ([A-Z_]+) \| (\d{3}) \|/gm)].map((m) => [m[1]!, Number(m[2])] as const);
  expect(rows.length).toBeGreaterThan(20);
  expect(Object.fromEntries(rows)).toEqual(ERROR_STATUS);
  for (const [code, status] of rows) expect(new AppError(code as ErrorCode, "x").status).toBe(status);
});

test("fieldError is a VALIDATION_ERROR naming its field in details.fields (test/architecture.test.ts holds the source to it)", () => {
  expect(fieldError("tier", "tier must be one of free, pro").extra).toEqual({ details: { fields: [{ field: "tier", message: "tier must be one of free, pro" }] } });
  expect(fieldError("tier", "x").code).toBe("VALIDATION_ERROR");
});
