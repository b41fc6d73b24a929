// The embedded ledger's runtime: charges the fee and executes the supported instruction subset over
// account state, with Solana's outcomes — rejected before execution, failed (fee charged) or confirmed.
import type { AccountRow } from "./store.ts";
import { decodeAddress } from "../../lib/encoding.ts";
import { RENT_EXEMPT_TOKEN_ACCOUNT_LAMPORTS, RENT_EXEMPT_WALLET_LAMPORTS } from "../ledger.ts";
import {
  DEPLOYED_PROGRAMS,
  RESERVED_ACCOUNT_KEYS,
  SYSTEM_PROGRAM,
  TOKEN_PROGRAM,
  associatedTokenAccount,
  computeUnitLimit,
  type DecodedInstruction,
  type ParsedTransaction,
} from "../transactions.ts";

/**
 * Compute units each instruction uses, as the runtime with the programs LiteSVM carries measures them:
 * builtins 150; Token Transfer 76 and TransferChecked 105; an associated token account's creation or
 * idempotent look pays 1,500 per bump-seed try, and its creation 9 per leading byte its address shares
 * with its mint's and its payer's. A memo costs 1,382 plus what logging each character costs
 * there, which depends on where the character sits in Rust's Unicode tables (from ~300 to ~17,000: CJK
 * ~11,000): counted here as a lower bound per class (printable ASCII 334, other ASCII 819, anything else
 * 290), so no memo fails here that passes there, though non-ASCII text may pass here and fail there.
 * Each signer a v2 memo names is logged too ("Signed by <address>"): 12,779 to 13,573 units over 3,000
 * random keys (fewer with leading zero bytes), counted as 12,000, a lower bound again.
 * Memo v1 logs nothing: it costs 232 plus ~217 per account it is given, and from 0 (ASCII) to ~50 units
 * per character (UTF-8 validation): counted as 232 + 217 per account, again a lower bound.
 * Over the limit the transaction fails, its fee charged, as on a cluster.
 */
const UNITS = {
  builtin: 150,
  transfer: 76,
  transferChecked: 105,
  ataExisting: 4_437,
  ataCreate: 13_487,
  ataCreateIdempotent: 13_525,
  ataPerTry: 1_500,
  /** Less when the payer is the owner (a wallet making its own account), measured with LiteSVM: 101 when creating, 99 when it exists. */
  ataPayerIsOwner: -101,
  ataExistingPayerIsOwner: -99,
  /**
   * Creating, per leading byte the account's address shares with its mint's, and with its payer's: the
   * program compares them byte by byte (measured with LiteSVM over thousands of random keys: 9 units a
   * byte, ~1 % of accounts share one with either).
   */
  ataPerSharedByte: 9,
  memo: 1_382,
  memoSigner: 12_000,
  memoV1: 232,
  memoV1PerAccount: 217,
};

/** A memo's units (see UNITS): a lower bound of what the Memo program uses to log it. */
function memoUnits(text: string): number {
  let units = UNITS.memo;
  for (const char of text) {
    const code = char.codePointAt(0)!;
    units += code >= 0x80 ? 290 : (code >= 0x20 && code < 0x7f) || code === 0x09 || code === 0x0a || code === 0x0d ? 334 : 819;
  }
  return units;
}

/** Rent-exempt minimums of Solana's default rent (3480 lamports per byte-year, 2 years, +128 bytes). */
export const RENT_EXEMPT_SYSTEM = RENT_EXEMPT_WALLET_LAMPORTS;
export const RENT_EXEMPT_TOKEN_ACCOUNT = RENT_EXEMPT_TOKEN_ACCOUNT_LAMPORTS;
export const RENT_EXEMPT_MINT = 1_461_600n;

/** Every account the runtime will not let a transaction change: reserved keys and the programs it calls. */
export function isReadOnlyForRuntime(address: string, invokedPrograms: ReadonlySet<string>): boolean {
  return RESERVED_ACCOUNT_KEYS.has(address) || invokedPrograms.has(address);
}

