// Blockhashes of the embedded ledger: one per 400 ms slot of clock time since genesis, each valid for
// 150 slots, as on Solana. They are derived from a secret genesis seed, so nothing needs storing.
import { createHash } from "node:crypto";
import type { Clock } from "../../lib/clock.ts";
import { encodeBase58 } from "../../lib/encoding.ts";

export const SLOT_MS = 400;
export const BLOCKHASH_VALID_SLOTS = 150;
/** How far back an old blockhash is still recognised, to say "expired" rather than "unknown". */
const REMEMBERED_SLOTS = 2_000;

export type BlockhashCheck = { ok: true; slot: number } | { ok: false; reason: "blockhash_not_found" | "blockhash_expired" };

export type Blockhashes = {
  currentSlot(): number;
  hashOf(slot: number): string;
  check(blockhash: string): BlockhashCheck;
};

export function blockhashes(seed: Uint8Array, genesisMs: number, clock: Clock): Blockhashes {
  const hashOf = (slot: number): string => {
    const slotBytes = Buffer.alloc(8);
    slotBytes.writeBigUInt64LE(BigInt(slot));
    return encodeBase58(createHash("sha256").update("walletgate localnet blockhash\n").update(seed).update(slotBytes).digest());
  };
  const currentSlot = () => Math.max(0, Math.floor((clock.now() - genesisMs) / SLOT_MS));

  // Blockhash → slot for the remembered window, extended as the clock moves.
  const known = new Map<string, number>();
  let newest = -1;
  const refresh = (now: number) => {
    if (now < newest) {
      known.clear(); // the clock went back (tests): start the window again
      newest = -1;
    }
    const oldest = Math.max(0, now - REMEMBERED_SLOTS);
    for (let slot = Math.max(oldest, newest + 1); slot <= now; slot++) known.set(hashOf(slot), slot);
    newest = now;
    if (known.size > REMEMBERED_SLOTS + 1) {
      for (const [hash, slot] of known) if (slot < oldest) known.delete(hash);
    }
  };

  return {
    currentSlot,
    hashOf,
    check(blockhash) {
      const now = currentSlot();
      refresh(now);
      const slot = known.get(blockhash);
      if (slot === undefined) return { ok: false, reason: "blockhash_not_found" };
      if (now - slot > BLOCKHASH_VALID_SLOTS) return { ok: false, reason: "blockhash_expired" };
      return { ok: true, slot };
    },
  };
}
