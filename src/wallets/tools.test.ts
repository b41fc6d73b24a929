// Wallet tools in-process through the registry: wallet_create under the sign-in rate limits (a refused
// call stores nothing), how wallet_transfer answers a recipient that would be left below the rent, and
// how a transfer of a token the service does not know is shown (devnet through a LiteSVM-backed RPC).
import { afterAll, beforeAll, expect, test } from "bun:test";
import { Keypair, PublicKey, VersionedTransaction } from "@solana/web3.js";
import { createTransferInstruction } from "@solana/spl-token";
import { testDeps } from "../../test/helpers/deps.ts";
import { startLiteSvmRpc, type LiteSvmRpc } from "../../test/helpers/litesvm-rpc.ts";
import { associatedTokenAddress, compileTransaction, transferInstructions } from "../ledger/transactions.ts";
import type { Deps } from "../deps.ts";
import { formatAmount } from "../lib/amounts.ts";
import { createToolRegistry } from "../mcp/tools.ts";
import { createCustodialWallet } from "./custody.ts";
import { recordUnsentTransfer } from "../../test/helpers/transfer-keys.ts";

const SOL = 1_000_000_000n;

let rpc: LiteSvmRpc;
beforeAll(async () => {
  rpc = await startLiteSvmRpc();
});
afterAll(async () => {
  await rpc.stop();
});

/** `signer`'s signature on wire bytes, base64 (what a connected wallet hands to wallet_submit_transaction). */
function signedBase64(wire: Uint8Array, signer: Keypair): string {
  const tx = VersionedTransaction.deserialize(wire);
  tx.sign([signer]);
  return Buffer.from(tx.serialize()).toString("base64");
}

/** A call context running as `walletAddress` (as a verified session token would make it). */
/** A call with no wallet in its session (as wallet_create is made), from `client`. */
function anonymousContext(deps: Deps, client: { ip: string; userAgent: string }) {
  return {
    deps,
    caller: { kind: "anonymous" as const, tokenError: null },
    session: { id: null, bind: async () => undefined, unbind: async () => undefined },
    client,
  };
}

function walletContext(deps: Deps, walletAddress: string) {
  return {
    deps,
    caller: { kind: "wallet" as const, walletAddress, sessionId: "session", jti: "jti", token: null, issuedAtS: 0, expiresAtS: 2 ** 31, source: "token" as const },
    session: { id: null, bind: async () => undefined, unbind: async () => undefined },
    client: { ip: "203.0.113.10", userAgent: "tools" },
  };
}

test("wallet_create refused by the verification limit leaves no wallet behind", async () => {
  const { deps } = await testDeps({ AUTH_RATE_LIMIT: "on" });
  const registry = createToolRegistry(deps);
  const ctx = anonymousContext(deps, { ip: "203.0.113.9", userAgent: "limits" });
  const codes: string[] = [];
  for (let i = 0; i < 52; i++) {
    const envelope = await registry.call(ctx, "wallet_create", { airdropSol: 0 });
    codes.push(envelope.success ? "OK" : envelope.code);
  }
  // 50 verifications per network per 15 minutes (auth.md): the rest are refused before anything is stored.
  expect(codes.filter((c) => c === "OK")).toHaveLength(50);
  expect(codes.slice(50)).toEqual(["RATE_LIMITED", "RATE_LIMITED"]);
  expect(deps.db.sqlite.query("SELECT COUNT(*) AS n FROM custodial_wallets").get()).toEqual({ n: 50 });
});

