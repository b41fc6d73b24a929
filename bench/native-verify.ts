// Sign-in baseline, run as its own process (one JS thread, so one core): native Ed25519 verifies per
// second done the way src/lib/ed25519.ts does them — a fresh key object from DER SPKI per verify.
// Usage: bun bench/native-verify.ts [seconds] [messageBytes]; prints one JSON line.
import { createPublicKey, generateKeyPairSync, sign, verify } from "node:crypto";

const SPKI_ED25519_PREFIX = Buffer.from("302a300506032b6570032100", "hex");
const CASES = 256;

const seconds = Number(process.argv[2] ?? 2);
const messageBytes = Number(process.argv[3] ?? 300);

type Case = { publicKey: Buffer; message: Buffer; signature: Buffer };

function makeCases(): Case[] {
  const cases: Case[] = [];
  for (let i = 0; i < CASES; i++) {
    const { publicKey, privateKey } = generateKeyPairSync("ed25519");
    const raw = publicKey.export({ format: "der", type: "spki" }).subarray(SPKI_ED25519_PREFIX.length);
    const message = Buffer.alloc(messageBytes, `case ${i}: sign in to walletgate, nonce and times follow. `);
    cases.push({ publicKey: Buffer.from(raw), message, signature: sign(null, message, privateKey) });
  }
  return cases;
}

/** Verifies for `ms` milliseconds; returns how many were done and how long it really took. */
function run(cases: Case[], ms: number): { verifies: number; elapsedMs: number } {
  const started = performance.now();
  let verifies = 0;
  for (;;) {
    for (let i = 0; i < 64; i++) {
      const c = cases[(verifies + i) % CASES]!;
      const key = createPublicKey({ key: Buffer.concat([SPKI_ED25519_PREFIX, c.publicKey]), format: "der", type: "spki" });
      if (!verify(null, c.message, key, c.signature)) throw new Error("a valid signature did not verify");
    }
    verifies += 64;
    const elapsedMs = performance.now() - started;
    if (elapsedMs >= ms) return { verifies, elapsedMs };
  }
}

const cases = makeCases();
run(cases, 300); // warm-up: JIT and allocator settle
const measured = run(cases, seconds * 1000);
process.stdout.write(
  `${JSON.stringify({
    verifies: measured.verifies,
    seconds: measured.elapsedMs / 1000,
    messageBytes,
    verifiesPerSecond: measured.verifies / (measured.elapsedMs / 1000),
  })}\n`,
);
