// Whether a sent transaction no one can read yet may still land (landing.ts), rule by rule: the wall clock only
// adds time, the chain's height decides once a limit is recorded, rows without one are judged by the clock
// and the blockhash, and a transaction the ledger has is never given up.
import { describe, expect, test } from "bun:test";
import { manualClock } from "../lib/clock.ts";
import type { Deps } from "../deps.ts";
import { SENT_KEPT_MS, mayStillLand, sentMayLand } from "./landing.ts";

/** A node whose blockhash answer, height and transaction lookup are set by the test. */
function node(state: { blockhashValid: boolean; height: number; has: boolean }) {
  const clock = manualClock();
  const ledger = {
    blockhashValid: async () => state.blockhashValid,
    blockHeight: async () => state.height,
    getTransaction: async () => (state.has ? ({ signature: "s" } as unknown) : null),
  } as unknown as Deps["ledger"];
  return { deps: { clock, ledger }, clock };
}

describe("mayStillLand", () => {
  test("with a landing limit: within the kept time it may; after, the blockhash or a height not past the limit says so", async () => {
    const state = { blockhashValid: false, height: 1_000, has: false };
    const { deps, clock } = node(state);
    const sent = { blockhash: "b", submittedAt: clock.now(), validHeight: 1_100 };
    expect(await mayStillLand(deps, sent)).toBe(true); // just sent
    clock.advance(SENT_KEPT_MS);
    expect(await mayStillLand(deps, sent)).toBe(true); // the node behind: its height is not past the limit
    state.height = 1_101;
    expect(await mayStillLand(deps, sent)).toBe(false);
    state.blockhashValid = true;
    expect(await mayStillLand(deps, sent)).toBe(true);
  });

  test("with a landing limit, a wall clock stepped forward or back is judged by the height", async () => {
    const state = { blockhashValid: false, height: 1_000, has: false };
    const { deps, clock } = node(state);
    const sent = { blockhash: "b", submittedAt: clock.now(), validHeight: 1_100 };
    clock.advance(3_600_000); // forward an hour: the height has not moved, so it may still land
    expect(await mayStillLand(deps, sent)).toBe(true);
    clock.advance(-7_200_000); // back before it was sent: the clock does not count it as fresh
    state.height = 1_200;
    expect(await mayStillLand(deps, sent)).toBe(false);
  });

  test("without a limit (rows kept before one was recorded): the kept time, else the blockhash", async () => {
    const state = { blockhashValid: false, height: 1_000_000, has: false };
    const { deps, clock } = node(state);
    const sent = { blockhash: "b", submittedAt: clock.now(), validHeight: null };
    clock.advance(SENT_KEPT_MS / 2);
    expect(await mayStillLand(deps, sent)).toBe(true); // sent a minute ago, whatever the node says of its blockhash
    clock.advance(SENT_KEPT_MS / 2);
    expect(await mayStillLand(deps, sent)).toBe(false);
    state.blockhashValid = true;
    expect(await mayStillLand(deps, sent)).toBe(true);
  });
});

describe("sentMayLand", () => {
  test("a transaction the ledger has is never given up, past every limit", async () => {
    const state = { blockhashValid: false, height: 2_000, has: true };
    const { deps, clock } = node(state);
    const sent = { signature: "s", blockhash: "b", submittedAt: clock.now(), validHeight: 1_100 };
    clock.advance(SENT_KEPT_MS);
    expect(await sentMayLand(deps, sent)).toBe(true);
    state.has = false;
    expect(await sentMayLand(deps, sent)).toBe(false);
  });
});
