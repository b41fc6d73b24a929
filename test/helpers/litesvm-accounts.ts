// Puts accounts straight into a LiteSVM: SOL accounts, SPL mints and token accounts, rent exempt.
import type { LiteSVM } from "litesvm";
import { PublicKey, SystemProgram } from "@solana/web3.js";
import { ACCOUNT_SIZE, AccountLayout, MINT_SIZE, MintLayout, TOKEN_PROGRAM_ID } from "@solana/spl-token";

export function setSystemAccount(svm: LiteSVM, address: PublicKey, lamports: bigint): void {
  svm.setAccount(address, { lamports: Number(lamports), data: new Uint8Array(0), owner: SystemProgram.programId, executable: false, rentEpoch: 0 });
}

function setTokenProgramAccount(svm: LiteSVM, address: PublicKey, data: Buffer): void {
  svm.setAccount(address, {
    lamports: Number(svm.minimumBalanceForRentExemption(BigInt(data.length))),
    data,
    owner: TOKEN_PROGRAM_ID,
    executable: false,
    rentEpoch: 0,
  });
}

export function setMint(svm: LiteSVM, mint: PublicKey, state: { decimals: number; supply: bigint; authority: PublicKey }): void {
  const data = Buffer.alloc(MINT_SIZE);
  MintLayout.encode(
    {
      mintAuthorityOption: 1,
      mintAuthority: state.authority,
      supply: state.supply,
      decimals: state.decimals,
      isInitialized: true,
      freezeAuthorityOption: 0,
      freezeAuthority: PublicKey.default,
    },
    data,
  );
  setTokenProgramAccount(svm, mint, data);
}

/** An initialized token account (no delegate, not native, not frozen). */
export function setTokenAccount(svm: LiteSVM, address: PublicKey, state: { mint: PublicKey; owner: PublicKey; amount: bigint }): void {
  const data = Buffer.alloc(ACCOUNT_SIZE);
  AccountLayout.encode(
    {
      mint: state.mint,
      owner: state.owner,
      amount: state.amount,
      delegateOption: 0,
      delegate: PublicKey.default,
      state: 1, // Initialized
      isNativeOption: 0,
      isNative: 0n,
      delegatedAmount: 0n,
      closeAuthorityOption: 0,
      closeAuthority: PublicKey.default,
    },
    data,
  );
  setTokenProgramAccount(svm, address, data);
}
