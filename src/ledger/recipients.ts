// Who may be paid: an address that is no wallet (a program, a mint, a token account) can sign for nothing,
// so what is sent to it, or to a token account derived for it, is lost for good.
import type { Deps } from "../deps.ts";
import { fieldError } from "../errors.ts";
import { isAddress } from "../lib/encoding.ts";
import { isProgramOrSysvar, NATIVE_MINT } from "./transactions.ts";

/**
 * Refuses, as VALIDATION_ERROR on `field` (INVALID_ADDRESS when it is no address at all), a recipient
 * that is not a wallet: a program or sysvar, a mint, a token account (its owner is the wallet meant) or an
 * account holding another program's data. An address without an account passes: a wallet not funded yet,
 * or a program's address that holds no data (a vault).
 */
export async function requireWalletRecipient(deps: Deps, address: string, field: string): Promise<void> {
  if (!isAddress(address)) throw fieldError(field, `${field} must be a base58 address of 32 bytes`, {}, "INVALID_ADDRESS");
  const kind = isProgramOrSysvar(address) ? "program" : address === NATIVE_MINT ? "mint" : await deps.ledger.programAccount(address);
  if (kind === null) return;
  const lost = "anything sent to it is lost for good";
  const message =
    kind === "token"
      ? `${field}: ${address} is a token account, not a wallet: give the wallet that owns it (${lost})`
      : `${field}: ${address} is ${kind === "mint" ? "a token's mint" : "a program or a program's account"}, not a wallet: ${lost}`;
  throw fieldError(field, message);
}
