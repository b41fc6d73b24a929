// SQL of the embedded ledger: genesis facts, accounts, recorded transactions and the history index.
// Amounts are read as bigint (safe integers): lamport and token totals exceed 2^53.
import type { Db } from "../../db/open.ts";

export type AccountRow =
  | { kind: "system"; lamports: bigint }
  | { kind: "token"; lamports: bigint; mint: string; owner: string; amount: bigint }
  | { kind: "mint"; lamports: bigint; decimals: number; supply: bigint };

type RawAccount = {
  kind: "system" | "token" | "mint";
  lamports: bigint;
  mint: string | null;
  owner: string | null;
  amount: bigint | null;
  decimals: bigint | null;
  supply: bigint | null;
};

function toAccount(raw: RawAccount): AccountRow {
  if (raw.kind === "token") return { kind: "token", lamports: raw.lamports, mint: raw.mint!, owner: raw.owner!, amount: raw.amount! };
  if (raw.kind === "mint") return { kind: "mint", lamports: raw.lamports, decimals: Number(raw.decimals!), supply: raw.supply! };
  return { kind: "system", lamports: raw.lamports };
}

function readAccount(db: Db, address: string): AccountRow | null {
  const raw = db.sqlite
    .query("SELECT kind, lamports, mint, owner, amount, decimals, supply FROM ledger_accounts WHERE address = ?")
    .safeIntegers(true)
    .get(address) as RawAccount | null;
  return raw === null ? null : toAccount(raw);
}

/** Balances read accounts on every call: kept until the database next changes (Db.cache). */
const ACCOUNTS_KEPT = 10_000;

/** One account as it is now; null when it does not exist. */
export async function findAccount(db: Db, address: string): Promise<AccountRow | null> {
  return db.cache<AccountRow | null>("ledger_accounts.address", ACCOUNTS_KEPT).get(address, () => db.read(() => readAccount(db, address)));
}

const MAX_INTEGER = 2n ** 63n - 1n;

/** SQLite integers are signed 64-bit and bun:sqlite would wrap a larger bigint silently: refuse it. */
function checkedInteger(value: bigint, what: string): bigint {
  if (value < 0n || value > MAX_INTEGER) throw new Error(`ledger ${what} out of range: ${value}`);
  return value;
}

/** Writes accounts as they now are; a system account with no lamports is removed, as on Solana. */
function writeAccounts(db: Db, accounts: Iterable<[string, AccountRow]>): void {
  const upsert = db.sqlite.query(
    `INSERT INTO ledger_accounts (address, kind, lamports, mint, owner, amount, decimals, supply)
     VALUES (?, ?, ?, ?, ?, ?, ?, ?)
     ON CONFLICT (address) DO UPDATE SET kind = excluded.kind, lamports = excluded.lamports, mint = excluded.mint,
       owner = excluded.owner, amount = excluded.amount, decimals = excluded.decimals, supply = excluded.supply`,
  );
  const remove = db.sqlite.query("DELETE FROM ledger_accounts WHERE address = ?");
  for (const [address, a] of accounts) {
    if (a.kind === "system" && a.lamports === 0n) {
      remove.run(address);
      continue;
    }
    upsert.run(
      address,
      a.kind,
      checkedInteger(a.lamports, "lamports"),
      a.kind === "token" ? a.mint : null,
      a.kind === "token" ? a.owner : null,
      a.kind === "token" ? checkedInteger(a.amount, "token amount") : null,
      a.kind === "mint" ? a.decimals : null,
      a.kind === "mint" ? checkedInteger(a.supply, "supply") : null,
    );
  }
}

export type TransactionRow = {
  signature: string;
  wire: Uint8Array;
  slot: number;
  blockTime: number;
  status: "confirmed" | "failed";
  error: string | null;
  fee: bigint;
  feePayer: string;
  /** JSON of the parsed transfers (amounts as strings). */
  transfers: string;
  memo: string | null;
};

function insertTransaction(db: Db, row: TransactionRow, messageHash: string, addresses: Iterable<string>): void {
  const { seq } = db.sqlite
    .query(
      `INSERT INTO ledger_transactions (signature, wire, slot, block_time, status, error, fee, fee_payer, transfers, memo, message_hash)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING seq`,
    )
    .get(row.signature, row.wire, row.slot, row.blockTime, row.status, row.error, row.fee, row.feePayer, row.transfers, row.memo, messageHash) as {
    seq: number;
  };
  const index = db.sqlite.query("INSERT INTO ledger_address_transactions (address, seq) VALUES (?, ?) ON CONFLICT DO NOTHING");
  for (const address of new Set(addresses)) index.run(address, seq);
}

/** Whether a transaction with this signature, or with this signed message (other signatures), was recorded. */
function transactionExists(db: Db, signature: string, messageHash: string): boolean {
  return db.sqlite.query("SELECT 1 FROM ledger_transactions WHERE signature = ? OR message_hash = ?").get(signature, messageHash) !== null;
}

type RawTransaction = Omit<TransactionRow, "fee"> & { fee: bigint; seq: number };

const TRANSACTION_COLUMNS = `seq, signature, wire, slot, block_time AS blockTime, status, error, fee, fee_payer AS feePayer, transfers, memo`;

function toTransaction(raw: RawTransaction): TransactionRow & { seq: number } {
  return { ...raw, seq: Number(raw.seq), slot: Number(raw.slot), blockTime: Number(raw.blockTime) };
}

