import { describe, expect, test } from "bun:test";
import { amountToNumber, formatAmount, parseAmount } from "./amounts.ts";

const ok = (input: unknown, decimals: number, allowZero = false) => {
  const r = parseAmount(input, decimals, { allowZero });
  if ("error" in r) throw new Error(r.error);
  return r.value;
};
const err = (input: unknown, decimals: number) => {
  const r = parseAmount(input, decimals);
  return "error" in r ? r.error : null;
};

describe("parseAmount", () => {
  test("decimal strings and JSON numbers become base units", () => {
    expect(ok("1.5", 6)).toBe(1_500_000n);
    expect(ok(1.5, 6)).toBe(1_500_000n);
    expect(ok("0.000005", 9)).toBe(5000n);
    expect(ok(0.0000001, 9)).toBe(100n);
    expect(ok("9.99", 6)).toBe(9_990_000n);
    expect(ok("7", 0)).toBe(7n);
    expect(ok(" 2 ", 9)).toBe(2_000_000_000n);
    expect(ok("9223372036854775807", 0)).toBe(2n ** 63n - 1n);
  });

  test("zero only where allowed (airdrops)", () => {
    expect(err("0", 6)).toContain("greater than zero");
    expect(err(0, 6)).toContain("greater than zero");
    expect(ok("0", 6, true)).toBe(0n);
  });

  test("refuses what is not a positive amount of this token", () => {
    for (const bad of ["-1", -1, "1e3", "0x10", "", ".5", "5.", "1,5", "NaN", "Infinity", "1.2.3", null, undefined, {}, [1], true]) {
      expect(err(bad, 6)).not.toBeNull();
    }
    expect(err(Number.NaN, 6)).toContain("finite");
    expect(err(Number.POSITIVE_INFINITY, 6)).toContain("finite");
    expect(err("1.0000001", 6)).toContain("6 decimal places");
    expect(err("9223372036854775808", 0)).toContain("too large");
    expect(err("9223372036.854775808", 9)).toContain("too large");
    // JSON numbers of 10^15 base units or more may have been rounded by JSON.parse: a decimal string is asked for.
    expect(err(JSON.parse("12345678.123456789"), 9)).toContain("decimal string");
    expect(err(JSON.parse("50000000.000000001"), 9)).toContain("decimal string");
    expect(ok("12345678.123456789", 9)).toBe(12_345_678_123_456_789n);
    expect(err(JSON.parse("9007199.254740991"), 9)).toContain("decimal string"); // read as ...990
    expect(ok(JSON.parse("999999.999999999"), 9)).toBe(999_999_999_999_999n); // 15 digits: exact
  });
});

describe("formatAmount", () => {
  test("base units to whole-token decimal strings", () => {
    expect(formatAmount(1_500_000n, 6)).toBe("1.5");
    expect(formatAmount(5000n, 9)).toBe("0.000005");
    expect(formatAmount(0n, 6)).toBe("0");
    expect(formatAmount(9_990_000n, 6)).toBe("9.99");
    expect(formatAmount(7n, 0)).toBe("7");
    expect(formatAmount(-5000n, 9)).toBe("-0.000005");
    expect(formatAmount(2n ** 63n - 1n, 9)).toBe("9223372036.854775807");
  });

  test("round-trips with parseAmount", () => {
    for (const [text, decimals] of [["123.456789", 6], ["0.000000001", 9], ["18446744073", 0]] as const) {
      expect(formatAmount(ok(text, decimals), decimals)).toBe(text);
    }
  });

  test("balances as JSON numbers", () => {
    expect(amountToNumber(1_500_000_000n, 9)).toBe(1.5);
    expect(amountToNumber(0n, 6)).toBe(0);
  });

  test("the fast division gives exactly the number the decimal string parses to", () => {
    const cases: [bigint, number][] = [
      [1n, 9], [3n, 1], [7n, 6], [100_000n, 6], [999_999_999n, 9], [-123_456_789n, 6],
      [BigInt(Number.MAX_SAFE_INTEGER), 9], [BigInt(Number.MAX_SAFE_INTEGER) + 1n, 9], [2n ** 64n - 1n, 6],
    ];
    let seed = 42;
    const random = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31);
    for (let i = 0; i < 20_000; i++) {
      const value = (BigInt(random()) << 22n) ^ BigInt(random());
      cases.push([i % 2 === 0 ? value : -value, random() % 16]);
    }
    for (const [units, decimals] of cases) expect(amountToNumber(units, decimals)).toBe(Number(formatAmount(units, decimals)));
  });
});
