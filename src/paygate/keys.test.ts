// The X-API-Key check's bookkeeping: lastUsedAt is written at most once a minute per key (paygate.md),
// measured on the manual clock that the running-server tests cannot move.
import { expect, test } from "bun:test";
import { testDeps } from "../../test/helpers/deps.ts";
import { newWallet } from "../../test/helpers/wallet.ts";
import { toIso } from "../lib/clock.ts";
import { createApiKey, createKeyAuthenticator, LAST_USED_WRITE_MS, listApiKeys } from "./keys.ts";

test("lastUsedAt is written once a minute per key at most, also by a new process, and again after the minute", async () => {
  const { deps, clock } = await testDeps();
  const owner = newWallet().address;
  const [first, second] = [await createApiKey(deps, owner, "one"), await createApiKey(deps, owner, "two")];
  const lastUsed = async (keyId: string) => (await listApiKeys(deps, owner)).find((k) => k.keyId === keyId)!.lastUsedAt;
  const authenticate = createKeyAuthenticator(deps);

  const t0 = clock.now();
  await authenticate(first.key);
  expect(await lastUsed(first.keyId)).toBe(toIso(t0));
  clock.advance(LAST_USED_WRITE_MS / 2);
  await authenticate(second.key); // each key on its own minute
  expect(await lastUsed(second.keyId)).toBe(toIso(t0 + LAST_USED_WRITE_MS / 2));
  clock.advance(LAST_USED_WRITE_MS / 2 - 1);
  for (let i = 0; i < 3; i++) await authenticate(first.key);
  await createKeyAuthenticator(deps)(first.key); // another process starts from the stored value
  expect(await lastUsed(first.keyId)).toBe(toIso(t0));

  clock.advance(1);
  await authenticate(first.key);
  expect(await lastUsed(first.keyId)).toBe(toIso(t0 + LAST_USED_WRITE_MS));
  expect(await lastUsed(second.keyId)).toBe(toIso(t0 + LAST_USED_WRITE_MS / 2));
});
