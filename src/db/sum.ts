// Exact sums of amounts (integers up to 2^63-1 each, spec README "Amounts"). SQLite's SUM over integers
// fails with "integer overflow" once a total passes 2^63-1, which a few large amounts can reach. The high
// and low 32 bits are summed apart instead (each partial sum stays in range for up to 2^31 rows) and
// joined as a bigint. Standard SQL operators only (>> and &), as PostgreSQL has them too.

/** Select-list terms `<alias>High` and `<alias>Low` (text) for an exact SUM of `column`; join with `joinSum`. */
export function splitSum(column: string, alias: string): string {
  return `CAST(SUM(${column} >> 32) AS TEXT) AS ${alias}High, CAST(SUM(${column} & 4294967295) AS TEXT) AS ${alias}Low`;
}

/** The sum whose halves `splitSum` selected (null halves, from no rows, are 0). */
export function joinSum(high: string | null, low: string | null): bigint {
  return (BigInt(high ?? 0) << 32n) + BigInt(low ?? 0);
}
