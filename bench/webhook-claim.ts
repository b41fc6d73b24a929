// The delivery worker's claim against a due backlog: a database with N due deliveries (one owner's 20
// endpoints holding nearly all of them, 20 other owners one each), then the time of one claim as the started
// loop makes it (16 free slots, one per endpoint), median of 20. Run: bun bench/webhook-claim.ts [N ...]
// (default 10000 100000). It runs against any version of the store, to compare the claim before and after.
import { migrate } from "../src/db/migrate.ts";
import { openDatabase } from "../src/db/open.ts";
import * as store from "../src/webhooks/store.ts";

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)]!;
}

async function claimMs(due: number): Promise<number> {
  const db = openDatabase(":memory:");
  const now = 1_700_000_000_000;
  migrate(db.sqlite, now);
  await db.write(() => {
    for (let i = 0; i < due; i++) {
      const owner = i < 20 ? `owner_${i}` : "owner_big";
      const endpointId = i < 20 ? `whe_small_${i}` : `whe_big_${i % 20}`;
      const eventId = `evt_${i}`;
      store.insertEventInWrite(db, { id: eventId, targetKind: "owner", targetId: owner, type: "product.created", payload: "{}", createdAt: now - due + i });
      store.insertDeliveryInWrite(db, { id: `whd_${i}`, eventId, endpointKind: "owner_endpoint", endpointId, now: now - due + i });
    }
  });
  const samples: number[] = [];
  for (let run = 0; run < 20; run++) {
    const t0 = performance.now();
    await store.claimDueDeliveries(db, { now, leaseUntil: now + 75_000, token: `claim_${run}`, limit: 16, kinds: ["owner_endpoint", "agent"], perEndpoint: 1, busy: [] });
    samples.push(performance.now() - t0);
  }
  db.close();
  return median(samples);
}

const sizes = process.argv.slice(2).map(Number);
for (const n of sizes.length > 0 ? sizes : [10_000, 100_000]) console.log(`${n} due deliveries: claim ${(await claimMs(n)).toFixed(2)} ms (median of 20)`);