export type Outcome =
  /** Refused before execution: nothing is recorded or charged. */
  | { kind: "rejected"; reason: string; message: string; funds: boolean }
  /**
   * Executed and failed: only the fee is charged (`accounts` holds the fee payer after the fee).
   * `belowRent`: an account that did not sign (a recipient) would have been left below its rent-exempt
   * minimum: too little was sent to it, which is no shortfall of the payer's.
   */
  | { kind: "failed"; message: string; funds: boolean; belowRent: string | null; accounts: Map<string, AccountRow> }
  | { kind: "confirmed"; accounts: Map<string, AccountRow> };

/** Why an instruction failed; `funds` marks a shortfall (lamports, tokens or rent of a payer). */
class InstructionFailure extends Error {
  constructor(
    message: string,
    readonly funds = false,
    readonly belowRent: string | null = null,
  ) {
    super(message);
  }
}

const none: AccountRow = { kind: "system", lamports: 0n };

function minimumBalance(a: AccountRow): bigint {
  return a.kind === "token" ? RENT_EXEMPT_TOKEN_ACCOUNT : a.kind === "mint" ? RENT_EXEMPT_MINT : RENT_EXEMPT_SYSTEM;
}

/** Solana's rent rule for an account that changed: it holds nothing, or at least its rent-exempt minimum. */
function rentPaying(a: AccountRow): boolean {
  return a.lamports > 0n && a.lamports < minimumBalance(a);
}

function sameAccount(a: AccountRow, b: AccountRow): boolean {
  if (a.kind !== b.kind || a.lamports !== b.lamports) return false;
  if (a.kind === "token" && b.kind === "token") return a.amount === b.amount && a.owner === b.owner && a.mint === b.mint;
  if (a.kind === "mint" && b.kind === "mint") return a.supply === b.supply && a.decimals === b.decimals;
  return true;
}

/**
 * Runs a parsed transaction whose signatures and blockhash were already checked. `read` gives the
 * current state of an account (null when it does not exist). Returns the outcome and, unless rejected,
 * every account to write back.
 */
export function execute(tx: ParsedTransaction, fee: bigint, read: (address: string) => AccountRow | null): Outcome {
  const keys = tx.accountKeys;
  const feePayer = keys[0]!;

  // Fee payer: a system account that can pay the fee and stays rent exempt (or empty) after it.
  const payer = read(feePayer);
  if (payer === null || payer.lamports === 0n) {
    return { kind: "rejected", reason: "account_not_found", message: "the fee payer has no SOL", funds: true };
  }
  if (payer.kind !== "system") {
    return { kind: "rejected", reason: "invalid_fee_payer", message: "the fee payer must be a system account", funds: false };
  }
  if (payer.lamports < fee) {
    return { kind: "rejected", reason: "insufficient_funds_for_fee", message: `the fee payer cannot pay the fee of ${fee} lamports`, funds: true };
  }
  const payerAfterFee: AccountRow = { kind: "system", lamports: payer.lamports - fee };
  if (rentPaying(payerAfterFee)) {
    return {
      kind: "rejected",
      reason: "insufficient_funds_for_rent",
      message: "after the fee the fee payer would hold less than the rent-exempt minimum",
      funds: true,
    };
  }
  const afterFee = new Map<string, AccountRow>([[feePayer, payerAfterFee]]);

  // The runtime demotes reserved keys and the programs this transaction calls to read-only.
  const invoked = new Set(tx.invokedPrograms);
  const writable = (index: number) => tx.isWritable(index) && !isReadOnlyForRuntime(keys[index]!, invoked);

  // Execution works on a copy; on failure only the fee is kept.
  const original = new Map<string, AccountRow>();
  const state = new Map<string, AccountRow>(afterFee);
  const get = (index: number): AccountRow => {
    const address = keys[index]!;
    const cached = state.get(address);
    if (cached !== undefined) return cached;
    const loaded = read(address) ?? none;
    original.set(address, loaded);
    state.set(address, loaded);
    return loaded;
  };
  const requireWritable = (index: number): void => {
    if (!writable(index)) throw new InstructionFailure(`instruction changed the read-only account ${keys[index]}`);
  };
  const set = (index: number, account: AccountRow): void => {
    requireWritable(index);
    state.set(keys[index]!, account);
  };
  const requireSigner = (index: number, role: string): void => {
    if (!tx.isSigner(index)) throw new InstructionFailure(`missing required signature of the ${role} ${keys[index]}`);
  };

  const limit = computeUnitLimit(tx);
  let used = 0;
  const consume = (units: number): void => {
    used += units;
    if (used > limit) throw new InstructionFailure(`the transaction exceeded its compute unit limit of ${limit}`);
  };

  try {
    for (const ix of tx.instructions) runInstruction(ix, { keys, get, set, requireSigner, requireWritable, consume });
    // Rent: every account the transaction changed ends empty or rent exempt.
    for (const [address, account] of state) {
      const before = address === feePayer ? payer : (original.get(address) ?? none);
      if (!sameAccount(before, account) && rentPaying(account) && !DEPLOYED_PROGRAMS.has(address)) {
        // Only a signer pays out (sender, fee payer, account payer): its remainder below the rent is a
        // shortfall. Any other account only received, too little to be rent exempt.
        const paidOut = tx.isSigner(keys.indexOf(address));
        throw new InstructionFailure(`account ${address} would hold less than the rent-exempt minimum`, paidOut, paidOut ? null : address);
      }
    }
  } catch (err) {
    if (!(err instanceof InstructionFailure)) throw err;
    return { kind: "failed", message: err.message, funds: err.funds, belowRent: err.belowRent, accounts: afterFee };
  }
  const changed = new Map<string, AccountRow>();
  for (const [address, account] of state) {
    const before = address === feePayer ? payer : (original.get(address) ?? none);
    if (!sameAccount(before, account)) changed.set(address, account);
  }
  return { kind: "confirmed", accounts: changed };
}