test("wallet_create stores its key in the write of its sign-in: a session that cannot be recorded leaves no key, and the reverse", async () => {
  const { deps } = await testDeps();
  const registry = createToolRegistry(deps);
  const ctx = anonymousContext(deps, { ip: "203.0.113.11", userAgent: "one write" });
  const count = (table: string) => (deps.db.sqlite.query(`SELECT COUNT(*) AS n FROM ${table}`).get() as { n: number }).n;
  deps.db.sqlite.run("CREATE TEMP TRIGGER refuse_tokens BEFORE INSERT ON auth_tokens BEGIN SELECT RAISE(ABORT, 'disk full'); END");
  expect(await registry.call(ctx, "wallet_create", { airdropSol: 0 })).toMatchObject({ success: false, code: "INTERNAL_ERROR" });
  expect([count("custodial_wallets"), count("auth_tokens")]).toEqual([0, 0]);
  deps.db.sqlite.run("DROP TRIGGER refuse_tokens");
  deps.db.sqlite.run("CREATE TEMP TRIGGER refuse_wallets BEFORE INSERT ON custodial_wallets BEGIN SELECT RAISE(ABORT, 'disk full'); END");
  expect(await registry.call(ctx, "wallet_create", { airdropSol: 0 })).toMatchObject({ success: false, code: "INTERNAL_ERROR" });
  expect([count("custodial_wallets"), count("auth_tokens")]).toEqual([0, 0]);
  deps.db.sqlite.run("DROP TRIGGER refuse_wallets");
  expect(await registry.call(ctx, "wallet_create", { airdropSol: 0 })).toMatchObject({ success: true });
  expect([count("custodial_wallets"), count("auth_tokens")]).toEqual([1, 1]);
});

test("wallet_transfer: SOL too little for a new recipient account is VALIDATION_ERROR on amount; the sender's own shortfall stays INSUFFICIENT_FUNDS", async () => {
  const { deps } = await testDeps();
  const registry = createToolRegistry(deps);
  const { address } = await createCustodialWallet(deps);
  await deps.ledger.airdrop(address, { sol: 2n * SOL });
  const ctx = walletContext(deps, address);
  const fresh = Keypair.generate().publicKey.toBase58();

  const tooLittle = await registry.call(ctx, "wallet_transfer", { to: fresh, amount: "0.0001", token: "sol" });
  expect(tooLittle).toMatchObject({ success: false, code: "VALIDATION_ERROR", details: { fields: [{ field: "amount" }] } });
  if (tooLittle.success) throw new Error("refused");
  expect(tooLittle.error).toContain("0.00089088 SOL");
  expect((await deps.ledger.getBalances(address)).sol).toBe(2n * SOL); // nothing sent or charged

  // To an account that exists, any amount is fine; the rent minimum is enough for a new one.
  expect(await registry.call(ctx, "wallet_transfer", { to: fresh, amount: "0.00089088", token: "sol" })).toMatchObject({ success: true });
  expect(await registry.call(ctx, "wallet_transfer", { to: fresh, amount: "0.0001", token: "sol" })).toMatchObject({ success: true });

  // Leaving the sender itself below the rent is its shortfall.
  const balance = (await deps.ledger.getBalances(address)).sol!;
  const drain = ((balance - 10_000n) / 1000n) * 1000n;
  const drained = await registry.call(ctx, "wallet_transfer", { to: fresh, amount: formatAmount(drain, 9), token: "sol" });
  expect(drained).toMatchObject({ success: false, code: "INSUFFICIENT_FUNDS" });
});

/** A custodial wallet with 1 SOL and 5 USDC calling the tools, and another custodial wallet to send to. */
async function sender() {
  const { deps } = await testDeps();
  const registry = createToolRegistry(deps);
  const { address } = await createCustodialWallet(deps);
  await deps.ledger.airdrop(address, { sol: SOL, usdc: 5_000_000n });
  return { deps, registry, ctx: walletContext(deps, address), to: (await createCustodialWallet(deps)).address };
}

