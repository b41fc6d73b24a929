// The verification worker gives the same answers as verifyStrict, batches a turn's requests, and
// falls back to the calling thread when the worker cannot run.
import { expect, test } from "bun:test";
import { generateKeyPairSync, sign } from "node:crypto";
import { inlineVerifier, workerVerifier } from "./verifier.ts";

const WORKER_URL = new URL("./ed25519-worker.ts", import.meta.url).href;

function cases(n: number) {
  return Array.from({ length: n }, (_, i) => {
    const { publicKey, privateKey } = generateKeyPairSync("ed25519");
    const raw = new Uint8Array(Buffer.from(publicKey.export({ format: "jwk" }).x!, "base64url"));
    const message = new TextEncoder().encode(`message ${i}`);
    const signature = new Uint8Array(sign(null, message, privateKey));
    if (i % 3 === 1) signature[5]! ^= 1; // every third one is forged
    return { raw, message, signature, valid: i % 3 !== 1 };
  });
}

test("worker answers agree with the inline verifier, for many requests in one turn", async () => {
  const errors: unknown[] = [];
  const verifier = workerVerifier(WORKER_URL, (e) => errors.push(e));
  const all = cases(60);
  const results = await Promise.all(all.map((c) => verifier.verify(c.raw, c.message, c.signature)));
  expect(results).toEqual(all.map((c) => c.valid));
  expect(await Promise.all(all.map((c) => inlineVerifier.verify(c.raw, c.message, c.signature)))).toEqual(results);
  // and again, in later turns
  for (const c of all.slice(0, 5)) expect(await verifier.verify(c.raw, c.message, c.signature)).toBe(c.valid);
  expect(errors).toEqual([]);
  await verifier.stop();
});

test("a worker that cannot start is reported once and verification goes on inline, still right", async () => {
  const errors: unknown[] = [];
  const verifier = workerVerifier(new URL("./no-such-worker.ts", import.meta.url).href, (e) => errors.push(e));
  const all = cases(9);
  const first = await Promise.all(all.map((c) => verifier.verify(c.raw, c.message, c.signature)));
  expect(first).toEqual(all.map((c) => c.valid));
  const second = await Promise.all(all.map((c) => verifier.verify(c.raw, c.message, c.signature)));
  expect(second).toEqual(all.map((c) => c.valid));
  expect(errors.length).toBe(1);
  await verifier.stop();
});

test("stop() answers what is still queued, and later requests inline", async () => {
  const verifier = workerVerifier(WORKER_URL, () => undefined);
  const [c] = cases(1);
  const pending = verifier.verify(c!.raw, c!.message, c!.signature);
  await verifier.stop();
  expect(await pending).toBe(true);
  expect(await verifier.verify(c!.raw, c!.message, c!.signature)).toBe(true);
});

test("a worker that stays silent is given up after the reply timeout, and answers come inline", async () => {
  const { writeFileSync, mkdtempSync, rmSync } = await import("node:fs");
  const { join } = await import("node:path");
  const { tmpdir } = await import("node:os");
  const dir = mkdtempSync(join(tmpdir(), "walletgate-silent-"));
  try {
    const file = join(dir, "silent.ts");
    writeFileSync(file, "self.onmessage = () => undefined;\n");
    const errors: unknown[] = [];
    const verifier = workerVerifier(Bun.pathToFileURL(file).href, (e) => errors.push(e), 200);
    const [c] = cases(1);
    expect(await verifier.verify(c!.raw, c!.message, c!.signature)).toBe(true);
    expect(errors.length).toBe(1);
    expect(String(errors[0])).toContain("no answer");
    await verifier.stop();
  } finally {
    rmSync(dir, { recursive: true, force: true }); // also when an assertion fails
  }
});

test("only a literal true from the worker is a valid signature: any other answer (1, \"true\", null) is not", async () => {
  const { writeFileSync, mkdtempSync, rmSync } = await import("node:fs");
  const { join } = await import("node:path");
  const { tmpdir } = await import("node:os");
  const dir = mkdtempSync(join(tmpdir(), "walletgate-loose-"));
  const [c] = cases(1);
  try {
    for (const answer of ["1", '"true"', "null", "{}"]) {
      const file = join(dir, `loose-${answer.length}.ts`);
      writeFileSync(file, `self.onmessage = (e) => self.postMessage({ id: e.data.id, results: e.data.items.map(() => ${answer}) });\n`);
      const errors: unknown[] = [];
      const verifier = workerVerifier(Bun.pathToFileURL(file).href, (e) => errors.push(e));
      expect({ answer, valid: await verifier.verify(c!.raw, c!.message, c!.signature) }).toEqual({ answer, valid: false });
      await verifier.stop();
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
