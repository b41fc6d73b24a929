// Orders on an RPC network (devnet, against a LiteSVM-backed JSON-RPC server): the escrow transaction is
// recorded with the order in paying/releasing/refunding before it is sent, finished when the chain
// confirms it, and settled by the reconciler when the answer was lost (the transaction landed), when it
// never left (sent again), or when its blockhash expired (the order goes back; nothing moved).
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { ComputeBudgetProgram, Keypair, NonceAccount, PublicKey, SystemProgram, Transaction, TransactionInstruction, TransactionMessage, VersionedTransaction } from "@solana/web3.js";
import { ACCOUNT_SIZE, TOKEN_PROGRAM_ID, createApproveInstruction, createInitializeAccount3Instruction, createTransferCheckedInstruction, getAssociatedTokenAddressSync } from "@solana/spl-token";
import { startLiteSvmRpc, type LiteSvmRpc } from "../../../test/helpers/litesvm-rpc.ts";
import { testDeps } from "../../../test/helpers/deps.ts";
import type { Deps } from "../../deps.ts";
import { AppError } from "../../errors.ts";
import { associatedTokenAddress } from "../../ledger/transactions.ts";
import { setTokenAccount } from "../../../test/helpers/litesvm-accounts.ts";
import { createCustodialWallet } from "../../wallets/custody.ts";
import { registerAgent } from "../agents.ts";
import { startConversation } from "../conversations.ts";
import { escrowWallet } from "./escrow.ts";
import * as ordersStore from "./store.ts";
import { parseTransaction } from "../../ledger/transactions.ts";
import { sha256Hex } from "../../lib/hash.ts";
import {
  acceptOrder,
  cancelOrder,
  completeOrder,
  createOrder,
  declineOrder,
  deliverOrder,
  disputeOrder,
  escrowedTotals,
  listOrders,
  movePayoutHoldsWithClock,
  AUTO_RELEASE_MS,
  PAYOUT_WAIT_MS,
  PROPOSAL_TTL_MS,
  RECONCILE_AFTER_MS,
  runOrderTimers,
} from "./orders.ts";
import { newBuyer, paymentVariant, signCheckout, signatureOf } from "../../../test/helpers/checkout.ts";

const SOL = 1_000_000_000n;
const USDC = 1_000_000n;
const FEE_WALLET = Keypair.generate().publicKey.toBase58();
let rpc: LiteSvmRpc;
beforeAll(async () => {
  rpc = await startLiteSvmRpc();
});
afterAll(async () => {
  await rpc.stop();
});

async function setup() {
  const { deps, clock } = await testDeps({ NETWORK: "devnet", SOLANA_RPC_URL: rpc.url, MARKETPLACE_FEE_BPS: "250", MARKETPLACE_FEE_WALLET: FEE_WALLET });
  const provider = (await createCustodialWallet(deps)).address;
  const consumer = (await createCustodialWallet(deps)).address;
  rpc.setLamports(consumer, SOL);
  rpc.mintUsdc(consumer, 100n * USDC);
  rpc.setLamports(await escrowWallet(deps), SOL); // on RPC networks the operator funds the escrow's fees
  rpc.mintUsdc(provider, 0n); // a provider is paid into its own USDC account: the escrow opens none (escrow.ts)
  const agent = await registerAgent(deps, provider, { endpoint: "https://agent.example/hook", profile: { name: "Agent", basePrice: "1" } });
  const { conversation } = await startConversation(deps, consumer, agent.agentId, "hello");
  const propose = async (price: string) =>
    (await createOrder(deps, provider, { conversationId: conversation.conversationId, description: "work", price, deliveryTime: 60 })).orderId;
  const accept = (d: Deps, orderId: string) => acceptOrder(d, consumer, { orderId, conversationId: conversation.conversationId, paymentMethod: "usdc" });
  /** An order proposed, paid into escrow and delivered: ready to be released. */
  const delivered = async (price: string) => {
    const orderId = await propose(price);
    await accept(deps, orderId);
    await deliverOrder(deps, provider, { orderId, result: "done" });
    return orderId;
  };
  const status = async (orderId: string) => (await listOrders(deps, consumer, "consumer", { limit: 100 })).orders.find((o) => o.orderId === orderId)!.status;
  const usdc = async (address: string) => (await deps.ledger.getBalances(address)).usdc ?? 0n;
  /** The reconciler's round once a recorded transaction is old enough to be its business. */
  const reconcile = () => {
    clock.advance(RECONCILE_AFTER_MS);
    return runOrderTimers(deps);
  };
  return { deps, clock, provider, consumer, propose, accept, delivered, status, usdc, reconcile };
}

/** An action's answer in one word: "ok", or the code it was refused with. */
const answerOf = (action: Promise<unknown>) => action.then(() => "ok", (err: AppError) => err.code);

/** A connected (non-custodial) consumer with `usdc` base units, in a conversation with a new agent of m's provider. */
async function connectedConsumer(m: Awaited<ReturnType<typeof setup>>, usdc: bigint) {
  const { wallet, keypair } = newBuyer();
  rpc.setLamports(wallet.address, SOL);
  rpc.mintUsdc(wallet.address, usdc);
  const agent = await registerAgent(m.deps, m.provider, { endpoint: "https://agent.example/connected", profile: { name: "Connected", basePrice: "1" } });
  const { conversation } = await startConversation(m.deps, wallet.address, agent.agentId, "hello");
  const propose = async (price: string) => {
    const { orderId } = await createOrder(m.deps, m.provider, { conversationId: conversation.conversationId, description: "work", price, deliveryTime: 60 });
    return { orderId, conversationId: conversation.conversationId, paymentMethod: "usdc" };
  };
  /** The offer for an order: the unsigned escrow transfer handed out. */
  const offer = async (ask: Awaited<ReturnType<typeof propose>>) => {
    const answer = await acceptOrder(m.deps, wallet.address, ask);
    if (!("unsignedTransaction" in answer)) throw new Error("a connected consumer gets an offer");
    return answer.unsignedTransaction;
  };
  return { address: wallet.address, keypair, propose, offer };
}

