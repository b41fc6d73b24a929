// The error catalogue against spec/README.md's table, and the one shape every refusal of input takes.
import { expect, test } from "bun:test";
import { readdirSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { AppError, ERROR_STATUS, fieldError, type ErrorCode } from "./errors.ts";

const SPEC_README = join(import.meta.dir, "../../shared/spec/README.md");

test("every code of the spec's error table, and only those, with the spec's HTTP status", () => {
  const rows = [...readFileSync(SPEC_README, "utf8").matchAll(/^\| ([A-Z_]+) \| (\d{3}) \|/gm)].map((m) => [m[1]!, Number(m[2])] as const);
  expect(rows.length).toBeGreaterThan(20);
  expect(Object.fromEntries(rows)).toEqual(ERROR_STATUS);
  for (const [code, status] of rows) expect(new AppError(code as ErrorCode, "x").status).toBe(status);
});

test("a VALIDATION_ERROR names its fields (details.fields), wherever in the source it is made", () => {
  expect(fieldError("tier", "tier must be one of free, pro").extra).toEqual({ details: { fields: [{ field: "tier", message: "tier must be one of free, pro" }] } });
  const sources = (dir: string): string[] =>
    readdirSync(dir).flatMap((name) => {
      const path = join(dir, name);
      if (statSync(path).isDirectory()) return sources(path);
      return path.endsWith(".ts") && !path.endsWith(".test.ts") ? [path] : [];
    });
  const bare: string[] = [];
  for (const path of sources(import.meta.dir)) {
    const text = readFileSync(path, "utf8");
    for (const m of text.matchAll(/new AppError\(\s*"VALIDATION_ERROR"/g)) {
      // The statement's arguments, up to the end of the statement: they must carry details.
      const statement = text.slice(m.index, text.indexOf(";", m.index));
      if (!statement.includes("details")) bare.push(`${path.slice(import.meta.dir.length + 1)}:${text.slice(0, m.index).split("\n").length}`);
    }
  }
  expect(bare).toEqual([]); // use fieldError / invalidField, or pass details
});