type Context = {
  keys: readonly string[];
  get(index: number): AccountRow;
  set(index: number, account: AccountRow): void;
  requireSigner(index: number, role: string): void;
  /** Builtins (the System Program) check this on every balance they touch, changed or not. */
  requireWritable(index: number): void;
  /** Compute units used; throws past the transaction's limit. */
  consume(units: number): void;
};

function runInstruction(ix: DecodedInstruction, c: Context): void {
  if (ix.type === "invalid") throw new InstructionFailure(ix.error);
  switch (ix.program) {
    case "computeBudget":
      return c.consume(UNITS.builtin); // its settings were applied to the fee before execution
    case "memo":
      if (ix.text === null) throw new InstructionFailure("the memo is not valid UTF-8");
      if (ix.version === 1) return c.consume(UNITS.memoV1 + UNITS.memoV1PerAccount * ix.accounts.length); // v1 checks no signer
      c.consume(memoUnits(ix.text) + UNITS.memoSigner * ix.accounts.length);
      for (const index of ix.accounts) c.requireSigner(index, "memo account");
      return;
    case "system":
      return systemTransfer(ix, c);
    case "token":
      return tokenTransfer(ix, c);
    case "ata":
      return createAssociatedAccount(ix, c);
  }
}

function systemTransfer(ix: Extract<DecodedInstruction, { program: "system" }>, c: Context): void {
  c.consume(UNITS.builtin);
  c.requireSigner(ix.from, "sender");
  const from = c.get(ix.from);
  if (from.kind !== "system") throw new InstructionFailure("a System transfer's sender must be a plain SOL account");
  if (from.lamports < ix.lamports) {
    throw new InstructionFailure(`the sender holds ${from.lamports} lamports, ${ix.lamports} needed`, true);
  }
  c.requireWritable(ix.from);
  c.requireWritable(ix.to);
  if (ix.lamports === 0n) return;
  c.set(ix.from, { kind: "system", lamports: from.lamports - ix.lamports });
  const to = c.get(ix.to); // read after the debit: a transfer to oneself nets to nothing
  c.set(ix.to, { ...to, lamports: to.lamports + ix.lamports });
}