test("wallet_transfer names tokens in any case (SOL, Usdc), as paymentMethod and currency do; an unknown one lists the keys", async () => {
  const { deps, registry, ctx, to } = await sender();
  expect(await registry.call(ctx, "wallet_transfer", { to, amount: "0.01", token: "SOL" })).toMatchObject({ success: true, data: { token: "sol" } });
  expect(await registry.call(ctx, "wallet_transfer", { to, amount: "1", token: "Usdc" })).toMatchObject({ success: true, data: { token: "usdc" } });
  expect(await deps.ledger.getBalances(to)).toEqual({ sol: SOL / 100n, usdc: 1_000_000n, wgt: 0n });
  expect(await registry.call(ctx, "wallet_transfer", { to, amount: "1", token: "btc" })).toMatchObject({
    success: false,
    code: "VALIDATION_ERROR",
    error: "token must be one of sol, usdc, wgt",
  });
});

test("wallet_transfer: a memo of 200 characters that does not fit a transaction's 1,232 bytes is VALIDATION_ERROR on memo, and nothing moves", async () => {
  const { deps, registry, ctx, to } = await sender(); // `to` has no USDC account yet: the transfer opens one
  const emoji = "😀".repeat(200); // 200 characters, 800 bytes
  const refused = await registry.call(ctx, "wallet_transfer", { to, amount: "1", token: "usdc", memo: emoji });
  expect(refused).toMatchObject({ success: false, code: "VALIDATION_ERROR", error: expect.stringContaining("shorten the memo"), details: { fields: [{ field: "memo" }] } });
  expect(await deps.ledger.getBalances(to)).toEqual({ sol: 0n, usdc: 0n, wgt: 0n });
  // 200 ASCII characters fit, and so do 200 emoji where no account is opened (SOL).
  expect(await registry.call(ctx, "wallet_transfer", { to, amount: "1", token: "usdc", memo: "m".repeat(200) })).toMatchObject({ success: true });
  expect(await registry.call(ctx, "wallet_transfer", { to, amount: "0.01", token: "sol", memo: emoji })).toMatchObject({ success: true });
  expect(await registry.call(ctx, "wallet_transfer", { to, amount: "1", token: "usdc", memo: "m".repeat(201) })).toMatchObject({ code: "VALIDATION_ERROR" });
});

test("wallet_transfer with an idempotencyKey on devnet (LiteSVM RPC): sent once, the retry answers it, a recorded but unsent one is sent as it is", async () => {
  const { deps, clock } = await testDeps({ NETWORK: "devnet", SOLANA_RPC_URL: rpc.url });
  const registry = createToolRegistry(deps);
  const { address } = await createCustodialWallet(deps);
  rpc.setLamports(address, SOL);
  const ctx = walletContext(deps, address);
  const to = Keypair.generate().publicKey.toBase58();
  const first = await registry.call(ctx, "wallet_transfer", { to, amount: "0.25", token: "sol", idempotencyKey: "rpc-1" });
  if (!first.success) throw new Error(first.error);
  // The same transfer asked as a number: one request (amounts compare in base units).
  const again = await registry.call(ctx, "wallet_transfer", { to, amount: 0.25, token: "sol", idempotencyKey: "rpc-1" });
  expect(again).toMatchObject({ success: true, data: { signature: first.data.signature, amount: "0.25", status: "confirmed" } });
  expect(await registry.call(ctx, "wallet_transfer", { to, amount: "0.3", token: "sol", idempotencyKey: "rpc-1" })).toMatchObject({
    success: false,
    code: "VALIDATION_ERROR",
    details: { fields: [{ field: "idempotencyKey" }] },
  });
  expect(await registry.call(ctx, "wallet_transfer", { to, amount: "0.25", token: "sol", idempotencyKey: "has space" })).toMatchObject({ success: false, code: "VALIDATION_ERROR" });
  expect(await registry.call(ctx, "wallet_transfer", { to, amount: "0.25", token: "sol", idempotencyKey: "k".repeat(65) })).toMatchObject({ success: false, code: "VALIDATION_ERROR" });
  expect((await deps.ledger.getBalances(to)).sol).toBe(SOL / 4n);

  // A crash between the record and the send: the key's retry sends the recorded transaction, once.
  const record = async (key: string) => (await recordUnsentTransfer(deps, address, to, key)).signature;
  const sent = await record("rpc-2");
  const resumed = await registry.call(ctx, "wallet_transfer", { to, amount: "0.1", token: "sol", idempotencyKey: "rpc-2" });
  expect(resumed).toMatchObject({ success: true, data: { signature: sent } });
  expect(await registry.call(ctx, "wallet_transfer", { to, amount: "0.1", token: "sol", idempotencyKey: "rpc-2" })).toMatchObject({ success: true, data: { signature: sent } });
  expect((await deps.ledger.getBalances(to)).sol).toBe(SOL / 4n + SOL / 10n);

  // Recorded, never sent, and its blockhash has lapsed: until the chain is 150 blocks past its last valid
  // height (a node behind may not know a fresh blockhash yet) the answer is CONFLICT, whatever the wall
  // clock says (set forward an hour here); then a new transaction is sent, once.
  const unsent = await record("rpc-3");
  rpc.expireBlockhash();
  clock.advance(3_600_000);
  const ask = () => registry.call(ctx, "wallet_transfer", { to, amount: "0.1", token: "sol", idempotencyKey: "rpc-3" });
  expect(await ask()).toMatchObject({ success: false, code: "CONFLICT", details: { signature: unsent } });
  rpc.expireBlockhash();
  const anew = await ask();
  if (!anew.success) throw new Error(anew.error);
  expect(anew.data.signature).not.toBe(unsent);
  expect(await ask()).toMatchObject({ success: true, data: { signature: anew.data.signature } });
  expect((await deps.ledger.getBalances(to)).sol).toBe(SOL / 4n + 2n * (SOL / 10n));
});

