// wallet_create's rules in wallets.ts, apart from its edge: the airdrop bounds checked before anything is made,
// and which failures of a new wallet's balance read are forgiven (only a chain that does not answer).
import { describe, expect, test } from "bun:test";
import { testDeps } from "../../test/helpers/deps.ts";
import type { Deps } from "../deps.ts";
import { AppError } from "../errors.ts";
import { RENT_EXEMPT_WALLET_LAMPORTS, type Ledger } from "../ledger/ledger.ts";
import { createToolRegistry } from "../mcp/tools.ts";
import { Keypair, SystemProgram, VersionedTransaction, type TransactionInstruction } from "@solana/web3.js";
import { compileTransaction } from "../ledger/transactions.ts";
import { checkAirdrop, newWalletBalances, walletHistory } from "./wallets.ts";

const SOL = 1_000_000_000n;
const USDC = 1_000_000n;

/** Outcome of a call: "OK", or its code with the fields it names. */
function outcome(call: () => void): { code: string; fields?: string[] } {
  try {
    call();
  } catch (err) {
    if (!(err instanceof AppError)) throw err;
    const fields = (err.extra.details as { fields?: { field: string }[] } | undefined)?.fields?.map((f) => f.field);
    return { code: err.code, ...(fields ? { fields } : {}) };
  }
  return { code: "OK" };
}

const on = (deps: Deps, network: Deps["config"]["network"]): Deps => ({ ...deps, config: { ...deps.config, network } });

describe("checkAirdrop", () => {
  test("SOL below the rent-exempt minimum (but not 0) is VALIDATION_ERROR on airdropSol, on localnet and devnet; the minimum itself and 0 are fine", async () => {
    const { deps } = await testDeps();
    for (const network of ["localnet", "devnet"] as const) {
      const check = (sol: bigint) => outcome(() => checkAirdrop(on(deps, network), { sol, usdc: 0n }));
      expect(check(1n)).toEqual({ code: "VALIDATION_ERROR", fields: ["airdropSol"] });
      expect(check(RENT_EXEMPT_WALLET_LAMPORTS - 1n)).toEqual({ code: "VALIDATION_ERROR", fields: ["airdropSol"] });
      expect(check(RENT_EXEMPT_WALLET_LAMPORTS)).toEqual({ code: "OK" });
      expect(check(0n)).toEqual({ code: "OK" });
    }
    // On mainnet any airdrop is NOT_SUPPORTED first.
    expect(outcome(() => checkAirdrop(on(deps, "mainnet"), { sol: 1n, usdc: 0n }))).toEqual({ code: "NOT_SUPPORTED" });
  });

  test("wallet_create with airdropSol below the minimum is refused before any wallet is made", async () => {
    const { deps } = await testDeps();
    const registry = createToolRegistry(deps);
    const ctx = {
      deps,
      caller: { kind: "anonymous" as const, tokenError: null },
      session: { id: null, bind: async () => undefined, unbind: async () => undefined },
      client: { ip: "203.0.113.20", userAgent: "airdrop" },
    };
    const wallets = () => (deps.db.sqlite.query("SELECT COUNT(*) AS n FROM custodial_wallets").get() as { n: number }).n;
    expect(await registry.call(ctx, "wallet_create", { airdropSol: "0.0008" })).toMatchObject({
      success: false,
      code: "VALIDATION_ERROR",
      details: { fields: [{ field: "airdropSol" }] },
    });
    expect(wallets()).toBe(0);
    expect(await registry.call(ctx, "wallet_create", { airdropSol: "0.00089088" })).toMatchObject({ success: true, data: { balances: { sol: 0.00089088 } } });
    expect(wallets()).toBe(1);
  });
});

describe("newWalletBalances", () => {
  const failing = (deps: Deps, err: unknown): Deps => {
    const ledger: Ledger = {
      ...deps.ledger,
      getBalances: async () => {
        throw err;
      },
    };
    return { ...deps, ledger };
  };

  test("a chain that does not answer (CHAIN_UNAVAILABLE) gives what the airdrop sent, or nothing, with the error", async () => {
    const { deps } = await testDeps();
    const down = failing(deps, new AppError("CHAIN_UNAVAILABLE", "Solana RPC unavailable: timeout"));
    expect(await newWalletBalances(down, "any", { sol: SOL, usdc: 5n * USDC })).toEqual({
      raw: { sol: SOL, usdc: 5n * USDC },
      error: "CHAIN_UNAVAILABLE: Solana RPC unavailable: timeout",
    });
    expect(await newWalletBalances(down, "any", null)).toEqual({ raw: {}, error: "CHAIN_UNAVAILABLE: Solana RPC unavailable: timeout" });
  });

  test("any other failure of the read is thrown, not dressed up as balances", async () => {
    const { deps } = await testDeps();
    for (const err of [new AppError("INTERNAL_ERROR", "bug"), new AppError("INVALID_ADDRESS", "no address"), new TypeError("undefined is not a function")]) {
      await expect(newWalletBalances(failing(deps, err), "any", { sol: SOL, usdc: 0n })).rejects.toBe(err);
    }
  });
});

describe("walletHistory", () => {
  /** `instructions` landed on the embedded ledger, signed by `signers` (the first pays the fee). */
  async function land(deps: Deps, instructions: TransactionInstruction[], signers: Keypair[]): Promise<string> {
    const wire = compileTransaction(instructions, signers[0]!.publicKey.toBase58(), (await deps.ledger.latestBlockhash()).blockhash);
    const tx = VersionedTransaction.deserialize(wire);
    tx.sign(signers);
    return (await deps.ledger.submit(tx.serialize())).signature;
  }

  test("a transfer to oneself is direction self, the wallet its own counterparty", async () => {
    const { deps } = await testDeps();
    const alice = Keypair.generate();
    const address = alice.publicKey.toBase58();
    await deps.ledger.airdrop(address, { sol: SOL });
    const signature = await land(deps, [SystemProgram.transfer({ fromPubkey: alice.publicKey, toPubkey: alice.publicKey, lamports: SOL / 10n })], [alice]);
    const [latest] = await walletHistory(deps, address, { limit: 5 });
    expect(latest).toMatchObject({ direction: "self", counterparty: address, transfer: { from: address, to: address, amount: SOL / 10n } });
    expect(latest?.tx.signature).toBe(signature);
  });

  test("a transaction in which the wallet both sends and receives is shown by the transfer it sent", async () => {
    const { deps } = await testDeps();
    const [alice, bob] = [Keypair.generate(), Keypair.generate()];
    const [a, b] = [alice.publicKey.toBase58(), bob.publicKey.toBase58()];
    await deps.ledger.airdrop(a, { sol: SOL });
    await deps.ledger.airdrop(b, { sol: SOL });
    // One transaction, both signing: bob pays alice 0.2 SOL, alice pays bob 0.1 SOL.
    await land(
      deps,
      [SystemProgram.transfer({ fromPubkey: bob.publicKey, toPubkey: alice.publicKey, lamports: SOL / 5n }), SystemProgram.transfer({ fromPubkey: alice.publicKey, toPubkey: bob.publicKey, lamports: SOL / 10n })],
      [alice, bob],
    );
    const [forAlice] = await walletHistory(deps, a, { limit: 5 });
    expect(forAlice).toMatchObject({ direction: "out", counterparty: b, transfer: { from: a, to: b, amount: SOL / 10n } });
    const [forBob] = await walletHistory(deps, b, { limit: 5 });
    expect(forBob).toMatchObject({ direction: "out", counterparty: a, transfer: { from: b, to: a, amount: SOL / 5n } });
  });
});
