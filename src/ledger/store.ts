// SQL of the ledger feature itself (not of one ledger): the mainnet audit log of submitted transfers.
import type { Db } from "../db/open.ts";

export type AuditRow = Readonly<{
  at: number;
  network: string;
  signature: string;
  feePayer: string;
  /** JSON of the transfers read from the transaction. */
  transfers: string;
  outcome: "confirmed" | "failed" | "rejected" | "unknown";
  errorCode: string | null;
}>;

/** Records a submission; resolves with the row's id (for setAuditOutcome) once it is on disk. */
export function insertAudit(db: Db, row: AuditRow): Promise<number> {
  return db.write(() => {
    const { id } = db.sqlite
      .query(
        `INSERT INTO ledger_audit (at, network, signature, fee_payer, transfers, outcome, error_code)
         VALUES (?, ?, ?, ?, ?, ?, ?) RETURNING id`,
      )
      .get(row.at, row.network, row.signature, row.feePayer, row.transfers, row.outcome, row.errorCode) as { id: number };
    return id;
  });
}

/** The outcome of a submission recorded as `unknown` before it was sent; `transfers`, when given, as the landed transaction reads. */
export function setAuditOutcome(db: Db, id: number, outcome: AuditRow["outcome"], errorCode: string | null, transfers: string | null = null): Promise<void> {
  return db.write(() => {
    db.sqlite.query("UPDATE ledger_audit SET outcome = ?, error_code = ?, transfers = COALESCE(?, transfers) WHERE id = ?").run(outcome, errorCode, transfers, id);
  });
}

export async function listAudit(db: Db, signature: string): Promise<AuditRow[]> {
  return db.sqlite
    .query(
      `SELECT at, network, signature, fee_payer AS feePayer, transfers, outcome, error_code AS errorCode
       FROM ledger_audit WHERE signature = ? ORDER BY id`,
    )
    .all(signature) as AuditRow[];
}

/** The network the database is served on (migration 35); null before a server of that version started. */
export function findNetworkInUse(db: Db): string | null {
  return db.read(() => (db.sqlite.query("SELECT network FROM network_in_use WHERE id = 1").get() as { network: string } | null)?.network ?? null);
}

/** Records the network the database is served on (written with the first batch of writes; never replaced). */
export function recordNetworkInUse(db: Db, network: string): Promise<void> {
  return db.write(() => {
    db.sqlite.query("INSERT INTO network_in_use (id, network) VALUES (1, ?) ON CONFLICT (id) DO NOTHING").run(network);
  });
}

/**
 * Where a database without a record was served: the network of its newest purchase (a cluster name), else of
 * its newest audited transfer (a NETWORK value), else of its marketplace escrow wallet (a NETWORK value).
 */
export function latestServedNetwork(db: Db): string | null {
  return db.read(() => {
    const row = (db.sqlite.query("SELECT network FROM purchases ORDER BY rowid DESC LIMIT 1").get() ??
      db.sqlite.query("SELECT network FROM ledger_audit ORDER BY rowid DESC LIMIT 1").get() ??
      db.sqlite.query("SELECT network FROM market_escrow ORDER BY rowid DESC LIMIT 1").get()) as { network: string } | null;
    return row?.network ?? null;
  });
}
