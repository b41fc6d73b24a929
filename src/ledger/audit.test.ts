// The mainnet audit log: every transfer submitted through the service's ledger is recorded with its outcome.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { Keypair, PublicKey, VersionedTransaction } from "@solana/web3.js";
import { createTransferInstruction } from "@solana/spl-token";
import { testDeps } from "../../test/helpers/deps.ts";
import { codeOf } from "../../test/helpers/errors.ts";
import { startLiteSvmRpc, type LiteSvmRpc } from "../../test/helpers/litesvm-rpc.ts";
import { createCustodialWallet } from "../wallets/custody.ts";
import { transferFromWallet } from "../wallets/transfer.ts";
import { loadConfig } from "../config.ts";
import { requireNetwork } from "./create.ts";
import { listAudit } from "./store.ts";
import { associatedTokenAddress, compileTransaction } from "./transactions.ts";

const SOL = 1_000_000_000n;
const USDC = 1_000_000n;
const MAINNET_USDC = "EPjFWdd5AufqSSqeM2qN1xzybapC8G4wEGGkZwyTDt1v";
let rpc: LiteSvmRpc;

beforeAll(async () => {
  rpc = await startLiteSvmRpc();
  rpc.createMint(6, MAINNET_USDC);
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

  test("a database from before the network's record, holding only audited transfers, is mainnet's: it starts there and nowhere else", async () => {
    const { deps } = await testDeps(mainnetEnv());
    const from = (await createCustodialWallet(deps)).address;
    rpc.setLamports(from, SOL);
    await transferFromWallet(deps, { from, to: Keypair.generate().publicKey.toBase58(), token: "sol", amount: SOL / 4n });
    expect(deps.db.sqlite.query("SELECT network FROM ledger_audit").all()).toEqual([{ network: "mainnet" }]); // written as the real path writes it
    expect(() => requireNetwork(loadConfig({ DATA_DIR: "/nonexistent" }), deps.db, false)).toThrow("this database is served on NETWORK=mainnet, not localnet");
    requireNetwork(deps.config, deps.db, true);
    await deps.db.settled();
    expect(deps.db.sqlite.query("SELECT network FROM network_in_use").all()).toEqual([{ network: "mainnet" }]);
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

  test("token transfers are logged between wallets, a plain Transfer included, as the landed transaction reads", async () => {
    const { deps } = await testDeps(mainnetEnv());
    const from = (await createCustodialWallet(deps)).address;
    rpc.setLamports(from, SOL);
    rpc.mintTokens(MAINNET_USDC, from, 10n * USDC);
    const to = Keypair.generate().publicKey.toBase58();
    const logged = async (signature: string) => {
      const [row] = await listAudit(deps.db, signature);
      return { outcome: row!.outcome, transfers: JSON.parse(row!.transfers) as unknown };
    };
    // The first transfer creates the recipient's token account, the second finds it: both name the recipient's wallet.
    for (const amount of [USDC, 2n * USDC]) {
      const sent = await transferFromWallet(deps, { from, to, token: "usdc", amount });
      if (sent.kind !== "submitted") throw new Error("custodial transfers are submitted");
      expect(await logged(sent.result.signature)).toEqual({
        outcome: "confirmed",
        transfers: [{ token: "usdc", mint: MAINNET_USDC, from, to, amount: String(amount), decimals: 6 }],
      });
    }
    // A connected wallet's own transaction: a plain Transfer (no mint in it) between existing token accounts.
    const user = Keypair.generate();
    const userAddress = user.publicKey.toBase58();
    rpc.setLamports(userAddress, SOL);
    rpc.mintTokens(MAINNET_USDC, userAddress, 5n * USDC);
    const plain = async (amount: bigint) => {
      const ix = createTransferInstruction(new PublicKey(associatedTokenAddress(userAddress, MAINNET_USDC)), new PublicKey(associatedTokenAddress(to, MAINNET_USDC)), user.publicKey, amount);
      const tx = VersionedTransaction.deserialize(compileTransaction([ix], userAddress, (await deps.ledger.latestBlockhash()).blockhash));
      tx.sign([user]);
      return tx.serialize();
    };
    const landed = await deps.ledger.submit(await plain(2n * USDC));
    expect(await logged(landed.signature)).toEqual({
      outcome: "confirmed",
      transfers: [{ token: "usdc", mint: MAINNET_USDC, from: userAddress, to, amount: String(2n * USDC), decimals: 6 }],
    });
    // A node that answers without token balances cannot resolve the plain Transfer: its reading would lose it,
    // so the row keeps the transaction's own (the token accounts, the amount), with the outcome.
    rpc.setAnswerFilter((method, answer) => {
      if (method !== "getTransaction" || answer.result === null || typeof answer.result !== "object") return answer;
      const result = answer.result as { meta: Record<string, unknown> };
      return { ...answer, result: { ...result, meta: { ...result.meta, preTokenBalances: [], postTokenBalances: [] } } };
    });
    try {
      const unresolved = await deps.ledger.submit(await plain(3n * USDC));
      expect(await logged(unresolved.signature)).toEqual({
        outcome: "confirmed",
        transfers: [{ token: "unknown", mint: null, from: userAddress, to: associatedTokenAddress(to, MAINNET_USDC), amount: String(3n * USDC) }],
      });
    } finally {
      rpc.setAnswerFilter(null);
    }
    // Before it is sent (and if it never lands) the row has what the transaction alone says: the amount between
    // the token accounts it names, of a token it does not name.
    rpc.setDropTransactions(true);
    try {
      const wire = await plain(USDC); // another amount: another transaction than the one that landed
      const outcome = codeOf(deps.ledger.submit(wire));
      const rows = () => deps.db.sqlite.query("SELECT outcome, transfers FROM ledger_audit WHERE outcome = 'unknown'").all() as { transfers: string }[];
      for (let i = 0; i < 100 && rows().length === 0; i++) await Bun.sleep(20);
      const told = [{ token: "unknown", mint: null, from: userAddress, to: associatedTokenAddress(to, MAINNET_USDC), amount: String(USDC) }];
      expect(rows().map((r) => JSON.parse(r.transfers))).toEqual([told]);
      rpc.expireBlockhash();
      expect(await outcome).toBe("TRANSACTION_REJECTED");
      const [rejected] = deps.db.sqlite.query("SELECT outcome, transfers FROM ledger_audit ORDER BY id DESC LIMIT 1").all() as { outcome: string; transfers: string }[];
      expect({ outcome: rejected!.outcome, transfers: JSON.parse(rejected!.transfers) }).toEqual({ outcome: "rejected", transfers: told });
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