/** Sends signed wire bytes as a wallet would, past any check of ours (skipPreflight): what fails in execution lands failed. */
async function sendSkippingPreflight(wire: Uint8Array): Promise<string> {
  const sent = await fetch(rpc.url, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "sendTransaction", params: [Buffer.from(wire).toString("base64"), { encoding: "base64", skipPreflight: true }] }),
  });
  return ((await sent.json()) as { result: string }).result;
}

function clockAdvance(m: { deps: Deps }, ms: number) {
  (m.deps.clock as unknown as { advance(ms: number): void }).advance(ms);
}

/**
 * The reconciler's round on a node that answers getTransaction with null (it pruned the transactions, or is
 * behind another), once the chain has moved past the recorded transactions' blockhash life.
 */
async function reconcilePastLifeWithoutTransactions(m: { reconcile(): Promise<number> }): Promise<number> {
  rpc.setAnswerFilter((method, answer) => (method === "getTransaction" ? { ...answer, result: null } : answer));
  try {
    rpc.advanceSlots(400);
    return await m.reconcile();
  } finally {
    rpc.setAnswerFilter(null);
  }
}

/** The same deps whose ledger loses the answer of `submit`: `sent` says whether the transaction went out first. */
function losingAnswers(deps: Deps, sent: boolean): Deps {
  return {
    ...deps,
    ledger: {
      ...deps.ledger,
      submit: async (wire, options) => {
        if (sent) await deps.ledger.submit(wire, options);
        throw new AppError("CHAIN_UNAVAILABLE", "the RPC did not answer");
      },
    },
  };
}

