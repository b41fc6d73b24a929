// Amounts: decimal strings or JSON numbers at the edge ⇄ integer base units (bigint) everywhere else.
import { firstCharacters } from "./text.ts";

const MAX_BASE_UNITS = 2n ** 63n - 1n;
/** A decimal of at most 15 significant digits survives a double exactly; more may come out rounded. */
const MAX_EXACT_NUMBER_UNITS = 10n ** 15n - 1n;
const DECIMAL = /^(\d+)(?:\.(\d+))?$/;

export type ParsedAmount = { value: bigint } | { error: string };

/**
 * Parses `1.5`, `"1.5"` or `"0.000005"` into base units of a token with `decimals`. Refuses more
 * fractional digits than the token has, zero (unless `allowZero`), negatives, NaN, Infinity, exponents in
 * strings, anything above 2^63-1 base units, and a JSON number of 10^15 base units or more (it may be rounded).
 */
export function parseAmount(input: unknown, decimals: number, options: { allowZero?: boolean } = {}): ParsedAmount {
  let text: string;
  if (typeof input === "number") {
    if (!Number.isFinite(input)) return { error: "amount must be a finite number" };
    // Plain decimal notation of the number as JSON wrote it (1e-7 → "0.0000001").
    text = input.toLocaleString("en-US", { useGrouping: false, maximumFractionDigits: 20 });
  } else if (typeof input === "string") {
    text = input.trim();
  } else {
    return { error: "amount must be a number or a decimal string" };
  }
  const match = DECIMAL.exec(text);
  if (match === null) return { error: `amount must be a positive decimal number, got "${firstCharacters(text, 40)}"` };
  const whole = match[1]!;
  const fraction = match[2] ?? "";
  if (fraction.length > decimals) return { error: `amount has more than ${decimals} decimal places` };
  const value = BigInt(whole + fraction.padEnd(decimals, "0"));
  if (value === 0n && !options.allowZero) return { error: "amount must be greater than zero" };
  if (value > MAX_BASE_UNITS) return { error: "amount is too large" };
  // A JSON number of more base units may already have been rounded when the JSON was read (the amount
  // written is not known from the number), so it is not guessed.
  if (typeof input === "number" && value > MAX_EXACT_NUMBER_UNITS) {
    return { error: `an amount above ${MAX_EXACT_NUMBER_UNITS} base units must be sent as a decimal string (a JSON number that large may be rounded)` };
  }
  return { value };
}

/** Base units → decimal string in whole-token units without trailing zeros (`1500000n, 6` → `"1.5"`). */
export function formatAmount(baseUnits: bigint, decimals: number): string {
  const negative = baseUnits < 0n;
  const digits = (negative ? -baseUnits : baseUnits).toString().padStart(decimals + 1, "0");
  const whole = digits.slice(0, digits.length - decimals);
  const fraction = digits.slice(digits.length - decimals).replace(/0+$/, "");
  return `${negative ? "-" : ""}${whole}${fraction ? `.${fraction}` : ""}`;
}

/** Base units → a JSON number in whole-token units (balances, as the source documents show them). */
export function amountToNumber(baseUnits: bigint, decimals: number): number {
  // Both operands exact in a double: the division is correctly rounded, as parsing the decimal string is,
  // so the two give the same number (tested); the string is only needed beyond 2^53.
  if (decimals <= 15 && baseUnits <= MAX_EXACT && baseUnits >= -MAX_EXACT) return Number(baseUnits) / 10 ** decimals;
  return Number(formatAmount(baseUnits, decimals));
}

const MAX_EXACT = BigInt(Number.MAX_SAFE_INTEGER);
