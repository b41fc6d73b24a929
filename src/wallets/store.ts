// SQL for custodial wallets: one row per created wallet holding its sealed secret key; the transfers its
// idempotency keys name.
import type { Db } from "../db/open.ts";
import { inSteps, STEP_ROWS, stepOf } from "../db/steps.ts";

export type CustodialWalletRow = {
  address: string;
  secretIv: Uint8Array;
  /** AES-256-GCM ciphertext || tag of the 64-byte secret key. */
  secretCiphertext: Uint8Array;
  createdAt: number;
  label: string | null;
};

export function insertCustodialWallet(db: Db, row: CustodialWalletRow): Promise<void> {
  return db.write(() => insertCustodialWalletInWrite(db, row));
}

/** insertCustodialWallet inside the caller's write (wallet_create: with the sign-in that proves the new key). */
export function insertCustodialWalletInWrite(db: Db, row: CustodialWalletRow): void {
  db.sqlite
    .query("INSERT INTO custodial_wallets (address, secret_iv, secret_ciphertext, created_at, label) VALUES (?, ?, ?, ?, ?)")
    .run(row.address, row.secretIv, row.secretCiphertext, row.createdAt, row.label);
}

export async function findCustodialWallet(db: Db, address: string): Promise<CustodialWalletRow | null> {
  return db.read(() => {
    const row = db.sqlite
      .query(
        `SELECT address, secret_iv AS secretIv, secret_ciphertext AS secretCiphertext, created_at AS createdAt, label
         FROM custodial_wallets WHERE address = ?`,
      )
      .get(address) as CustodialWalletRow | null;
    return row ?? null;
  });
}

export async function hasCustodialWallet(db: Db, address: string): Promise<boolean> {
  return db.read(() => {
    return db.sqlite.query("SELECT 1 AS found FROM custodial_wallets WHERE address = ?").get(address) !== null;
  });
}

// ---- transfer idempotency keys ----

export type TransferKeyRow = {
  wallet: string;
  key: string;
  /** The transfer asked for (to, token, amount in base units, memo), as JSON: a retry must ask the same. */
  request: string;
  /** The reference every transaction of the key carries, so that none is ever another transfer's bytes. */
  reference: string;
  signature: string;
  blockhash: string;
  /** The signed transaction, sent again as it is while it may still land. */
  wire: Uint8Array;
  /** The block height past which it can no longer land (landing.ts landingHeightLimit). */
  validHeight: number;
  createdAt: number;
};

export async function findTransferKey(db: Db, wallet: string, key: string): Promise<TransferKeyRow | null> {
  return db.read(() => {
    const row = db.sqlite
      .query(
        `SELECT wallet, idempotency_key AS key, request, reference, signature, blockhash, wire, valid_height AS validHeight, created_at AS createdAt
         FROM transfer_keys WHERE wallet = ? AND idempotency_key = ?`,
      )
      .get(wallet, key) as TransferKeyRow | null;
    return row ?? null;
  });
}

/** Records a key's transfer before it is sent; false when another call recorded one under the key first. */
export function insertTransferKey(db: Db, row: TransferKeyRow): Promise<boolean> {
  return db.write(
    () =>
      db.sqlite
        .query(
          `INSERT INTO transfer_keys (wallet, idempotency_key, request, reference, signature, blockhash, wire, valid_height, created_at)
           VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`,
        )
        .run(row.wallet, row.key, row.request, row.reference, row.signature, row.blockhash, row.wire, row.validHeight, row.createdAt).changes === 1,
  );
}

/**
 * The key's transaction replaced by `next` (one that can no longer land, by a new one), only while it is
 * still `previous`: false when another call replaced or dropped it first.
 */
export function replaceTransferKeyTransaction(
  db: Db,
  wallet: string,
  key: string,
  previous: string,
  next: Pick<TransferKeyRow, "signature" | "blockhash" | "wire" | "validHeight">,
): Promise<boolean> {
  return db.write(
    () =>
      db.sqlite
        .query("UPDATE transfer_keys SET signature = ?, blockhash = ?, wire = ?, valid_height = ? WHERE wallet = ? AND idempotency_key = ? AND signature = ?")
        .run(next.signature, next.blockhash, next.wire, next.validHeight, wallet, key, previous).changes === 1,
  );
}

/** Deletes the keys recorded before `before`, in steps (db/steps.ts). */
export function purgeTransferKeys(db: Db, before: number, stopping?: AbortSignal): Promise<number> {
  return inSteps(
    db,
    0,
    () =>
      stepOf(
        db.sqlite
          .query(
            `DELETE FROM transfer_keys WHERE (wallet, idempotency_key) IN
               (SELECT wallet, idempotency_key FROM transfer_keys WHERE created_at < ? ORDER BY created_at LIMIT ${STEP_ROWS})`,
          )
          .run(before).changes,
      ),
    stopping,
  );
}
