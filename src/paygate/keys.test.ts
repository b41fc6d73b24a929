// API keys in-process: lastUsedAt is written at most once a minute per key (paygate.md), measured on the
// manual clock that the running-server tests cannot move; and the per-owner caps on keys.
import { expect, test } from "bun:test";
import { testDeps } from "../../test/helpers/deps.ts";
import { newWallet } from "../../test/helpers/wallet.ts";
import { toIso } from "../lib/clock.ts";
import { TOKEN_PROGRAM } from "../ledger/transactions.ts";
import { codeOf } from "../../test/helpers/errors.ts";
import { createApiKey, createKeyAuthenticator, LAST_USED_WRITE_MS, listApiKeys, MAX_API_KEYS, revokeApiKey, revokeApiKeyAsOperator } from "./keys.ts";

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

test("an owner has at most 100 unrevoked keys and 1,000 in all", async () => {
  const { deps } = await testDeps();
  const owner = newWallet().address;
  const live = [];
  for (let i = 0; i < MAX_API_KEYS.live; i++) live.push(await createApiKey(deps, owner, `k${i}`));
  expect(await codeOf(createApiKey(deps, owner, "one more"))).toBe("INVALID_STATE");
  expect(await codeOf(createApiKey(deps, newWallet().address, "another owner's first"))).toBe("OK");
  await revokeApiKey(deps, owner, live[0]!.keyId);
  // Revoked keys stay listed, so they count toward the total: made and revoked until 1,000 rows.
  for (let made = MAX_API_KEYS.live; made < MAX_API_KEYS.all; made++) {
    await revokeApiKey(deps, owner, (await createApiKey(deps, owner, `cycled ${made}`)).keyId);
  }
  expect((await listApiKeys(deps, owner)).length).toBe(MAX_API_KEYS.all);
  expect(await codeOf(createApiKey(deps, owner, "past the total"))).toBe("INVALID_STATE");
});

test("the operator's revoke of an unknown id does not repeat it: a key pasted in its place is a secret", async () => {
  const { deps } = await testDeps();
  const key = (await createApiKey(deps, newWallet().address, "pasted")).key;
  let message = "";
  try {
    await revokeApiKeyAsOperator(deps, key);
  } catch (err) {
    message = (err as Error).message;
  }
  expect(message).toBe("no such API key");
});

test("a program's address is no owner: no key, and no owner record (the operator's slip with keys create --owner)", async () => {
  const { deps } = await testDeps();
  for (const program of ["11111111111111111111111111111111", TOKEN_PROGRAM]) {
    await expect(createApiKey(deps, program, "x")).rejects.toMatchObject({
      code: "VALIDATION_ERROR",
      message: `owner: ${program} is a program, not a wallet: an owner is a wallet that signs in`,
    });
  }
  expect(deps.db.sqlite.query("SELECT count(*) AS n FROM owners").get()).toEqual({ n: 0 });
  expect(deps.db.sqlite.query("SELECT count(*) AS n FROM api_keys").get()).toEqual({ n: 0 });
});
