// A process that hammers the embedded ledger with transfers between a few wallets and prints each
// acknowledged signature, so a test can kill -9 it mid-burst. Usage: bun transfer-burst.ts <dataDir>
import { Keypair, VersionedTransaction } from "@solana/web3.js";
import { join } from "node:path";
import { migrate } from "../../src/db/migrate.ts";
import { openDatabase } from "../../src/db/open.ts";
import { systemClock } from "../../src/lib/clock.ts";
import { cryptoRandom } from "../../src/lib/ids.ts";
import { inlineVerifier } from "../../src/lib/verifier.ts";
import { createEmbeddedLedger } from "../../src/ledger/embedded/ledger.ts";

const dataDir = process.argv[2]!;
const db = openDatabase(join(dataDir, "walletgate.db"));
migrate(db.sqlite, Date.now());
const ledger = await createEmbeddedLedger({
  config: { serviceToken: { symbol: "wgt", decimals: 6, mint: null } },
  db,
  clock: systemClock,
  random: cryptoRandom,
  verifier: inlineVerifier,
});
const wallets = Array.from({ length: 6 }, () => Keypair.generate());
for (const w of wallets) await ledger.airdrop(w.publicKey.toBase58(), { sol: 2_000_000_000n, usdc: 100_000_000n });
process.stdout.write("ready\n");

let i = 0;
async function one(): Promise<void> {
  const n = i++;
  const from = wallets[n % wallets.length]!;
  const to = n % 3 === 0 ? Keypair.generate().publicKey.toBase58() : wallets[(n * 7 + 1) % wallets.length]!.publicKey.toBase58();
  const token = n % 2 === 0 ? "sol" : "usdc";
  const amount = token === "sol" ? 1_000_000n + BigInt(n) : 1000n + BigInt(n);
  const wire = await ledger.buildTransfer({ from: from.publicKey.toBase58(), to, token, amount, memo: `burst ${n}` });
  const tx = VersionedTransaction.deserialize(wire);
  tx.sign([from]);
  try {
    const { signature } = await ledger.submit(tx.serialize(), { ownTransfer: true });
    process.stdout.write(`ack ${signature}\n`);
  } catch (err) {
    process.stdout.write(`err ${(err as Error).message}\n`);
  }
}
// Many in flight at once, so the kill lands in the middle of batched commits.
for (;;) await Promise.all(Array.from({ length: 16 }, one));
