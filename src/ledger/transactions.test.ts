// parseTransaction's two readings: a transaction about to be sent (only what the service models) and one a
// cluster already ran (`landed`: other programs' instructions kept as `other`, lookup tables resolved).
import { describe, expect, test } from "bun:test";
import { AddressLookupTableAccount, ComputeBudgetProgram, Keypair, PublicKey, TransactionInstruction, TransactionMessage, VersionedTransaction } from "@solana/web3.js";
import { AppError } from "../errors.ts";
import { parseTransaction, transfersOf } from "./transactions.ts";

const payer = Keypair.generate();
const to = Keypair.generate().publicKey;
const guard = Keypair.generate().publicKey; // a program the service does not model
const blockhash = Keypair.generate().publicKey.toBase58();

function transfer(lamports: number, toKey = to): TransactionInstruction {
  const data = Buffer.alloc(12);
  data.writeUInt32LE(2, 0);
  data.writeBigUInt64LE(BigInt(lamports), 4);
  return new TransactionInstruction({
    programId: new PublicKey("11111111111111111111111111111111"),
    keys: [{ pubkey: payer.publicKey, isSigner: true, isWritable: true }, { pubkey: toKey, isSigner: false, isWritable: true }],
    data,
  });
}

const signed = (message: VersionedTransaction["message"]) => {
  const tx = new VersionedTransaction(message);
  tx.sign([payer]);
  return tx.serialize();
};

const reason = (f: () => unknown) => {
  try {
    f();
    return null;
  } catch (err) {
    return err instanceof AppError ? (err.extra.details as { reason: string }).reason : String(err);
  }
};

describe("parseTransaction", () => {
  test("another program's instruction: refused before sending, kept as `other` once landed", () => {
    const other = new TransactionInstruction({ programId: guard, keys: [{ pubkey: payer.publicKey, isSigner: true, isWritable: false }], data: Buffer.from([1, 2]) });
    const sizeLimit = new TransactionInstruction({ programId: ComputeBudgetProgram.programId, keys: [], data: Buffer.from([4, 0, 0, 4, 0]) });
    const wire = signed(new TransactionMessage({ payerKey: payer.publicKey, recentBlockhash: blockhash, instructions: [sizeLimit, other, transfer(5000)] }).compileToLegacyMessage());
    expect(reason(() => parseTransaction(wire))).toBe("unsupported_instruction");
    const tx = parseTransaction(wire, { loadedAddresses: null });
    expect(tx.instructions.map((ix) => ix.program)).toEqual(["other", "other", "system"]);
    expect(tx.instructions[1]).toMatchObject({ type: "other", programId: guard.toBase58() });
    expect(transfersOf(tx, () => null, () => null)).toEqual([{ token: "sol", mint: null, from: payer.publicKey.toBase58(), to: to.toBase58(), amount: 5000n }]);
    // A malformed instruction of a modelled program is still malformed.
    const short = new TransactionInstruction({ programId: new PublicKey("11111111111111111111111111111111"), keys: [], data: transfer(1).data });
    const bad = signed(new TransactionMessage({ payerKey: payer.publicKey, recentBlockhash: blockhash, instructions: [short] }).compileToLegacyMessage());
    expect(reason(() => parseTransaction(bad, { loadedAddresses: null }))).toBe("malformed");
  });

  test("lookup tables: refused before sending; once landed, their accounts follow the static keys, writable ones first", () => {
    const fromTable = [Keypair.generate().publicKey, Keypair.generate().publicKey];
    const table = new AddressLookupTableAccount({
      key: Keypair.generate().publicKey,
      state: { deactivationSlot: BigInt("18446744073709551615"), lastExtendedSlot: 0, lastExtendedSlotStartIndex: 0, addresses: fromTable },
    });
    // fromTable[0] written to (a transfer's recipient), fromTable[1] only read (an extra account of a memo-like call)
    const read = new TransactionInstruction({ programId: guard, keys: [{ pubkey: fromTable[1]!, isSigner: false, isWritable: false }], data: Buffer.from([]) });
    const message = new TransactionMessage({ payerKey: payer.publicKey, recentBlockhash: blockhash, instructions: [transfer(7000, fromTable[0]), read] }).compileToV0Message([table]);
    const wire = signed(message);
    expect(reason(() => parseTransaction(wire))).toBe("unsupported_instruction");
    expect(reason(() => parseTransaction(wire, { loadedAddresses: null }))).toBe("unsupported_instruction");
    const loadedAddresses = { writable: [fromTable[0]!.toBase58()], readonly: [fromTable[1]!.toBase58()] };
    const tx = parseTransaction(wire, { loadedAddresses });
    const statics = message.staticAccountKeys.length;
    expect(tx.accountKeys.slice(statics)).toEqual([fromTable[0]!.toBase58(), fromTable[1]!.toBase58()]);
    expect([tx.isWritable(statics), tx.isWritable(statics + 1), tx.isSigner(statics)]).toEqual([true, false, false]);
    expect(transfersOf(tx, () => null, () => null)).toEqual([{ token: "sol", mint: null, from: payer.publicKey.toBase58(), to: fromTable[0]!.toBase58(), amount: 7000n }]);
    // Addresses that do not match the tables' counts are not the transaction's.
    expect(reason(() => parseTransaction(wire, { loadedAddresses: { writable: [], readonly: loadedAddresses.readonly } }))).toBe("malformed");
  });
});
