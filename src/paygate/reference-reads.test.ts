// The per-checkout progress through a crowded reference: kept in constant size, least recently looked at forgotten first.
import { expect, test } from "bun:test";
import { AppError } from "../errors.ts";
import { createReferenceReads } from "./reference-reads.ts";

test("progress is kept per checkout, replaced as it moves on, and the least recently looked at is forgotten first", () => {
  const reads = createReferenceReads(2);
  const refusal = new AppError("PAYMENT_MISMATCH", "the fee payer must be the checkout's wallet", { details: { reason: "payer" } });
  reads.record("chk_a", { through: "sig1", refusal });
  reads.record("chk_b", { through: "sig2", refusal });
  expect(reads.progress("chk_a")).toEqual({ through: "sig1", refusal }); // looked at: now the most recent
  reads.record("chk_c", { through: "sig3", refusal }); // over the limit: chk_b goes, not chk_a
  expect(reads.progress("chk_b")).toBeNull();
  expect(reads.progress("chk_a")?.through).toBe("sig1");
  reads.record("chk_a", { through: "sig4", refusal });
  expect(reads.progress("chk_a")?.through).toBe("sig4");
  expect(reads.progress("chk_c")?.through).toBe("sig3");
  reads.forget("chk_a");
  expect(reads.progress("chk_a")).toBeNull();
});

test("the set of checkouts already logged as crowded is bounded too: past `kept` it starts again (mutation review)", () => {
  // reference-reads.ts firstCrowded: `if (crowded.size >= kept) crowded.clear()` dropped → the set grows with
  // every crowded reference ever seen, for as long as the process runs.
  const reads = createReferenceReads(2);
  expect(["chk_a", "chk_b", "chk_a"].map((id) => reads.firstCrowded(id))).toEqual([true, true, false]);
  expect(reads.firstCrowded("chk_c")).toBe(true); // over the bound: the set was cleared, then chk_c kept
  expect(reads.firstCrowded("chk_a")).toBe(true); // forgotten: logged again, once
});