export async function findTransaction(db: Db, signature: string): Promise<(TransactionRow & { seq: number }) | null> {
  const raw = db.sqlite
    .query(`SELECT ${TRANSACTION_COLUMNS} FROM ledger_transactions WHERE signature = ?`)
    .safeIntegers(true)
    .get(signature) as RawTransaction | null;
  return raw === null ? null : toTransaction(raw);
}

/** The address's transactions, newest first, strictly older than `beforeSeq` when given. */
export async function listTransactions(
  db: Db,
  address: string,
  limit: number,
  beforeSeq: number | null,
): Promise<(TransactionRow & { seq: number })[]> {
  const rows = db.sqlite
    .query(
      `SELECT t.seq, t.signature, t.wire, t.slot, t.block_time AS blockTime, t.status, t.error, t.fee, t.fee_payer AS feePayer,
              t.transfers, t.memo
       FROM ledger_address_transactions a JOIN ledger_transactions t ON t.seq = a.seq
       WHERE a.address = ? AND a.seq < ?
       ORDER BY a.seq DESC LIMIT ?`,
    )
    .safeIntegers(true)
    .all(address, beforeSeq ?? Number.MAX_SAFE_INTEGER, limit) as RawTransaction[];
  return rows.map(toTransaction);
}

/** The signatures of `address`'s transactions, newest first: listTransactions without reading them. */
export async function listSignatures(db: Db, address: string, limit: number, beforeSeq: number | null): Promise<string[]> {
  const rows = db.sqlite
    .query(
      `SELECT t.signature FROM ledger_address_transactions a JOIN ledger_transactions t ON t.seq = a.seq
       WHERE a.address = ? AND a.seq < ? ORDER BY a.seq DESC LIMIT ?`,
    )
    .all(address, beforeSeq ?? Number.MAX_SAFE_INTEGER, limit) as { signature: string }[];
  return rows.map((r) => r.signature);
}

/** A genesis fact (seed, genesis time, mints, faucet key); null before genesis. */
export function readMeta(db: Db, key: string): string | null {
  const row = db.sqlite.query("SELECT value FROM ledger_meta WHERE key = ?").get(key) as { value: string } | null;
  return row?.value ?? null;
}

function writeMeta(db: Db, key: string, value: string): void {
  db.sqlite.query("INSERT INTO ledger_meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value").run(key, value);
}

/** Totals for the conservation check: lamports held, fees charged, token units held per mint, mint supplies. */
export async function ledgerTotals(db: Db): Promise<{
  lamports: bigint;
  fees: bigint;
  tokenAmounts: Map<string, bigint>;
  supplies: Map<string, bigint>;
}> {
  const q = (sql: string) => db.sqlite.query(sql).safeIntegers(true);
  const { lamports } = q("SELECT COALESCE(SUM(lamports), 0) AS lamports FROM ledger_accounts").get() as { lamports: bigint };
  const { fees } = q("SELECT COALESCE(SUM(fee), 0) AS fees FROM ledger_transactions").get() as { fees: bigint };
  const amounts = q("SELECT mint, SUM(amount) AS total FROM ledger_accounts WHERE kind = 'token' GROUP BY mint").all() as {
    mint: string;
    total: bigint;
  }[];
  const supplies = q("SELECT address, supply FROM ledger_accounts WHERE kind = 'mint'").all() as { address: string; supply: bigint }[];
  return {
    lamports,
    fees,
    tokenAmounts: new Map(amounts.map((r) => [r.mint, r.total])),
    supplies: new Map(supplies.map((r) => [r.address, r.supply])),
  };
}

/** What a decision reads: accounts and recorded signatures as they are inside the write. */
export type LedgerReader = Readonly<{
  account(address: string): AccountRow | null;
  transactionExists(signature: string, messageHash: string): boolean;
}>;

/** What to write for one Solana transaction: changed accounts, its record, the addresses to index it under. */
export type TransactionWrite = Readonly<{
  accounts: ReadonlyMap<string, AccountRow>;
  record: TransactionRow;
  /** SHA-256 (hex) of the signed message: a message is recorded once, whatever its signatures. */
  messageHash: string;
  addresses: readonly string[];
  /** The caller's SQL for the same write (SubmitOptions.alongside), after the transaction's own. */
  alongside?: (() => void) | undefined;
}>;

/**
 * One Solana transaction in one database write: `decide` reads the current state (synchronously, so no
 * other write can come between) and returns what to write, or throws to write nothing.
 */
export function applyTransaction<T>(db: Db, decide: (reader: LedgerReader) => { write: TransactionWrite; result: T }): Promise<T> {
  return db.write(() => {
    const { write, result } = decide({
      account: (address) => readAccount(db, address),
      transactionExists: (signature, messageHash) => transactionExists(db, signature, messageHash),
    });
    writeAccounts(db, write.accounts);
    insertTransaction(db, write.record, write.messageHash, write.addresses);
    write.alongside?.();
    return result;
  });
}

/** Writes the genesis accounts and facts once; false when another process did it first. */
export function writeGenesis(db: Db, accounts: readonly [string, AccountRow][], meta: Readonly<Record<string, string>>): Promise<boolean> {
  return db.write(() => {
    if (readMeta(db, "seed") !== null) return false;
    writeAccounts(db, accounts);
    for (const [key, value] of Object.entries(meta)) writeMeta(db, key, value);
    return true;
  });
}
