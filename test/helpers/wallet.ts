// Test wallets: real Ed25519 keypairs, base58 addresses, and the HTTP sign-in calls a client makes.
import { generateKeyPairSync, sign as nativeSign, type KeyObject } from "node:crypto";
import { base58 } from "@scure/base";

export type TestWallet = { address: string; publicKey: Uint8Array; sign(message: string): string; privateKey: KeyObject };

export function newWallet(): TestWallet {
  const { publicKey, privateKey } = generateKeyPairSync("ed25519");
  const raw = new Uint8Array(Buffer.from(publicKey.export({ format: "jwk" }).x!, "base64url"));
  return {
    address: base58.encode(raw),
    publicKey: raw,
    privateKey,
    sign: (message) => nativeSign(null, Buffer.from(message, "utf8"), privateKey).toString("base64"),
  };
}

export type Json = Record<string, any>;

export async function call(
  url: string,
  path: string,
  init: { method?: string; body?: unknown; token?: string; headers?: Record<string, string> } = {},
): Promise<{ status: number; body: Json; headers: Headers }> {
  const headers: Record<string, string> = { ...init.headers };
  if (init.body !== undefined) headers["content-type"] ??= "application/json";
  if (init.token !== undefined) headers.authorization = `Bearer ${init.token}`;
  const res = await fetch(url + path, {
    method: init.method ?? (init.body === undefined ? "GET" : "POST"),
    headers,
    body: init.body === undefined ? undefined : typeof init.body === "string" ? init.body : JSON.stringify(init.body),
  });
  const text = await res.text();
  let body: Json;
  try {
    body = JSON.parse(text);
  } catch {
    body = { text };
  }
  return { status: res.status, body, headers: res.headers };
}

export async function getChallenge(url: string, wallet: TestWallet | string, headers: Record<string, string> = {}) {
  const address = typeof wallet === "string" ? wallet : wallet.address;
  const res = await call(url, `/auth/challenge?wallet=${encodeURIComponent(address)}`, { headers });
  if (res.status !== 200) throw new Error(`challenge failed: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body as { nonce: string; message: string; expiresAt: string };
}

/** Challenge → sign → verify; returns the verify response body. */
export async function signIn(url: string, wallet: TestWallet, headers: Record<string, string> = {}) {
  const challenge = await getChallenge(url, wallet, headers);
  const res = await call(url, "/auth/verify", {
    body: { walletAddress: wallet.address, nonce: challenge.nonce, signature: wallet.sign(challenge.message) },
    headers,
  });
  if (res.status !== 200) throw new Error(`sign-in failed: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body as { walletAddress: string; sessionToken: string; isNewSession: true; expiresAt: string };
}

export function decodeJwt(token: string): { header: Json; payload: Json } {
  const [h, p] = token.split(".");
  return { header: JSON.parse(Buffer.from(h!, "base64url").toString()), payload: JSON.parse(Buffer.from(p!, "base64url").toString()) };
}
