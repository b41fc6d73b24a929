// parseTransaction's two readings: a transaction about to be sent (only what the service models) and one a
// cluster already ran (`landed`: other programs' instructions kept as `other`, lookup tables resolved).
import { describe, expect, test } from "bun:test";
import { AddressLookupTableAccount, ComputeBudgetProgram, Keypair, PublicKey, TransactionInstruction, TransactionMessage, VersionedTransaction } from "@solana/web3.js";
import { FailedTransactionMetadata, LiteSVM } from "litesvm";
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

/**
 * A v0 transfer to the first of two lookup-table addresses, whose instructions also read the second: the
 * message, its signed bytes and the table's addresses.
 */
function throughLookupTable() {
  const fromTable = [Keypair.generate().publicKey, Keypair.generate().publicKey];
  const table = new AddressLookupTableAccount({
    key: Keypair.generate().publicKey,
    state: { deactivationSlot: BigInt("18446744073709551615"), lastExtendedSlot: 0, lastExtendedSlotStartIndex: 0, addresses: fromTable },
  });
  // fromTable[0] written to (a transfer's recipient), fromTable[1] only read (an extra account of a memo-like call)
  const read = new TransactionInstruction({ programId: guard, keys: [{ pubkey: fromTable[1]!, isSigner: false, isWritable: false }], data: Buffer.from([]) });
  const message = new TransactionMessage({ payerKey: payer.publicKey, recentBlockhash: blockhash, instructions: [transfer(7000, fromTable[0]), read] }).compileToV0Message([table]);
  return { fromTable, message, wire: signed(message) };
}

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
  });

  test("a supported instruction its program cannot read (too few accounts, short data) fails at execution and moves nothing", () => {
    const system = new PublicKey("11111111111111111111111111111111");
    const token = new PublicKey("TokenkegQfeZyiNwAJbNbGKPFXCWuBvf9Ss623VQ5DA");
    const ata = new PublicKey("ATokenGPvbdGVxr1b2hvZbsiqW5xWH25efTNsLJA8knL");
    const signer = { pubkey: payer.publicKey, isSigner: true, isWritable: true };
    const other = { pubkey: to, isSigner: false, isWritable: true };
    const amount = Buffer.from([3, 1, 0, 0, 0, 0, 0, 0, 0]);
    const cases: [string, TransactionInstruction][] = [
      ["System Transfer with one account", new TransactionInstruction({ programId: system, keys: [signer], data: transfer(1).data })],
      ["System Transfer with 8 bytes of data", new TransactionInstruction({ programId: system, keys: [signer, other], data: transfer(1).data.subarray(0, 8) })],
      ["Token Transfer with two accounts", new TransactionInstruction({ programId: token, keys: [other, signer], data: amount })],
      ["Token Transfer with 5 bytes of data", new TransactionInstruction({ programId: token, keys: [other, signer, signer], data: amount.subarray(0, 5) })],
      ["TransferChecked with 9 bytes of data", new TransactionInstruction({ programId: token, keys: [other, signer, other, signer], data: Buffer.from([12, ...amount.subarray(1)]) })],
      ["ATA Create with five accounts", new TransactionInstruction({ programId: ata, keys: [signer, other, signer, signer, signer], data: Buffer.from([1]) })],
    ];
    for (const [name, ix] of cases) {
      const wire = signed(new TransactionMessage({ payerKey: payer.publicKey, recentBlockhash: blockhash, instructions: [ix] }).compileToLegacyMessage());
      for (const tx of [parseTransaction(wire), parseTransaction(wire, { loadedAddresses: null })]) {
        expect([name, tx.instructions[0]?.type]).toEqual([name, "invalid"]);
        expect(transfersOf(tx, () => null, () => null)).toEqual([]);
      }
    }
  });

  test("a System instruction is a Transfer only when its whole 4-byte discriminant is 2, not when its first byte is", () => {
    const notTransfer = transfer(5000);
    notTransfer.data.writeUInt32LE(0x0100_0002, 0); // first byte 2, discriminant 16,777,218: no System instruction
    const wire = signed(new TransactionMessage({ payerKey: payer.publicKey, recentBlockhash: blockhash, instructions: [notTransfer] }).compileToLegacyMessage());
    expect(reason(() => parseTransaction(wire))).toBe("unsupported_instruction");
    const landed = parseTransaction(wire, { loadedAddresses: null });
    expect(landed.instructions[0]?.type).toBe("other");
    expect(transfersOf(landed, () => null, () => null)).toEqual([]);
    // The runtime agrees: the System Program fails it and nothing moves.
    const svm = new LiteSVM();
    svm.airdrop(payer.publicKey, 1_000_000_000n);
    const real = new VersionedTransaction(new TransactionMessage({ payerKey: payer.publicKey, recentBlockhash: svm.latestBlockhash(), instructions: [notTransfer] }).compileToLegacyMessage());
    real.sign([payer]);
    expect(svm.sendTransaction(real)).toBeInstanceOf(FailedTransactionMetadata);
    expect(svm.getBalance(to) ?? 0n).toBe(0n);
  });

  test("lookup tables: refused before sending; once landed, their accounts follow the static keys, writable ones first", () => {
    const { fromTable, message, wire } = throughLookupTable();
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

describe("transfersOf", () => {
  test("a TransferChecked is scaled by the decimals the ledger knows of its accounts, not by those it names", () => {
    const mint = Keypair.generate().publicKey;
    const [source, destination] = [Keypair.generate().publicKey, Keypair.generate().publicKey];
    const data = Buffer.alloc(10);
    data[0] = 12;
    data.writeBigUInt64LE(2_500_000n, 1);
    data[9] = 2; // wrong: the mint has 6
    const checked = new TransactionInstruction({
      programId: new PublicKey("TokenkegQfeZyiNwAJbNbGKPFXCWuBvf9Ss623VQ5DA"),
      keys: [
        { pubkey: source, isSigner: false, isWritable: true },
        { pubkey: mint, isSigner: false, isWritable: false },
        { pubkey: destination, isSigner: false, isWritable: true },
        { pubkey: payer.publicKey, isSigner: true, isWritable: false },
      ],
      data,
    });
    const tx = parseTransaction(signed(new TransactionMessage({ payerKey: payer.publicKey, recentBlockhash: blockhash, instructions: [checked] }).compileToLegacyMessage()));
    const known = (address: string) => (address === source.toBase58() || address === destination.toBase58() ? { mint: mint.toBase58(), owner: payer.publicKey.toBase58(), decimals: 6 } : null);
    expect(transfersOf(tx, known, () => null)).toMatchObject([{ mint: mint.toBase58(), amount: 2_500_000n, decimals: 6 }]);
    expect(transfersOf(tx, () => null, () => null)).toMatchObject([{ mint: mint.toBase58(), decimals: 2 }]); // nothing else tells
  });
});

// Hand-made bytes a wallet would never produce: each of parseTransaction's structural rules refuses them
// as `malformed` (the message names which rule, since one rule often backs up another).
describe("parseTransaction: malformed messages", () => {
  /** A signed legacy transfer's message, to tamper with before it is serialized. */
  const legacyMessage = () => new TransactionMessage({ payerKey: payer.publicKey, recentBlockhash: blockhash, instructions: [transfer(5000)] }).compileToLegacyMessage();

  /** `message` on the wire with as many (unverified) signatures as its header asks for. */
  const wireOf = (message: VersionedTransaction["message"]) => {
    const signatures = Array.from({ length: message.header.numRequiredSignatures }, () => new Uint8Array(64).fill(7));
    return new VersionedTransaction(message, signatures).serialize();
  };

  const rejection = (f: () => unknown) => {
    try {
      f();
      return null;
    } catch (err) {
      if (!(err instanceof AppError)) throw err;
      return { code: err.code, reason: (err.extra.details as { reason: string }).reason, message: err.message };
    }
  };
  const malformed = (message: string) => ({ code: "TRANSACTION_REJECTED" as const, reason: "malformed", message });

  test("the untampered message parses (what the tests below change is what is refused)", () => {
    expect(rejection(() => parseTransaction(wireOf(legacyMessage())))).toBeNull();
  });

  test("loaded addresses that do not match the lookup tables (too many writable or read-only; the two mixed up)", () => {
    const { fromTable, wire } = throughLookupTable();
    const [w, r, extra] = [fromTable[0]!.toBase58(), fromTable[1]!.toBase58(), Keypair.generate().publicKey.toBase58()];
    expect(rejection(() => parseTransaction(wire, { loadedAddresses: { writable: [w], readonly: [r] } }))).toBeNull();
    // Neither leaves an instruction's index past the account list: only the count rule refuses them.
    for (const loadedAddresses of [
      { writable: [w, extra], readonly: [r] },
      { writable: [w], readonly: [r, extra] },
      { writable: [w, r], readonly: [] },
    ]) {
      expect(rejection(() => parseTransaction(wire, { loadedAddresses }))).toEqual(malformed("the loaded addresses do not match the transaction's lookup tables"));
    }
  });

  test("an account key appearing twice: among the static keys, or a loaded address repeating one", () => {
    const message = legacyMessage();
    const recipient = message.accountKeys.findIndex((k) => k.equals(to));
    message.accountKeys[recipient] = payer.publicKey; // the payer sends to itself through a second slot
    expect(rejection(() => parseTransaction(wireOf(message)))).toEqual(malformed("an account key appears twice"));

    const fromTable = Keypair.generate().publicKey;
    const table = new AddressLookupTableAccount({
      key: Keypair.generate().publicKey,
      state: { deactivationSlot: BigInt("18446744073709551615"), lastExtendedSlot: 0, lastExtendedSlotStartIndex: 0, addresses: [fromTable] },
    });
    const v0 = signed(new TransactionMessage({ payerKey: payer.publicKey, recentBlockhash: blockhash, instructions: [transfer(7000, fromTable)] }).compileToV0Message([table]));
    const loadedAddresses = { writable: [payer.publicKey.toBase58()], readonly: [] }; // the node's answer names the payer again
    expect(rejection(() => parseTransaction(v0, { loadedAddresses }))).toEqual(malformed("an account key appears twice"));
  });

  test("a header requiring no signature, or more signatures than the message has keys", () => {
    // (Signatures that differ in number from what the header requires cannot be reached from bytes:
    // web3.js refuses them while deserializing, "not a Solana transaction in wire format".)
    const none = legacyMessage();
    none.header.numRequiredSignatures = 0;
    expect(rejection(() => parseTransaction(wireOf(none)))).toEqual(malformed("the message header and the signatures disagree"));
    const tooMany = legacyMessage();
    tooMany.header.numRequiredSignatures = tooMany.accountKeys.length + 1;
    tooMany.header.numReadonlyUnsignedAccounts = 0;
    expect(rejection(() => parseTransaction(wireOf(tooMany)))).toEqual(malformed("the message header and the signatures disagree"));
    const short = legacyMessage();
    const wire = wireOf(short);
    wire[0] = 2; // two signatures announced, one present: the message is read from the wrong offset
    expect(rejection(() => parseTransaction(wire))).toEqual(malformed("not a Solana transaction in wire format"));
  });

  test("a fee payer that is not a writable signer: read-only, or counted among the read-only unsigned accounts", () => {
    const readonlyPayer = legacyMessage();
    readonlyPayer.header.numReadonlySignedAccounts = 1;
    expect(rejection(() => parseTransaction(wireOf(readonlyPayer)))).toEqual(malformed("the fee payer must be a writable signer"));
    const overlapping = legacyMessage();
    overlapping.header.numReadonlyUnsignedAccounts = overlapping.accountKeys.length; // the payer's slot too
    expect(rejection(() => parseTransaction(wireOf(overlapping)))).toEqual(malformed("the fee payer must be a writable signer"));
  });

  test("an instruction naming an account index or a program index outside the message", () => {
    const account = legacyMessage();
    account.instructions[0]!.accounts[1] = account.accountKeys.length; // the recipient, one past the last key
    expect(rejection(() => parseTransaction(wireOf(account)))).toEqual(malformed("an instruction names an account index outside the message"));
    const program = legacyMessage();
    program.instructions[0]!.programIdIndex = program.accountKeys.length;
    expect(rejection(() => parseTransaction(wireOf(program)))).toEqual(malformed("an instruction names an account index outside the message"));
  });
});
