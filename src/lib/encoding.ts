// Strict decoders for the encodings at our edges: base58 addresses and padded standard base64.
import { base58 } from "@scure/base";

const BASE58_ADDRESS_MAX_CHARS = 44; // 32 bytes never need more; bounds the quadratic decoder

/** Said instead of a value refused as an address: a wallet's secret key pasted there must not reach a log. */
export const NOT_REPEATED = "(not repeated here: it may be a secret key)";

/** Decodes a Solana address: base58 of exactly 32 bytes, else null. */
export function decodeAddress(address: string): Uint8Array | null {
  if (address.length < 32 || address.length > BASE58_ADDRESS_MAX_CHARS) return null;
  try {
    const bytes = base58.decode(address);
    return bytes.length === 32 ? bytes : null;
  } catch {
    return null;
  }
}

/** Addresses recently found valid: the same few wallets are checked again and again (access checks). */
const validAddresses = new Set<string>();
const VALID_ADDRESSES_KEPT = 4096;

/** Whether `address` is a Solana address (as decodeAddress), remembering the last few thousand valid ones. */
export function isAddress(address: string): boolean {
  if (validAddresses.has(address)) return true;
  if (decodeAddress(address) === null) return false;
  if (validAddresses.size >= VALID_ADDRESSES_KEPT) validAddresses.delete(validAddresses.values().next().value!);
  validAddresses.add(address);
  return true;
}

export function encodeBase58(bytes: Uint8Array): string {
  return base58.encode(bytes);
}

export function decodeBase58(text: string): Uint8Array | null {
  try {
    return base58.decode(text);
  } catch {
    return null;
  }
}

const BASE64_STANDARD = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;

/** Decodes RFC 4648 standard, padded base64; anything else (url-safe, unpadded, spaces) is null. */
export function decodeBase64Strict(text: string): Uint8Array | null {
  if (text.length % 4 !== 0 || !BASE64_STANDARD.test(text)) return null;
  const bytes = new Uint8Array(Buffer.from(text, "base64"));
  // Non-zero padding bits make a second spelling of the same bytes; refuse it.
  return Buffer.from(bytes).toString("base64") === text ? bytes : null;
}

export function encodeBase64(bytes: Uint8Array): string {
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString("base64");
}

/** True for a non-empty string of hex digits (optionally 0x-prefixed). */
export function isHex(text: string): boolean {
  return /^(0x)?[0-9a-fA-F]+$/.test(text);
}

export function hexToBytes(hex: string): Uint8Array {
  return new Uint8Array(Buffer.from(hex, "hex"));
}

export function bytesToHex(bytes: Uint8Array): string {
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString("hex");
}