describe("orders on an RPC network", () => {
  test("paid → delivered → completed: exact balances, fee in the same transaction, escrow invariant", async () => {
    const m = await setup();
    const escrow = await escrowWallet(m.deps);
    const feeBefore = await m.usdc(FEE_WALLET);
    const orderId = await m.propose("40");
    const paid = await m.accept(m.deps, orderId);
    expect(paid.order.status).toBe("paid");
    expect([await m.usdc(m.consumer), await m.usdc(escrow)]).toEqual([60n * USDC, 40n * USDC]);
    expect(await escrowedTotals(m.deps)).toEqual({ usdc: 40n * USDC });
    await deliverOrder(m.deps, m.provider, { orderId, result: "done" });
    const done = await completeOrder(m.deps, m.consumer, { orderId, rating: 4 });
    expect(done.status).toBe("completed");
    expect([await m.usdc(m.provider), (await m.usdc(FEE_WALLET)) - feeBefore, await m.usdc(escrow)]).toEqual([39n * USDC, 1n * USDC, 0n]);
  }, 60_000);

  test("a payout to a party without a token account waits for one: the escrow opens none, and its SOL pays fees only", async () => {
    const m = await setup();
    const escrow = await escrowWallet(m.deps);
    const usdcMint = (await m.deps.ledger.tokens()).find((t) => t.key === "usdc")!.mint!;
    const closeUsdcAccount = (wallet: string) => rpc.setLamports(associatedTokenAddress(wallet, usdcMint), 0n);
    const refusal = (err: AppError): Record<string, unknown> => ({ code: err.code, ...(err.extra.details as object) });
    // The provider closed its USDC account (taking its rent back) before a tiny order was completed.
    const orderId = await m.delivered("0.000001");
    closeUsdcAccount(m.provider);
    const solBefore = (await m.deps.ledger.getBalances(escrow)).sol!;
    const refused = await completeOrder(m.deps, m.consumer, { orderId, rating: 5 }).catch((err: AppError) => err);
    expect(refusal(refused as AppError)).toEqual({ code: "INVALID_STATE", reason: "recipient_account_missing", wallet: m.provider, token: "usdc" });
    expect((refused as AppError).message).toContain("the provider's wallet");
    expect(await m.status(orderId)).toBe("delivered");
    // The 72-hour release waits too, looked at again an hour later (not every round).
    let looks = 0;
    const counted: Deps = { ...m.deps, ledger: { ...m.deps.ledger, tokenAccountExists: (a) => (looks++, m.deps.ledger.tokenAccountExists(a)) } };
    m.clock.advance(AUTO_RELEASE_MS);
    expect([await runOrderTimers(counted), looks]).toEqual([0, 1]);
    const dueAt = (await ordersStore.findOrder(m.deps.db, orderId))!.dueAt;
    m.clock.advance(PAYOUT_WAIT_MS - 1);
    expect([await runOrderTimers(counted), looks]).toEqual([0, 1]);
    expect(await m.status(orderId)).toBe("delivered");
    // Waiting moves no time limit of the order: the 72 hours for a dispute are over.
    expect((await ordersStore.findOrder(m.deps.db, orderId))!.dueAt).toBe(dueAt);
    expect(await answerOf(disputeOrder(m.deps, m.consumer, orderId, "too late"))).toBe("INVALID_STATE");
    // Once the provider has an account again, the next look pays it.
    rpc.mintUsdc(m.provider, 0n);
    m.clock.advance(1);
    expect(await runOrderTimers(counted)).toBe(1);
    expect([await m.status(orderId), await m.usdc(m.provider)]).toEqual(["completed", 1n]);
    // A refund waits the same way for the consumer's account.
    const paidId = await m.propose("2");
    await m.accept(m.deps, paidId);
    closeUsdcAccount(m.consumer);
    const cancel = await cancelOrder(m.deps, m.provider, paidId, "cannot do it").catch((err: AppError) => err);
    expect(refusal(cancel as AppError)).toEqual({ code: "INVALID_STATE", reason: "recipient_account_missing", wallet: m.consumer, token: "usdc" });
    expect([await m.status(paidId), await m.usdc(escrow)]).toEqual(["paid", 2n * USDC]);
    // Its deadline passes: the refund waits, and the deadline still holds (no late delivery).
    m.clock.advance(60 * 60_000);
    expect(await runOrderTimers(m.deps)).toBe(0);
    m.clock.advance(PAYOUT_WAIT_MS / 2);
    expect(await answerOf(deliverOrder(m.deps, m.provider, { orderId: paidId, result: "late" }))).toBe("INVALID_STATE");
    expect(await m.status(paidId)).toBe("paid");
    // No rent left the escrow: what it spent is its transaction's fee (5,000 lamports a signature).
    expect(solBefore - (await m.deps.ledger.getBalances(escrow)).sol!).toBe(5_000n);
  }, 60_000);

  test("a held payout's next look moves with a step of the wall clock; the order's own due time does not", async () => {
    const m = await setup();
    const usdcMint = (await m.deps.ledger.tokens()).find((t) => t.key === "usdc")!.mint!;
    const orderId = await m.delivered("0.000001");
    rpc.setLamports(associatedTokenAddress(m.provider, usdcMint), 0n); // the provider closed its USDC account
    const dueAt = (await ordersStore.findOrder(m.deps.db, orderId))!.dueAt!;
    m.clock.advance(AUTO_RELEASE_MS + 3 * 3_600_000); // the release is 3 h overdue (the server was down)
    expect(await runOrderTimers(m.deps)).toBe(0); // held: looked at again in an hour
    const heldAt = m.clock.now();
    rpc.mintUsdc(m.provider, 0n); // the account is back
    // NTP sets the clock back 2 h: the next look is still an hour away, not three.
    m.clock.set(heldAt - 2 * 3_600_000);
    expect(await movePayoutHoldsWithClock(m.deps, 3_600_000, m.clock.now())).toBe(0); // a step forward moves none
    expect(await movePayoutHoldsWithClock(m.deps, -2 * 3_600_000, m.clock.now())).toBe(1);
    expect((await ordersStore.findOrder(m.deps.db, orderId))!.dueAt).toBe(dueAt); // told to both parties: kept as told
    m.clock.advance(PAYOUT_WAIT_MS - 1);
    expect(await runOrderTimers(m.deps)).toBe(0);
    m.clock.advance(1);
    expect(await runOrderTimers(m.deps)).toBe(1);
    expect([await m.status(orderId), await m.usdc(m.provider)]).toEqual(["completed", 1n]);
  }, 60_000);

  test("an account closed between the escrow's check and the payout's build is not reopened: the payout fails, nothing moves", async () => {
    const m = await setup();
    const escrow = await escrowWallet(m.deps);
    const usdcMint = (await m.deps.ledger.tokens()).find((t) => t.key === "usdc")!.mint!;
    const orderId = await m.delivered("3");
    const solBefore = (await m.deps.ledger.getBalances(escrow)).sol!;
    // The provider's close lands right after the escrow looked.
    const racing: Deps = {
      ...m.deps,
      ledger: {
        ...m.deps.ledger,
        tokenAccountExists: async (a) => {
          const exists = await m.deps.ledger.tokenAccountExists(a);
          rpc.setLamports(associatedTokenAddress(m.provider, usdcMint), 0n);
          return exists;
        },
      },
    };
    expect(await answerOf(completeOrder(racing, m.consumer, { orderId, rating: 5 }))).not.toBe("ok");
    expect(await m.status(orderId)).toBe("delivered");
    expect([(await m.deps.ledger.getBalances(escrow)).sol, await m.usdc(escrow)]).toEqual([solBefore, 3n * USDC]);
    expect(await m.deps.ledger.tokenAccountExists(associatedTokenAddress(m.provider, usdcMint))).toBe(false);
  }, 60_000);

  test("an answer lost after the payment landed: the order waits in paying, and the reconciler finishes it", async () => {
    const m = await setup();
    const orderId = await m.propose("10");
    await expect(m.accept(losingAnswers(m.deps, true), orderId)).rejects.toMatchObject({ code: "CHAIN_UNAVAILABLE" });
    expect(await m.status(orderId)).toBe("paying");
    expect(await m.accept(m.deps, orderId).catch((e: AppError) => e.code)).toBe("INVALID_STATE"); // no second payment
    expect(await runOrderTimers(m.deps)).toBe(0); // too fresh: the request that sent it may still be waiting
    expect(await m.reconcile()).toBe(1);
    expect(await m.status(orderId)).toBe("paid");
    expect(await m.usdc(m.consumer)).toBe(90n * USDC);
  }, 60_000);

  test("a payment that never left is sent again by the reconciler", async () => {
    const m = await setup();
    const orderId = await m.propose("10");
    await expect(m.accept(losingAnswers(m.deps, false), orderId)).rejects.toMatchObject({ code: "CHAIN_UNAVAILABLE" });
    expect([await m.status(orderId), await m.usdc(m.consumer)]).toEqual(["paying", 100n * USDC]);
    expect(await m.reconcile()).toBe(1);
    expect([await m.status(orderId), await m.usdc(m.consumer)]).toEqual(["paid", 90n * USDC]);
  }, 60_000);

  test("a payment whose blockhash expired unsent: the order goes back to proposed and nothing moved", async () => {
    const m = await setup();
    const orderId = await m.propose("10");
    await expect(m.accept(losingAnswers(m.deps, false), orderId)).rejects.toMatchObject({ code: "CHAIN_UNAVAILABLE" });
    rpc.expireBlockhash();
    expect(await m.reconcile()).toBe(0); // expired, but a node behind another might still accept it: a margin of 150 blocks
    rpc.advanceSlots(151);
    expect(await m.reconcile()).toBe(1);
    expect([await m.status(orderId), await m.usdc(m.consumer)]).toEqual(["proposed", 100n * USDC]);
    expect((await m.accept(m.deps, orderId)).order.status).toBe("paid"); // and it can be paid again
  }, 60_000);

  test("a refund a lagging node calls expired (it landed) is the reconciler's: found landed, not sent again", async () => {
    const m = await setup();
    const orderId = await m.propose("10");
    await m.accept(m.deps, orderId);
    const lagging: Deps = {
      ...m.deps,
      ledger: {
        ...m.deps.ledger,
        submit: async (wire, options) => {
          await m.deps.ledger.submit(wire, options);
          throw new AppError("TRANSACTION_REJECTED", "the transaction expired before it landed", { details: { reason: "blockhash_expired" } });
        },
      },
    };
    await expect(cancelOrder(lagging, m.provider, orderId)).rejects.toMatchObject({ code: "CHAIN_UNAVAILABLE" });
    expect(await m.status(orderId)).toBe("refunding"); // not back to paid, where a second refund could follow
    expect(await m.reconcile()).toBe(1);
    expect([await m.status(orderId), await m.usdc(m.consumer)]).toEqual(["cancelled", 100n * USDC]);
  }, 60_000);

  test("a release whose answer was lost: releasing, then completed by the reconciler, paid once", async () => {
    const m = await setup();
    const orderId = await m.delivered("20");
    const feeBefore = await m.usdc(FEE_WALLET); // the fee wallet is shared by the tests of this file
    await expect(completeOrder(losingAnswers(m.deps, true), m.consumer, { orderId })).rejects.toMatchObject({ code: "CHAIN_UNAVAILABLE" });
    expect(await m.status(orderId)).toBe("releasing");
    expect(await escrowedTotals(m.deps)).toEqual({ usdc: 20n * USDC }); // until confirmed it counts as held
    expect(await m.reconcile()).toBe(1);
    expect(await m.status(orderId)).toBe("completed");
    expect([await m.usdc(m.provider), (await m.usdc(FEE_WALLET)) - feeBefore]).toEqual([19_500_000n, 500_000n]);
    expect(await m.reconcile()).toBe(0);
  }, 60_000);

  test("a release that paid, which the node calls unknown past its height, is found in the ledger's history: finished, paid once", async () => {
    const m = await setup();
    const escrow = await escrowWallet(m.deps);
    const [a, b, c] = [await m.delivered("10"), await m.delivered("10"), await m.delivered("10")];
    await disputeOrder(m.deps, m.consumer, c, "not what I asked for"); // its 10 stay in escrow
    await expect(completeOrder(losingAnswers(m.deps, true), m.consumer, { orderId: a })).rejects.toMatchObject({ code: "CHAIN_UNAVAILABLE" }); // landed
    await expect(completeOrder(losingAnswers(m.deps, false), m.consumer, { orderId: b })).rejects.toMatchObject({ code: "CHAIN_UNAVAILABLE" }); // never sent
    expect([await m.status(a), await m.status(b), await m.usdc(escrow)]).toEqual(["releasing", "releasing", 20n * USDC]);
    // A node without the transactions (pruned, or behind another): both unknown to getTransaction.
    expect(await reconcilePastLifeWithoutTransactions(m)).toBe(2);
    // a is in the ledger's history as succeeded: finished, not undone; b is not there: back to delivered, to be released anew.
    expect([await m.status(a), await m.status(b), await m.status(c)]).toEqual(["completed", "delivered", "disputed"]);
    clockAdvance(m, 72 * 3_600_000); // b's auto-release
    expect(await m.reconcile()).toBe(1);
    expect(await m.status(b)).toBe("completed");
    expect([await m.usdc(m.provider), await m.usdc(escrow)]).toEqual([2n * 9_750_000n, 10n * USDC]); // each paid once, less the 2.5 % fee
    expect(await escrowedTotals(m.deps)).toEqual({ usdc: 10n * USDC });
  }, 60_000);

  test("a payment that landed and failed, which the node calls unknown past its height, is undone, not counted as paid", async () => {
    const m = await setup();
    const orderId = await m.propose("10");
    // The consumer's USDC is gone by the time the payment lands: it fails there, its fee charged.
    let landedFailed = "";
    const draining: Deps = {
      ...m.deps,
      ledger: {
        ...m.deps.ledger,
        submit: async (wire) => {
          setTokenAccount(rpc.svm, new PublicKey(associatedTokenAddress(m.consumer, rpc.usdcMint)), { mint: new PublicKey(rpc.usdcMint), owner: new PublicKey(m.consumer), amount: 0n });
          // Sent as a wallet would, past any check of ours: it lands, and fails in execution.
          const sent = await fetch(rpc.url, {
            method: "POST",
            headers: { "content-type": "application/json" },
            body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "sendTransaction", params: [Buffer.from(wire).toString("base64"), { encoding: "base64", skipPreflight: true }] }),
          });
          landedFailed = ((await sent.json()) as { result: string }).result;
          throw new AppError("CHAIN_UNAVAILABLE", "the RPC did not answer");
        },
      },
    };
    await expect(m.accept(draining, orderId)).rejects.toMatchObject({ code: "CHAIN_UNAVAILABLE" });
    expect(await m.status(orderId)).toBe("paying");
    expect(await reconcilePastLifeWithoutTransactions(m)).toBe(1);
    expect([await m.status(orderId), await m.usdc(await escrowWallet(m.deps))]).toEqual(["proposed", 0n]);
    expect(await escrowedTotals(m.deps)).toEqual({});
    expect(await m.deps.ledger.transactionStatus(landedFailed)).toBe("failed"); // it is on the chain, failed
  }, 60_000);

  test("a completion whose answer comes after the reconciler finished it with the same transaction is answered completed", async () => {
    const m = await setup();
    const orderId = await m.delivered("10");
    const landed = Promise.withResolvers<void>();
    const answer = Promise.withResolvers<void>();
    const slow: Deps = {
      ...m.deps,
      ledger: {
        ...m.deps.ledger,
        submit: async (wire, options) => {
          const result = await m.deps.ledger.submit(wire, options); // on chain
          landed.resolve();
          await answer.promise; // but its answer is slow to come back
          return result;
        },
      },
    };
    const completing = completeOrder(slow, m.consumer, { orderId, rating: 5 });
    await landed.promise;
    expect(await m.reconcile()).toBe(1); // the reconciler finds it landed and finishes the order
    answer.resolve();
    expect(await completing).toMatchObject({ orderId, status: "completed", rating: 5 });
    expect(await m.usdc(m.provider)).toBe(9_750_000n); // paid once
  }, 60_000);

  test("a resend refused before the blockhash can expire does not give the payment up", async () => {
    const m = await setup();
    const orderId = await m.propose("10");
    await expect(m.accept(losingAnswers(m.deps, false), orderId)).rejects.toMatchObject({ code: "CHAIN_UNAVAILABLE" });
    const refusing: Deps = {
      ...m.deps,
      ledger: { ...m.deps.ledger, submit: async () => { throw new AppError("TRANSACTION_REJECTED", "blockhash not found (a lagging node)"); } },
    };
    clockAdvance(m, RECONCILE_AFTER_MS);
    expect(await runOrderTimers(refusing)).toBe(0);
    expect(await m.status(orderId)).toBe("paying");
    expect(await m.reconcile()).toBe(1);
    expect(await m.status(orderId)).toBe("paid");
  }, 60_000);

  test("too little money on chain: INSUFFICIENT_FUNDS, the order stays proposed", async () => {
    const m = await setup();
    const orderId = await m.propose("500");
    await expect(m.accept(m.deps, orderId)).rejects.toMatchObject({ code: "INSUFFICIENT_FUNDS" });
    expect(await m.status(orderId)).toBe("proposed");
  }, 60_000);

  test("a connected consumer's escrow transfer sent through its own RPC and never presented pays the order before it expires", async () => {
    const m = await setup();
    const { wallet, keypair } = newBuyer();
    rpc.setLamports(wallet.address, SOL);
    rpc.mintUsdc(wallet.address, 10n * USDC);
    const agent = await registerAgent(m.deps, m.provider, { endpoint: "https://agent.example/other", profile: { name: "Other", basePrice: "1" } });
    const { conversation } = await startConversation(m.deps, wallet.address, agent.agentId, "hello");
    const order = await createOrder(m.deps, m.provider, { conversationId: conversation.conversationId, description: "work", price: "4", deliveryTime: 60 });
    const offer = await acceptOrder(m.deps, wallet.address, { orderId: order.orderId, conversationId: conversation.conversationId, paymentMethod: "usdc" });
    if (!("unsignedTransaction" in offer)) throw new Error("a connected consumer gets an offer");
    const sent = await m.deps.ledger.submit(Buffer.from(signCheckout(offer.unsignedTransaction, keypair), "base64"));
    clockAdvance(m, PROPOSAL_TTL_MS);
    expect(await runOrderTimers(m.deps)).toBe(1);
    const [paid] = (await listOrders(m.deps, wallet.address, "consumer", { limit: 10 })).orders;
    expect(paid).toMatchObject({ orderId: order.orderId, status: "paid", escrowTx: sent.signature });
    expect(await m.usdc(wallet.address)).toBe(6n * USDC);
  });
  test("a sent offer is found by its reference: a consumer history of 150 later transactions costs the look nothing", async () => {
    const m = await setup();
    const c = await connectedConsumer(m, 10n * USDC);
    const ask = await c.propose("4");
    const sent = await m.deps.ledger.submit(Buffer.from(signCheckout(await c.offer(ask), c.keypair), "base64"));
    const quiet = await c.propose("3");
    await c.offer(quiet); // an offer never sent
    // The consumer goes on using its wallet: 150 transactions after its payment (a page and a half of history).
    for (let i = 0; i < 150; i++) {
      const wire = await m.deps.ledger.buildTransfer({ from: c.address, to: m.provider, token: "sol", amount: 1_000_000n + BigInt(i) });
      await sendSkippingPreflight(Buffer.from(signCheckout(Buffer.from(wire).toString("base64"), c.keypair), "base64"));
    }
    clockAdvance(m, PROPOSAL_TTL_MS);
    const before = rpc.calls.length;
    expect(await runOrderTimers(m.deps)).toBe(2);
    const asked = rpc.calls.slice(before);
    expect(await ordersStore.findOrder(m.deps.db, ask.orderId)).toMatchObject({ status: "paid", escrowTx: sent.signature });
    expect(await ordersStore.findOrder(m.deps.db, quiet.orderId)).toMatchObject({ status: "expired" });
    // Each look: one listing of its reference, and a read of the payment on it (a consumer history read was
    // up to 10 pages of 3 listings and 100 reads).
    expect(asked.filter((method) => method === "getSignaturesForAddress")).toHaveLength(2);
    expect(asked.filter((method) => method === "getTransaction")).toHaveLength(1);
  }, 60_000);

  test("an offered transfer a wallet altered (a compute-unit price added) pays the order when presented: checked, sent, paid once", async () => {
    const m = await setup();
    const escrow = await escrowWallet(m.deps);
    const c = await connectedConsumer(m, 10n * USDC);
    const ask = await c.propose("4");
    const altered = paymentVariant(await c.offer(ask), { payer: c.keypair, prepend: [ComputeBudgetProgram.setComputeUnitPrice({ microLamports: 1000 })] });
    const { order } = await acceptOrder(m.deps, c.address, { ...ask, signedTransaction: altered });
    expect(order).toMatchObject({ status: "paid", escrowTx: signatureOf(altered) });
    expect([await m.usdc(c.address), await m.usdc(escrow)]).toEqual([6n * USDC, 4n * USDC]);
    expect(await escrowedTotals(m.deps)).toEqual({ usdc: 4n * USDC });
  }, 60_000);

  test("an altered offer with a second transfer, or with its transfer signed by a delegate, is not the offer: refused before anything is sent", async () => {
    const m = await setup();
    const escrow = await escrowWallet(m.deps);
    const c = await connectedConsumer(m, 10n * USDC);
    const mint = new PublicKey(rpc.usdcMint);
    const consumer = c.keypair.publicKey;
    const source = getAssociatedTokenAddressSync(mint, consumer);
    const refusal = (ask: Awaited<ReturnType<typeof c.propose>>, signedTransaction: string) =>
      acceptOrder(m.deps, c.address, { ...ask, signedTransaction }).then(
        () => "paid",
        (err: AppError) => `${err.code}:${(err.extra.details as { reason?: string } | undefined)?.reason}`,
      );
    // The offered transfer and a second one of a base unit into the escrow: two transfers (requireExactTransfer
    // would refuse it too, as "transfers"; the offer's own check says "transaction").
    const split = await c.propose("4");
    const extra = createTransferCheckedInstruction(source, mint, getAssociatedTokenAddressSync(mint, new PublicKey(escrow)), consumer, 1n, 6);
    expect(await refusal(split, paymentVariant(await c.offer(split), { payer: c.keypair, prepend: [extra] }))).toBe("PAYMENT_MISMATCH:transaction");
    // The offered transfer moved by a delegate the consumer approved: the consumer's tokens, but not its signature.
    const byDelegate = await c.propose("4");
    const offer = await c.offer(byDelegate);
    const delegate = Keypair.generate();
    const approve = new Transaction({ feePayer: consumer, recentBlockhash: (await m.deps.ledger.latestBlockhash()).blockhash }).add(
      createApproveInstruction(source, delegate.publicKey, consumer, 4n * USDC),
    );
    approve.sign(c.keypair);
    expect(await m.deps.ledger.transactionStatus(await sendSkippingPreflight(approve.serialize()))).toBe("confirmed");
    const message = TransactionMessage.decompile(VersionedTransaction.deserialize(Buffer.from(offer, "base64")).message);
    const instructions = message.instructions.map((ix) =>
      ix.programId.equals(TOKEN_PROGRAM_ID) && ix.data[0] === 12
        ? new TransactionInstruction({ programId: ix.programId, data: ix.data, keys: ix.keys.map((k, i) => (i === 3 ? { pubkey: delegate.publicKey, isSigner: true, isWritable: false } : k)) })
        : ix,
    );
    const delegated = new VersionedTransaction(new TransactionMessage({ payerKey: consumer, recentBlockhash: message.recentBlockhash, instructions }).compileToLegacyMessage());
    delegated.sign([c.keypair, delegate]);
    expect(await refusal(byDelegate, Buffer.from(delegated.serialize()).toString("base64"))).toBe("PAYMENT_MISMATCH:transaction");
    expect([await m.usdc(c.address), await m.usdc(escrow), await escrowedTotals(m.deps)]).toEqual([10n * USDC, 0n, {}]);
    expect([(await ordersStore.findOrder(m.deps.db, split.orderId))!.status, (await ordersStore.findOrder(m.deps.db, byDelegate.orderId))!.status]).toEqual(["proposed", "proposed"]);
  }, 60_000);

  test("a transaction on the offer's reference that pays the price into another token account the escrow owns is not the payment", async () => {
    const m = await setup();
    const escrow = await escrowWallet(m.deps);
    const c = await connectedConsumer(m, 10n * USDC);
    const ask = await c.propose("4");
    await c.offer(ask);
    const reference = (await ordersStore.findOrder(m.deps.db, ask.orderId))!.offerHash!.split(":")[4]!;
    // A token account of the escrow's that is not its associated one: the escrow's payouts never spend from it.
    const side = Keypair.generate();
    const mint = new PublicKey(rpc.usdcMint);
    const consumer = c.keypair.publicKey;
    const transfer = createTransferCheckedInstruction(getAssociatedTokenAddressSync(mint, consumer), mint, side.publicKey, consumer, 4n * USDC, 6);
    transfer.keys.push({ pubkey: new PublicKey(reference), isSigner: false, isWritable: false });
    const tx = new Transaction({ feePayer: consumer, recentBlockhash: (await m.deps.ledger.latestBlockhash()).blockhash }).add(
      SystemProgram.createAccount({ fromPubkey: consumer, newAccountPubkey: side.publicKey, lamports: 2_039_280, space: ACCOUNT_SIZE, programId: TOKEN_PROGRAM_ID }),
      createInitializeAccount3Instruction(side.publicKey, mint, new PublicKey(escrow)),
      transfer,
    );
    tx.sign(c.keypair, side);
    const sent = await sendSkippingPreflight(tx.serialize());
    expect(await m.deps.ledger.transactionStatus(sent)).toBe("confirmed");
    clockAdvance(m, 3 * 60_000);
    expect(await declineOrder(m.deps, c.address, ask.orderId)).toMatchObject({ status: "declined", escrowTx: null });
    expect([await m.usdc(escrow), await escrowedTotals(m.deps)]).toEqual([0n, {}]);
  }, 60_000);

  test("the offered transfer sent on a durable nonce (signed offline) is the consumer's payment: found, the order paid", async () => {
    const m = await setup();
    const escrow = await escrowWallet(m.deps);
    const c = await connectedConsumer(m, 10n * USDC);
    const ask = await c.propose("4");
    const offer = await c.offer(ask);
    const nonce = Keypair.generate();
    const consumer = c.keypair.publicKey;
    const open = new Transaction({ feePayer: consumer, recentBlockhash: (await m.deps.ledger.latestBlockhash()).blockhash }).add(
      ...SystemProgram.createNonceAccount({ fromPubkey: consumer, noncePubkey: nonce.publicKey, authorizedPubkey: consumer, lamports: 1_447_680 }).instructions,
    );
    open.sign(c.keypair, nonce);
    expect(await m.deps.ledger.transactionStatus(await sendSkippingPreflight(open.serialize()))).toBe("confirmed");
    const value = NonceAccount.fromAccountData(Buffer.from(rpc.svm.getAccount(nonce.publicKey)!.data)).nonce;
    rpc.advanceSlots(2); // a nonce advances only past the blockhash it was stored under
    const signed = paymentVariant(offer, { payer: c.keypair, blockhash: value, prepend: [SystemProgram.nonceAdvance({ noncePubkey: nonce.publicKey, authorizedPubkey: consumer })] });
    // LiteSVM knows no durable nonces: its blockhash check is off while the payment is sent (the nonce's own
    // advance still runs, and fails unless the nonce is the one stored).
    rpc.svm.withBlockhashCheck(false);
    let sent: string;
    try {
      sent = await sendSkippingPreflight(Buffer.from(signed, "base64"));
    } finally {
      rpc.svm.withBlockhashCheck(true);
    }
    expect(await m.deps.ledger.transactionStatus(sent)).toBe("confirmed");
    clockAdvance(m, 3 * 60_000);
    await expect(declineOrder(m.deps, c.address, ask.orderId)).rejects.toMatchObject({ code: "INVALID_STATE", message: expect.stringContaining("the order is paid") });
    expect(await ordersStore.findOrder(m.deps.db, ask.orderId)).toMatchObject({ status: "paid", escrowTx: sent });
    expect([await m.usdc(escrow), await escrowedTotals(m.deps)]).toEqual([4n * USDC, { usdc: 4n * USDC }]);
  }, 60_000);

  test("two accepts racing: one pays, the other is INVALID_STATE and pays nothing; escrow holds what the orders say", async () => {
    const m = await setup();
    const escrow = await escrowWallet(m.deps);
    const orderId = await m.propose("10");
    const answers = await Promise.all([answerOf(m.accept(m.deps, orderId)), answerOf(m.accept(m.deps, orderId))]);
    expect(answers.sort()).toEqual(["INVALID_STATE", "ok"]);
    expect([await m.status(orderId), await m.usdc(m.consumer), await m.usdc(escrow)]).toEqual(["paid", 90n * USDC, 10n * USDC]);
    expect(await escrowedTotals(m.deps)).toEqual({ usdc: 10n * USDC });
  }, 60_000);

  test("two cancels racing: one refunds, the other is INVALID_STATE; another order's money stays in escrow", async () => {
    const m = await setup();
    const escrow = await escrowWallet(m.deps);
    const held = await m.delivered("10"); // its 10 are in escrow too: a second refund would be paid from them
    const orderId = await m.propose("10");
    await m.accept(m.deps, orderId);
    const answers = await Promise.all([answerOf(cancelOrder(m.deps, m.provider, orderId)), answerOf(cancelOrder(m.deps, m.provider, orderId))]);
    expect(answers.sort()).toEqual(["INVALID_STATE", "ok"]);
    expect([await m.status(orderId), await m.status(held)]).toEqual(["cancelled", "delivered"]);
    expect([await m.usdc(m.consumer), await m.usdc(escrow)]).toEqual([90n * USDC, 10n * USDC]);
    expect(await escrowedTotals(m.deps)).toEqual({ usdc: 10n * USDC });
  }, 60_000);

  test("a cancel racing the deadline's timer: the order is refunded once, by whichever came first", async () => {
    const m = await setup();
    const escrow = await escrowWallet(m.deps);
    const held = await m.delivered("10"); // due only 72 hours after delivery
    const orderId = await m.propose("10");
    await m.accept(m.deps, orderId);
    clockAdvance(m, 60 * 60_000); // its 60-minute deadline passed
    const [cancelled, moved] = await Promise.all([answerOf(cancelOrder(m.deps, m.provider, orderId)), runOrderTimers(m.deps)]);
    // Either the cancel refunded (and the timer found nothing to do), or the timer did (and the cancel was refused).
    expect([cancelled, moved, await m.status(orderId)]).toEqual(cancelled === "ok" ? ["ok", 0, "cancelled"] : ["INVALID_STATE", 1, "expired"]);
    expect(await m.status(held)).toBe("delivered");
    expect([await m.usdc(m.consumer), await m.usdc(escrow)]).toEqual([90n * USDC, 10n * USDC]);
    expect(await escrowedTotals(m.deps)).toEqual({ usdc: 10n * USDC });
  }, 60_000);

  test("a connected consumer's signed transfer that is not the offer's is PAYMENT_MISMATCH before anything is sent, even if the offer named it", async () => {
    const m = await setup();
    const escrow = await escrowWallet(m.deps);
    const c = await connectedConsumer(m, 10n * USDC);
    const ask = await c.propose("4");
    await c.offer(ask);
    // A transfer of 1 base unit to the escrow, signed by the consumer, presented for the 4 USDC order.
    const cheap = await m.deps.ledger.buildTransfer({ from: c.address, to: escrow, token: "usdc", amount: 1n });
    const signed = signCheckout(Buffer.from(cheap).toString("base64"), c.keypair);
    const present = () => acceptOrder(m.deps, c.address, { ...ask, signedTransaction: signed });
    await expect(present()).rejects.toMatchObject({ code: "PAYMENT_MISMATCH" });
    expect([(await ordersStore.findOrder(m.deps.db, ask.orderId))!.status, await m.usdc(c.address), await m.usdc(escrow)]).toEqual(["proposed", 10n * USDC, 0n]);
    // An offer record naming that very message with the order's price (as a flaw in building or binding offers
    // would leave it): what the bytes move is checked too, and is not the price.
    const named = `${sha256Hex(parseTransaction(cheap).messageBytes)}:usdc:${4n * USDC}:${escrow}`;
    await m.deps.db.write(() => ordersStore.transitionInWrite(m.deps.db, ask.orderId, "proposed", { offerHash: named }, m.deps.clock.now()));
    await expect(present()).rejects.toMatchObject({ code: "PAYMENT_MISMATCH", extra: { details: { reason: "amount" } } });
    expect([(await ordersStore.findOrder(m.deps.db, ask.orderId))!.status, await m.usdc(c.address), await m.usdc(escrow)]).toEqual(["proposed", 10n * USDC, 0n]);
    expect(await escrowedTotals(m.deps)).toEqual({});
  }, 60_000);

  test("an offered transfer that landed failed (the consumer's USDC gone) is not a payment: the proposal expires", async () => {
    const m = await setup();
    const escrow = await escrowWallet(m.deps);
    const c = await connectedConsumer(m, 10n * USDC);
    const ask = await c.propose("4");
    const signed = signCheckout(await c.offer(ask), c.keypair);
    setTokenAccount(rpc.svm, new PublicKey(associatedTokenAddress(c.address, rpc.usdcMint)), { mint: new PublicKey(rpc.usdcMint), owner: new PublicKey(c.address), amount: 0n });
    const failed = await sendSkippingPreflight(Buffer.from(signed, "base64"));
    expect(await m.deps.ledger.transactionStatus(failed)).toBe("failed"); // on the chain, failed, in the consumer's history
    clockAdvance(m, PROPOSAL_TTL_MS);
    expect(await runOrderTimers(m.deps)).toBe(1);
    expect((await ordersStore.findOrder(m.deps.db, ask.orderId))!).toMatchObject({ status: "expired", escrowTx: null });
    expect(await m.usdc(escrow)).toBe(0n);
    expect(await escrowedTotals(m.deps)).toEqual({});
  }, 60_000);

  test("one escrow payment pays one order on RPC too: refused before it is sent, the other order back to proposed, not stuck paying", async () => {
    const m = await setup();
    const escrow = await escrowWallet(m.deps);
    const c = await connectedConsumer(m, 10n * USDC);
    const a = await c.propose("4");
    const signed = signCheckout(await c.offer(a), c.keypair);
    expect((await acceptOrder(m.deps, c.address, { ...a, signedTransaction: signed })).order.status).toBe("paid");
    const b = await c.propose("4");
    // Two offers equal by chance (the same message): forced here, as the random compute-unit limit makes it ~1 in 10^6.
    const first = (await ordersStore.findOrder(m.deps.db, a.orderId))!;
    await m.deps.db.write(() => ordersStore.transitionInWrite(m.deps.db, b.orderId, "proposed", { offerHash: first.offerHash, offeredAt: first.offeredAt }, m.deps.clock.now()));
    await expect(acceptOrder(m.deps, c.address, { ...b, signedTransaction: signed })).rejects.toMatchObject({ code: "PAYMENT_MISMATCH", extra: { details: { reason: "transaction" } } });
    const statusOf = async (orderId: string) => (await ordersStore.findOrder(m.deps.db, orderId))!.status;
    expect([await statusOf(a.orderId), await statusOf(b.orderId)]).toEqual(["paid", "proposed"]);
    expect([await m.usdc(c.address), await m.usdc(escrow)]).toEqual([6n * USDC, 4n * USDC]);
    expect(await escrowedTotals(m.deps)).toEqual({ usdc: 4n * USDC });
  }, 60_000);

  test("a payment a node calls processed past its height is not given up: asked again, and undone once it is unknown", async () => {
    const m = await setup();
    const orderId = await m.propose("10");
    await expect(m.accept(losingAnswers(m.deps, false), orderId)).rejects.toMatchObject({ code: "CHAIN_UNAVAILABLE" });
    rpc.setAnswerFilter((method, answer) =>
      method === "getSignatureStatuses"
        ? { ...answer, result: { ...(answer.result as object), value: [{ slot: rpc.blockHeight(), confirmations: 0, err: null, status: { Ok: null }, confirmationStatus: "processed" }] } }
        : answer,
    );
    try {
      rpc.advanceSlots(400);
      expect(await m.reconcile()).toBe(0); // seen, not yet confirmed: it may still be confirmed
      expect(await m.status(orderId)).toBe("paying");
    } finally {
      rpc.setAnswerFilter(null);
    }
    expect(await m.reconcile()).toBe(1); // unknown to the whole history past its height: it never landed
    expect([await m.status(orderId), await m.usdc(m.consumer)]).toEqual(["proposed", 100n * USDC]);
  }, 60_000);
});
