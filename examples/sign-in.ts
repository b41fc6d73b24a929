// Signs in to walletgate with a fresh Ed25519 wallet: `bun examples/sign-in.ts [BASE_URL]`.
import { generateKeyPairSync, sign } from "node:crypto";
import { base58 } from "@scure/base";
const url = process.argv[2] ?? "http://127.0.0.1:3000";
const { publicKey, privateKey } = generateKeyPairSync("ed25519"); // your wallet's key in real life
const wallet = base58.encode(Buffer.from(publicKey.export({ format: "jwk" }).x!, "base64url"));
const { nonce, message } = (await (await fetch(`${url}/auth/challenge?wallet=${wallet}`)).json()) as Record<string, string>;
const signature = sign(null, Buffer.from(message!, "utf8"), privateKey).toString("base64");
const res = await fetch(`${url}/auth/verify`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ walletAddress: wallet, nonce, signature }) });
console.log(JSON.stringify(await res.json()));
