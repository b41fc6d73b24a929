// The mainnet audit log: every transfer submitted through the service's ledger is recorded with its outcome.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { Keypair } from "@solana/web3.js";
import { testDeps } from "../../test/helpers/deps.ts";
import { codeOf } from "../../test/helpers/errors.ts";
import { startLiteSvmRpc, type LiteSvmRpc } from "../../test/helpers/litesvm-rpc.ts";
import { createCustodialWallet } from "../wallets/custody.ts";
import { transferFromWallet } from "../wallets/transfer.ts";
import { listAudit } from "./store.ts";

const SOL = 1_000_000_000n;
let rpc: LiteSvmRpc;

beforeAll(async () => {
  rpc = await startLiteSvmRpc();
});
afterAll(async () => {
  await rpc.stop();
});

const mainnetEnv = () => ({
  NETWORK: "mainnet",
  SOLANA_RPC_URL: rpc.url,
  JWT_SECRET: "m".repeat(40),
  WALLET_ENCRYPTION_KEY: "ab".repeat(32),
  AUTH_RATE_LIMIT: "on",
});

describe("mainnet audit log", () => {
  test("a confirmed transfer and a refused one are both logged with who, what and how it ended", async () => {
    const { deps } = await testDeps(mainnetEnv());
    const from = (await createCustodialWallet(deps)).address;
    const to = Keypair.generate().publicKey.toBase58();
    rpc.setLamports(from, SOL);

    const sent = await transferFromWallet(deps, { from, to, token: "sol", amount: SOL / 4n });
    if (sent.kind !== "submitted") throw new Error("custodial transfers are submitted");
    const [row] = await listAudit(deps.db, sent.result.signature);
    expect(row).toMatchObject({ network: "mainnet", feePayer: from, outcome: "confirmed", errorCode: null });
    expect(JSON.parse(row!.transfers)).toEqual([{ token: "sol", mint: null, from, to, amount: String(SOL / 4n) }]);

    expect(await codeOf(transferFromWallet(deps, { from, to, token: "sol", amount: 5n * SOL }))).toBe("INSUFFICIENT_FUNDS");
    const all = deps.db.sqlite.query("SELECT outcome, error_code AS errorCode FROM ledger_audit ORDER BY id").all();
    expect(all).toEqual([
      { outcome: "confirmed", errorCode: null },
      { outcome: "rejected", errorCode: "INSUFFICIENT_FUNDS" },
    ]);
  });

  test("the row is on record before the transaction is sent: while the outcome is awaited it says unknown", async () => {
    const { deps } = await testDeps(mainnetEnv());
    const from = (await createCustodialWallet(deps)).address;
    rpc.setLamports(from, SOL);
    rpc.setDropTransactions(true); // sent, never lands: the ledger waits for it
    try {
      const outcome = codeOf(transferFromWallet(deps, { from, to: Keypair.generate().publicKey.toBase58(), token: "sol", amount: SOL / 4n }));
      const rows = () => deps.db.sqlite.query("SELECT outcome, error_code AS errorCode FROM ledger_audit").all();
      for (let i = 0; i < 100 && rows().length === 0; i++) await Bun.sleep(20);
      expect(rows()).toEqual([{ outcome: "unknown", errorCode: null }]); // what a crash now would leave
      rpc.expireBlockhash(); // the wait ends: it can no longer land
      expect(await outcome).toBe("TRANSACTION_REJECTED");
      expect(rows()).toEqual([{ outcome: "rejected", errorCode: "TRANSACTION_REJECTED" }]);
    } finally {
      rpc.setDropTransactions(false);
    }
  });

  test("off mainnet nothing is logged", async () => {
    const { deps } = await testDeps();
    const from = (await createCustodialWallet(deps)).address;
    await deps.ledger.airdrop(from, { sol: SOL });
    await transferFromWallet(deps, { from, to: Keypair.generate().publicKey.toBase58(), token: "sol", amount: SOL / 4n });
    expect(deps.db.sqlite.query("SELECT COUNT(*) AS n FROM ledger_audit").get()).toEqual({ n: 0 });
  });
});
