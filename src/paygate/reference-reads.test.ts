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
