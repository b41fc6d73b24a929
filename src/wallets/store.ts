// SQL for custodial wallets: one row per created wallet holding its sealed secret key.
import type { Db } from "../db/open.ts";

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
