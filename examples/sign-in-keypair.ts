// Signs in to walletgate with your own wallet's key, a Solana CLI keypair file (`solana-keygen new`: a JSON
// array of 64 bytes, the secret seed then the public key), and prints the answer with its session token:
// `bun examples/sign-in-keypair.ts ~/.config/solana/id.json [BASE_URL]`. The key never leaves this machine.
import { createPrivateKey, createPublicKey, sign } from "node:crypto";
import { readFileSync } from "node:fs";
import { base58 } from "@scure/base";
const [file, url = "http://127.0.0.1:3000"] = process.argv.slice(2);
if (file === undefined) throw new Error("usage: bun examples/sign-in-keypair.ts <keypair.json> [BASE_URL]");
const bytes = Uint8Array.from(JSON.parse(readFileSync(file, "utf8")) as number[]);
if (bytes.length !== 64) throw new Error(`${file} is not a Solana keypair file (a JSON array of 64 bytes)`);
const privateKey = createPrivateKey({ key: { kty: "OKP", crv: "Ed25519", d: Buffer.from(bytes.subarray(0, 32)).toString("base64url"), x: Buffer.from(bytes.subarray(32)).toString("base64url") }, format: "jwk" });
const wallet = base58.encode(Buffer.from(createPublicKey(privateKey).export({ format: "jwk" }).x!, "base64url"));
if (wallet !== base58.encode(bytes.subarray(32))) throw new Error(`${file}: its public half does not match its secret`);
// A refusal (a rate limit, say) goes to stderr with exit 1, so `TOKEN=$(… | jq -r .sessionToken)` is not set to null.
const answer = async (res: Response) => {
  const body = (await res.json()) as Record<string, string>;
  if (!res.ok) {
    console.error(`${res.status}: ${JSON.stringify(body)}`);
    process.exit(1);
  }
  return body;
};
const { nonce, message } = await answer(await fetch(`${url}/auth/challenge?wallet=${wallet}`));
const signature = sign(null, Buffer.from(message!, "utf8"), privateKey).toString("base64");
const res = await fetch(`${url}/auth/verify`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ walletAddress: wallet, nonce, signature }) });
console.log(JSON.stringify(await answer(res)));