function tokenTransfer(ix: Extract<DecodedInstruction, { program: "token" }>, c: Context): void {
  c.consume(ix.type === "transferChecked" ? UNITS.transferChecked : UNITS.transfer);
  const source = c.get(ix.source);
  const destination = c.get(ix.destination);
  // No account at all: the sender holds none of this token, a shortfall like any other.
  if (source.kind !== "token") throw new InstructionFailure(`${c.keys[ix.source]} is not a token account`, source.kind === "system" && source.lamports === 0n);
  if (destination.kind !== "token") throw new InstructionFailure(`${c.keys[ix.destination]} is not a token account`);
  if (source.amount < ix.amount) throw new InstructionFailure(`the source token account holds ${source.amount}, ${ix.amount} needed`, true);
  if (source.mint !== destination.mint) throw new InstructionFailure("the two token accounts are of different mints");
  if (ix.type === "transferChecked") {
    const mint = c.get(ix.mint);
    if (c.keys[ix.mint] !== source.mint || mint.kind !== "mint") throw new InstructionFailure("the mint does not match the token accounts");
    if (mint.decimals !== ix.decimals) throw new InstructionFailure(`the mint has ${mint.decimals} decimals, not ${ix.decimals}`);
  }
  if (c.keys[ix.owner] !== source.owner) throw new InstructionFailure("the signer does not own the source token account");
  c.requireSigner(ix.owner, "token account owner");
  if (ix.source === ix.destination || ix.amount === 0n) return;
  c.set(ix.source, { ...source, amount: source.amount - ix.amount });
  const after = c.get(ix.destination);
  if (after.kind !== "token") throw new InstructionFailure("the destination is not a token account");
  c.set(ix.destination, { ...after, amount: after.amount + ix.amount });
}

/** How many leading bytes two addresses share. */
function sharedLeadingBytes(a: string, b: string): number {
  const x = decodeAddress(a)!;
  const y = decodeAddress(b)!;
  let n = 0;
  while (n < 32 && x[n] === y[n]) n++;
  return n;
}

function createAssociatedAccount(ix: Extract<DecodedInstruction, { program: "ata" }>, c: Context): void {
  const owner = c.keys[ix.owner]!;
  const mintAddress = c.keys[ix.mint]!;
  if (c.keys[ix.tokenProgram] !== TOKEN_PROGRAM) throw new InstructionFailure("only the SPL Token program's accounts can be created");
  const derived = associatedTokenAccount(owner, mintAddress);
  if (c.keys[ix.account] !== derived.address) {
    throw new InstructionFailure("the account is not the associated token account of this owner and mint");
  }
  const searched = UNITS.ataPerTry * (255 - derived.bump);
  const payerIsOwner = c.keys[ix.payer] === owner;
  const mint = c.get(ix.mint);
  if (mint.kind !== "mint") throw new InstructionFailure(`${mintAddress} is not a mint`);
  const existing = c.get(ix.account);
  if (existing.kind === "token") {
    c.consume(UNITS.ataExisting + searched + (payerIsOwner ? UNITS.ataExistingPayerIsOwner : 0));
    if (ix.type === "createIdempotent" && existing.owner === owner && existing.mint === mintAddress) return;
    throw new InstructionFailure("the associated token account already exists");
  }
  const shared = sharedLeadingBytes(derived.address, mintAddress) + sharedLeadingBytes(derived.address, c.keys[ix.payer]!);
  c.consume(
    (ix.type === "createIdempotent" ? UNITS.ataCreateIdempotent : UNITS.ataCreate) +
      searched +
      (payerIsOwner ? UNITS.ataPayerIsOwner : 0) +
      UNITS.ataPerSharedByte * shared,
  );
  if (existing.kind !== "system") throw new InstructionFailure("the address is in use");
  // Only creating calls the System Program: an idempotent look at an existing account never uses it.
  if (c.keys[ix.systemProgram] !== SYSTEM_PROGRAM) throw new InstructionFailure("the System Program account is wrong");
  // The payer is only asked for what the address lacks of the rent: an address already holding it needs
  // no payment, so neither the payer's signature nor its account matters then.
  const needed = existing.lamports >= RENT_EXEMPT_TOKEN_ACCOUNT ? 0n : RENT_EXEMPT_TOKEN_ACCOUNT - existing.lamports;
  if (needed > 0n) {
    c.requireSigner(ix.payer, "payer");
    const payer = c.get(ix.payer);
    if (payer.kind !== "system") throw new InstructionFailure("the payer must be a plain SOL account");
    if (payer.lamports < needed) throw new InstructionFailure(`the payer holds ${payer.lamports} lamports, ${needed} needed for the account's rent`, true);
    c.set(ix.payer, { kind: "system", lamports: payer.lamports - needed });
  }
  c.set(ix.account, { kind: "token", lamports: existing.lamports + needed, mint: mintAddress, owner, amount: 0n });
}