test("a token the service does not know is shown by its mint, in whole tokens: wallet_submit_transaction and wallet_get_history", async () => {
  const { deps } = await testDeps({ NETWORK: "devnet", SOLANA_RPC_URL: rpc.url });
  const registry = createToolRegistry(deps);
  const user = Keypair.generate(); // a connected wallet: it signs for itself
  const address = user.publicKey.toBase58();
  const recipient = Keypair.generate().publicKey.toBase58();
  rpc.setLamports(address, SOL);
  const mint = rpc.createMint(2);
  rpc.mintTokens(mint, address, 100_000n); // 1,000.00
  const ctx = walletContext(deps, address);

  // TransferChecked carries its decimals: 2.5 tokens, never "250" nor SOL.
  const checked = transferInstructions({ from: address, to: recipient, feePayer: address, amount: 250n, spl: { mint, decimals: 2 }, createRecipientAccount: true, memo: null });
  const sent = await registry.call(ctx, "wallet_submit_transaction", {
    transaction: signedBase64(compileTransaction(checked, address, (await deps.ledger.latestBlockhash()).blockhash), user),
  });
  expect(sent).toMatchObject({ success: true, data: { from: address, to: recipient, token: mint, amount: "2.5" } });

  // A plain Token Transfer says no decimals; the node's token balances do.
  const plain = createTransferInstruction(new PublicKey(associatedTokenAddress(address, mint)), new PublicKey(associatedTokenAddress(recipient, mint)), user.publicKey, 1_234n);
  const second = await registry.call(ctx, "wallet_submit_transaction", {
    transaction: signedBase64(compileTransaction([plain], address, (await deps.ledger.latestBlockhash()).blockhash), user),
  });
  expect(second).toMatchObject({ success: true, data: { token: mint, amount: "12.34" } });

  const history = await registry.call(ctx, "wallet_get_history", {});
  if (!history.success) throw new Error(history.error);
  const items = (history.data.transactions as { token: string; amount: string; direction: string }[]).map(({ token, amount, direction }) => ({ token, amount, direction }));
  expect(items).toEqual([
    { token: mint, amount: "12.34", direction: "out" },
    { token: mint, amount: "2.5", direction: "out" },
  ]);
});

