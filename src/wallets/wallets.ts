// What the wallet tools do (mcp.md "Session and wallet"), apart from their edge: a custodial wallet made,
// signed in and funded; a transaction the wallet signed itself, submitted; a wallet's side of its history.
// Amounts are base units here; the edge parses and formats them.
import { issueChallenge } from "../auth/challenge.ts";
import type { ClientInfo } from "../auth/fingerprint.ts";
import type { IssuedSession } from "../auth/sessions.ts";
import { signIn } from "../auth/sign-in.ts";
import type { Deps } from "../deps.ts";
import { AppError, fieldError } from "../errors.ts";
import { encodeBase64 } from "../lib/encoding.ts";
import { RENT_EXEMPT_WALLET_LAMPORTS, type LedgerTransaction, type ParsedTransfer, type SubmitResult, type TokenInfo } from "../ledger/ledger.ts";
import { parseTransaction } from "../ledger/transactions.ts";
import { prepareCustodialWallet } from "./custody.ts";

export type Airdrop = { sol: bigint; usdc: bigint };

/** One of the ledger's tokens by key; VALIDATION_ERROR on `token` naming the others. */
export async function tokenInfo(deps: Deps, key: string): Promise<TokenInfo> {
  const tokens = await deps.ledger.tokens();
  // Keys are lower case (SERVICE_TOKEN_SYMBOL is lower-cased): "SOL" and "USDC" name them too, as a
  // paymentMethod or currency does.
  const token = tokens.find((t) => t.key === key.toLowerCase());
  if (token === undefined) throw fieldError("token", `token must be one of ${tokens.map((t) => t.key).join(", ")}`);
  return token;
}

/**
 * wallet_create's airdrop rules (mcp.md, ledger.md): none on mainnet, USDC only on localnet, and SOL either
 * none or at least what keeps a new account alive (an airdrop below it could not land).
 */
export function checkAirdrop(deps: Deps, airdrop: Airdrop): void {
  const network = deps.config.network;
  if (network === "mainnet" && (airdrop.sol > 0n || airdrop.usdc > 0n)) throw new AppError("NOT_SUPPORTED", "there are no airdrops on mainnet");
  if (network !== "localnet" && airdrop.usdc > 0n) throw new AppError("NOT_SUPPORTED", "USDC airdrops exist only on localnet");
  if (airdrop.sol > 0n && airdrop.sol < RENT_EXEMPT_WALLET_LAMPORTS) {
    throw fieldError("airdropSol", "airdropSol: a new account needs at least 0.00089088 SOL (the rent-exempt minimum), or 0");
  }
}

/**
 * A new custodial wallet, signed in on the same path as wallet_connect: a challenge, signed with the new key,
 * verified. The wallet is stored in the write that spends the challenge and records the token, so a refused
 * sign-in (rate limits) leaves nothing behind, and a crash keeps the key and its session together or neither.
 */
export async function createCustodialWallet(deps: Deps, client: ClientInfo, label: string | null): Promise<{ walletAddress: string; issued: IssuedSession }> {
  const wallet = prepareCustodialWallet(deps, label);
  const walletAddress = wallet.address;
  const challenge = await issueChallenge(deps, walletAddress, client);
  const signature = wallet.signMessage(new TextEncoder().encode(challenge.message));
  const issued = await signIn(deps, { walletAddress, nonce: challenge.nonce, signature: encodeBase64(signature) }, client, wallet);
  deps.log.info("custodial wallet created", { address: walletAddress });
  return { walletAddress, issued };
}

/**
 * Funds a new wallet from the faucet. Devnet's faucet is often dry or rate limited: that does not cost the
 * caller the wallet and token, so its refusal is returned as `error`. On localnet the limits were checked
 * (checkAirdrop), so a failure there is a real error and is thrown.
 */
export async function fundNewWallet(deps: Deps, walletAddress: string, airdrop: Airdrop): Promise<{ signatures: string[] } | { error: string } | null> {
  if (airdrop.sol === 0n && airdrop.usdc === 0n) return null;
  try {
    return { signatures: await deps.ledger.airdrop(walletAddress, airdrop) };
  } catch (err) {
    if (!(err instanceof AppError) || deps.config.network !== "devnet") throw err;
    return { error: `${err.code}: ${err.message}` };
  }
}

/**
 * A new wallet's balances in base units. The wallet exists and is signed in by now: a chain that does not
 * answer the read must not cost the caller its address and token (a retry would make another wallet). A new
 * key holds what its confirmed airdrop sent and nothing else, and `error` says the figures are that.
 */
export async function newWalletBalances(deps: Deps, walletAddress: string, airdropped: Airdrop | null): Promise<{ raw: Record<string, bigint>; error?: string }> {
  try {
    return { raw: await deps.ledger.getBalances(walletAddress) };
  } catch (err) {
    if (!(err instanceof AppError) || err.code !== "CHAIN_UNAVAILABLE") throw err;
    return { raw: airdropped === null ? {} : { sol: airdropped.sol, usdc: airdropped.usdc }, error: `${err.code}: ${err.message}` };
  }
}

/** The wallet's side of a recorded transaction's transfers: one it sent, else one it received. */
export function ownTransfer(transfers: readonly ParsedTransfer[], walletAddress: string): ParsedTransfer | null {
  return transfers.find((t) => t.from === walletAddress) ?? transfers.find((t) => t.to === walletAddress) ?? null;
}

/**
 * wallet_submit_transaction: a transaction this session's wallet signed (FORBIDDEN when it is not among the
 * signers), submitted, with the wallet's own transfer in it as recorded (null: it moved nothing of the wallet's).
 */
export async function submitSignedTransaction(deps: Deps, walletAddress: string, wire: Uint8Array): Promise<{ result: SubmitResult; transfer: ParsedTransfer | null }> {
  const parsed = parseTransaction(wire);
  if (!parsed.accountKeys.slice(0, parsed.numRequiredSignatures).includes(walletAddress)) {
    throw new AppError("FORBIDDEN", "this transaction is not signed by this session's wallet");
  }
  const result = await deps.ledger.submit(wire);
  const recorded = await deps.ledger.getTransaction(result.signature);
  return { result, transfer: recorded === null ? null : ownTransfer(recorded.transfers, walletAddress) };
}

export type HistoryEntry = { tx: LedgerTransaction; transfer: ParsedTransfer | null; direction: "in" | "out" | "self"; counterparty: string | null };

/** A wallet's transactions, newest first, each with its side of them: the direction and the other party. */
export async function walletHistory(deps: Deps, walletAddress: string, page: { limit: number; before?: string | undefined }): Promise<HistoryEntry[]> {
  const transactions = await deps.ledger.history(walletAddress, page);
  return transactions.map((tx) => {
    const transfer = ownTransfer(tx.transfers, walletAddress);
    const direction = transfer === null || transfer.from === walletAddress ? (transfer?.to === walletAddress ? "self" : "out") : "in";
    return { tx, transfer, direction, counterparty: transfer === null ? null : direction === "in" ? transfer.from : transfer.to };
  });
}
