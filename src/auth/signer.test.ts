// Session JWTs signed on the worker are the tokens the calling thread would sign, and verify; a worker
// that cannot run leaves signing to the calling thread.
import { expect, test } from "bun:test";
import { inlineSessionSigner, workerSessionSigner } from "./signer.ts";
import { createJwtKeys, verifySessionJwt, type UnsignedClaims } from "./tokens.ts";

const WORKER_URL = new URL("./jwt-worker.ts", import.meta.url).href;
const ISSUER = "http://walletgate.test";
const secret = crypto.getRandomValues(new Uint8Array(32));

const claims = (i: number): UnsignedClaims => ({
  walletAddress: "5RgrqU2syUoeHwUni2RcwTc7rYbkiUdtZdUb3oj9ku9r",
  sessionId: crypto.randomUUID(),
  jti: crypto.randomUUID(),
  iat: 1_800_000_000 + i,
  exp: 1_800_086_400 + i,
});

test("the worker's tokens are byte-for-byte the inline ones, for many in one turn, and verify", async () => {
  const keys = await createJwtKeys(ISSUER, secret, null);
  const errors: unknown[] = [];
  const signer = workerSessionSigner(WORKER_URL, { issuer: ISSUER, secret }, keys, (e) => errors.push(e));
  const all = Array.from({ length: 40 }, (_, i) => claims(i));
  const tokens = await Promise.all(all.map((c) => signer.sign(c)));
  expect(tokens).toEqual(await Promise.all(all.map((c) => inlineSessionSigner(keys).sign(c))));
  const verified = await verifySessionJwt(keys, tokens[7]!, (all[7]!.iat + 10) * 1000);
  expect(verified).toEqual({ ...all[7]!, iss: ISSUER });
  expect(await signer.sign(all[0]!)).toBe(tokens[0]!); // a later turn
  expect(errors).toEqual([]);
  await signer.stop();
});

test("a worker that cannot start is reported once and tokens are signed here, still right", async () => {
  const keys = await createJwtKeys(ISSUER, secret, null);
  const errors: unknown[] = [];
  const signer = workerSessionSigner(new URL("./no-such-worker.ts", import.meta.url).href, { issuer: ISSUER, secret }, keys, (e) => errors.push(e));
  const c = claims(1);
  const [a, b] = await Promise.all([signer.sign(c), signer.sign(c)]);
  expect(a).toBe(await inlineSessionSigner(keys).sign(c));
  expect(b).toBe(a);
  expect(await signer.sign(c)).toBe(a);
  expect(errors.length).toBe(1);
  await signer.stop();
});

test("a worker that fails a batch (no key: init never sent) is given up once, and that batch and later ones are signed here", async () => {
  const keys = await createJwtKeys(ISSUER, secret, null);
  const { workerCalls } = await import("../lib/worker-batch.ts");
  const { signSessionJwt } = await import("./tokens.ts");
  const errors: unknown[] = [];
  const calls = workerCalls<UnsignedClaims, string>(WORKER_URL, { inline: (c) => signSessionJwt(keys, c), onWorkerError: (e) => errors.push(e) });
  const c = claims(2);
  expect(await calls.call(c)).toBe(await signSessionJwt(keys, c));
  expect(errors.length).toBe(1);
  expect(String(errors[0])).toContain("no key");
  const later = claims(3);
  expect(await calls.call(later)).toBe(await signSessionJwt(keys, later));
  expect(errors.length).toBe(1);
  await calls.stop();
});