test("a transfer whose token and decimals nothing tells (a failed plain Token Transfer) is no transfer: 0 SOL, never base units", async () => {
  const { deps } = await testDeps();
  const registry = createToolRegistry(deps);
  const user = Keypair.generate();
  const address = user.publicKey.toBase58();
  await deps.ledger.airdrop(address, { sol: SOL });
  // Neither account is a token account: the Token program fails it, fee charged, recorded.
  const plain = createTransferInstruction(Keypair.generate().publicKey, Keypair.generate().publicKey, user.publicKey, 777n);
  const failed = await registry.call(walletContext(deps, address), "wallet_submit_transaction", {
    transaction: signedBase64(compileTransaction([plain], address, (await deps.ledger.latestBlockhash()).blockhash), user),
  });
  expect(failed).toMatchObject({ success: false, code: "TRANSACTION_REJECTED", details: { reason: "execution_failed" } });
  const history = await registry.call(walletContext(deps, address), "wallet_get_history", { limit: 1 });
  expect(history).toMatchObject({ success: true, data: { transactions: [{ status: "failed", token: "sol", amount: "0" }] } });
  // A node that gives no block time for a transaction (0 in the ledger's terms): its timestamp is null, not 1970.
  const timeless = { ...deps, ledger: { ...deps.ledger, history: async (...args: Parameters<typeof deps.ledger.history>) => (await deps.ledger.history(...args)).map((t) => ({ ...t, timestamp: 0 })) } };
  expect(await registry.call(walletContext(timeless, address), "wallet_get_history", { limit: 1 })).toMatchObject({ success: true, data: { transactions: [{ timestamp: null }] } });
});

test("wallet_create on devnet with the chain not answering still returns the wallet and its token, balances as known", async () => {
  const { deps } = await testDeps({ NETWORK: "devnet", SOLANA_RPC_URL: "http://127.0.0.1:9" }); // nothing listens there
  const registry = createToolRegistry(deps);
  const ctx = anonymousContext(deps, { ip: "203.0.113.11", userAgent: "offline" });
  const created = await registry.call(ctx, "wallet_create", { airdropSol: 1 });
  if (!created.success) throw new Error(`${created.code}: ${created.error}`);
  expect(created.data).toMatchObject({ authenticated: true, isNewSession: true, balances: { sol: 0, usdc: 0 } });
  expect(created.data.airdropError).toStartWith("CHAIN_UNAVAILABLE");
  expect(created.data.balancesError).toStartWith("CHAIN_UNAVAILABLE");
  expect(typeof created.data.sessionToken).toBe("string");
});

test("wallet_create off localnet: no airdrop on mainnet (none by default, one asked for is NOT_SUPPORTED), no USDC airdrop on devnet", async () => {
  const mainnetEnv = {
    NETWORK: "mainnet",
    SOLANA_RPC_URL: "http://127.0.0.1:9", // nothing listens there: no airdrop may even be tried
    JWT_SECRET: "mainnet-test-secret-mainnet-test-secret-01",
    WALLET_ENCRYPTION_KEY: "00".repeat(32),
    AUTH_RATE_LIMIT: "on", // required on mainnet; one wallet_create per test client stays under its limits
  };
  const { deps: mainnet } = await testDeps(mainnetEnv);
  const onMainnet = createToolRegistry(mainnet);
  const ctx = anonymousContext(mainnet, { ip: "203.0.113.12", userAgent: "mainnet" });
  const wallets = () => (mainnet.db.sqlite.query("SELECT count(*) AS n FROM custodial_wallets").get() as { n: number }).n;
  for (const params of [{ airdropSol: 1 }, { airdropSol: "0.5" }, { airdropUsdc: 1 }]) {
    expect(await onMainnet.call(ctx, "wallet_create", params)).toMatchObject({ success: false, code: "NOT_SUPPORTED", error: "there are no airdrops on mainnet" });
  }
  expect(wallets()).toBe(0); // a refused call makes no wallet
  const created = await onMainnet.call(ctx, "wallet_create", {});
  if (!created.success) throw new Error(`${created.code}: ${created.error}`);
  expect(created.data).toMatchObject({ network: "mainnet", authenticated: true });
  expect(created.data).not.toHaveProperty("airdropError"); // none asked for by default, none tried
  expect(wallets()).toBe(1);

  const { deps: devnet } = await testDeps({ NETWORK: "devnet", SOLANA_RPC_URL: "http://127.0.0.1:9" });
  const onDevnet = createToolRegistry(devnet);
  const devCtx = anonymousContext(devnet, { ip: "203.0.113.13", userAgent: "devnet" });
  expect(await onDevnet.call(devCtx, "wallet_create", { airdropSol: 0, airdropUsdc: 1 })).toMatchObject({
    success: false,
    code: "NOT_SUPPORTED",
    error: "USDC airdrops exist only on localnet",
  });
});

