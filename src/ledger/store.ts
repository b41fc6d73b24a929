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

export function insertAudit(db: Db, row: AuditRow): Promise<void> {
  return db.write(() => {
    db.sqlite
      .query(
        `INSERT INTO ledger_audit (at, network, signature, fee_payer, transfers, outcome, error_code)
         VALUES (?, ?, ?, ?, ?, ?, ?)`,
      )
      .run(row.at, row.network, row.signature, row.feePayer, row.transfers, row.outcome, row.errorCode);
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