test("wallet_transfer and wallet_submit_transaction: 120 calls a minute per wallet; refused ones send nothing", async () => {
  const { deps, clock } = await testDeps({ AUTH_RATE_LIMIT: "on" });
  const registry = createToolRegistry(deps);
  const { address } = await createCustodialWallet(deps);
  await deps.ledger.airdrop(address, { sol: 2n * SOL });
  const ctx = walletContext(deps, address);
  const to = Keypair.generate().publicKey.toBase58();
  expect(await registry.call(ctx, "wallet_transfer", { to, amount: "0.001", token: "sol" })).toMatchObject({ success: true });
  for (let i = 1; i < 120; i++) {
    const call = i % 2 === 0 ? registry.call(ctx, "wallet_transfer", { to, amount: "0.000001", token: "sol" }) : registry.call(ctx, "wallet_submit_transaction", { transaction: "AA==" });
    const envelope = await call;
    if (!envelope.success) expect(envelope.code).not.toBe("RATE_LIMITED"); // a bad transaction is refused for what it is
  }
  const before = await deps.ledger.getBalances(to);
  expect(await registry.call(ctx, "wallet_transfer", { to, amount: "0.000001", token: "sol" })).toMatchObject({ success: false, code: "RATE_LIMITED", retryAfter: 60 });
  expect(await registry.call(ctx, "wallet_submit_transaction", { transaction: "AA==" })).toMatchObject({ success: false, code: "RATE_LIMITED" });
  expect(await deps.ledger.getBalances(to)).toEqual(before);
  clock.advance(60_000);
  expect(await registry.call(ctx, "wallet_transfer", { to, amount: "0.000001", token: "sol" })).toMatchObject({ success: true });
});

test("wallet_get_history: 60 calls a minute per wallet and 300 per client network (on RPC networks each may cost ~100 RPC requests)", async () => {
  const { deps, clock } = await testDeps({ AUTH_RATE_LIMIT: "on" });
  const registry = createToolRegistry(deps);
  const wallets = await Promise.all(Array.from({ length: 6 }, async () => (await createCustodialWallet(deps)).address));
  const ctx = walletContext(deps, wallets[0]!);
  for (let i = 0; i < 60; i++) expect([i, (await registry.call(ctx, "wallet_get_history", {})).success]).toEqual([i, true]);
  expect(await registry.call(ctx, "wallet_get_history", {})).toMatchObject({ success: false, code: "RATE_LIMITED", retryAfter: 60 });
  // Other wallets of the same client network: 300 in all, then refused whoever asks.
  for (const wallet of wallets.slice(1, 5)) {
    for (let i = 0; i < 60; i++) expect((await registry.call(walletContext(deps, wallet), "wallet_get_history", {})).success).toBe(true);
  }
  expect(await registry.call(walletContext(deps, wallets[5]!), "wallet_get_history", {})).toMatchObject({ success: false, code: "RATE_LIMITED" });
  clock.advance(60_000);
  expect(await registry.call(ctx, "wallet_get_history", {})).toMatchObject({ success: true });
});
