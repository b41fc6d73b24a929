// Owners' webhook endpoints: URL and event rules, owner scoping, the secret sealed at rest, rotation.
import { describe, expect, test } from "bun:test";
import type { Deps } from "../deps.ts";
import { encodeBase58 } from "../lib/encoding.ts";
import { cryptoRandom } from "../lib/ids.ts";
import { codeOf } from "../../test/helpers/errors.ts";
import { testDeps } from "../../test/helpers/deps.ts";
import {
  createEndpoint,
  deleteEndpoint,
  endpointSigningSecrets,
  getEndpoint,
  listEndpoints,
  MAX_ENDPOINTS_PER_OWNER,
  MAX_PREVIOUS_SECRETS,
  PREVIOUS_SECRET_TTL_MS,
  revealEndpointSecret,
  rotateEndpointSecret,
  updateEndpoint,
  WEBHOOK_EVENT_TYPES,
} from "./endpoints.ts";
import { listDeliveries, sendTestEvent } from "./outbox.ts";
import { webhookSecretBytes } from "./signing.ts";
import * as store from "./store.ts";
import { ENDPOINT_DELETIONS_KEPT_DAYS, purgeWebhooks } from "./purge.ts";
import { DAY_MS } from "../lib/clock.ts";
import { openDatabase } from "../db/open.ts";
import { migrate } from "../db/migrate.ts";
import { MIGRATIONS } from "../db/migrations.ts";

const setup = (env: Record<string, string> = {}) => testDeps(env);

const wallet = () => encodeBase58(cryptoRandom(32));

const onMainnet = (deps: Deps): Deps => ({ ...deps, config: { ...deps.config, network: "mainnet" } });

describe("create", () => {
  test("returns the dashboard shape with a whsec_ secret; events deduplicated in catalogue order", async () => {
    const { deps } = await setup();
    const owner = wallet();
    const created = await createEndpoint(deps, owner, { url: "https://hooks.example.com/walletgate", events: ["feature.unlocked", "payment.completed", "feature.unlocked"] });
    expect(created).toEqual({
      endpointId: expect.stringMatching(/^whe_[1-9A-HJ-NP-Za-km-z]+$/),
      url: "https://hooks.example.com/walletgate",
      events: ["payment.completed", "feature.unlocked"],
      enabled: true,
      secret: expect.stringMatching(/^whsec_/),
      createdAt: "2026-11-22T00:00:00.000Z",
    });
    expect(webhookSecretBytes(created.secret)?.length).toBe(32);
    expect(await listEndpoints(deps, owner)).toEqual({ endpoints: [{ endpointId: created.endpointId, url: created.url, events: created.events, enabled: true, createdAt: created.createdAt }] });
    expect(await getEndpoint(deps, owner, created.endpointId)).not.toHaveProperty("secret");
  });

  test("URL rules: https anywhere, http only off mainnet, no credentials, fragment, other schemes or overlong URLs", async () => {
    const { deps } = await setup();
    const owner = wallet();
    const events = ["payment.completed"];
    expect(await codeOf(createEndpoint(deps, owner, { url: "http://hooks.example.com/", events }))).toBe("OK");
    expect(await codeOf(createEndpoint(onMainnet(deps), owner, { url: "http://hooks.example.com/", events }))).toBe("VALIDATION_ERROR");
    expect(await codeOf(createEndpoint(onMainnet(deps), owner, { url: "https://hooks.example.com/", events }))).toBe("OK");
    for (const url of ["ftp://hooks.example.com/", "https://user:pw@hooks.example.com/", "https://hooks.example.com/#x", "/relative", "", `https://hooks.example.com/${"a".repeat(2048)}`]) {
      expect({ url: url.slice(0, 40), code: await codeOf(createEndpoint(deps, owner, { url, events })) }).toEqual({ url: url.slice(0, 40), code: "VALIDATION_ERROR" });
    }
  });

  test("events must be a non-empty subset of the catalogue", async () => {
    const { deps } = await setup();
    const url = "https://hooks.example.com/";
    expect(await codeOf(createEndpoint(deps, wallet(), { url, events: [] }))).toBe("VALIDATION_ERROR");
    expect(await codeOf(createEndpoint(deps, wallet(), { url, events: ["payment.completed", "order.accepted"] }))).toBe("VALIDATION_ERROR");
    const all: string[] = [...WEBHOOK_EVENT_TYPES];
    expect((await createEndpoint(deps, wallet(), { url, events: [...all].reverse() })).events).toEqual([...WEBHOOK_EVENT_TYPES]);
    expect(all).toHaveLength(7);
  });

  test(`an owner has at most ${MAX_ENDPOINTS_PER_OWNER} endpoints`, async () => {
    const { deps } = await setup();
    const owner = wallet();
    for (let i = 0; i < MAX_ENDPOINTS_PER_OWNER; i++) await createEndpoint(deps, owner, { url: `https://hooks.example.com/${i}`, events: ["payment.completed"] });
    expect(await codeOf(createEndpoint(deps, owner, { url: "https://hooks.example.com/x", events: ["payment.completed"] }))).toBe("INVALID_STATE");
    expect(await codeOf(createEndpoint(deps, wallet(), { url: "https://hooks.example.com/x", events: ["payment.completed"] }))).toBe("OK");
  });
});

describe("owner scoping", () => {
  test("another owner's endpoint is NOT_FOUND for every action, and absent from their list", async () => {
    const { deps } = await setup();
    const owner = wallet();
    const stranger = wallet();
    const { endpointId } = await createEndpoint(deps, owner, { url: "https://hooks.example.com/", events: ["payment.completed"] });
    expect(await listEndpoints(deps, stranger)).toEqual({ endpoints: [] });
    expect(await codeOf(getEndpoint(deps, stranger, endpointId))).toBe("NOT_FOUND");
    expect(await codeOf(updateEndpoint(deps, stranger, endpointId, { enabled: false }))).toBe("NOT_FOUND");
    expect(await codeOf(updateEndpoint(deps, stranger, endpointId, { url: "https://stranger.example.com/" }))).toBe("NOT_FOUND");
    expect(await codeOf(updateEndpoint(deps, stranger, endpointId, { events: ["feature.unlocked"] }))).toBe("NOT_FOUND");
    expect(await codeOf(rotateEndpointSecret(deps, stranger, endpointId))).toBe("NOT_FOUND");
    expect(await codeOf(revealEndpointSecret(deps, stranger, endpointId))).toBe("NOT_FOUND");
    expect(await codeOf(sendTestEvent(deps, stranger, endpointId))).toBe("NOT_FOUND");
    expect(await codeOf(listDeliveries(deps, stranger, endpointId))).toBe("NOT_FOUND");
    expect(await codeOf(deleteEndpoint(deps, stranger, endpointId))).toBe("NOT_FOUND");
    expect((await getEndpoint(deps, owner, endpointId)).enabled).toBe(true);
    expect(await codeOf(getEndpoint(deps, owner, "whe_doesnotexist"))).toBe("NOT_FOUND");
  });
});

describe("update and delete", () => {
  test("url, events and enabled change; an empty patch changes nothing; bad values are refused", async () => {
    const { deps } = await setup();
    const owner = wallet();
    const { endpointId } = await createEndpoint(deps, owner, { url: "https://a.example.com/", events: ["payment.completed"] });
    expect(await updateEndpoint(deps, owner, endpointId, { url: "https://b.example.com/hook", events: ["product.created"], enabled: false })).toMatchObject({
      url: "https://b.example.com/hook",
      events: ["product.created"],
      enabled: false,
    });
    expect(await updateEndpoint(deps, owner, endpointId, {})).toMatchObject({ url: "https://b.example.com/hook", enabled: false });
    expect((await updateEndpoint(deps, owner, endpointId, { enabled: true })).enabled).toBe(true);
    expect(await codeOf(updateEndpoint(deps, owner, endpointId, { url: "ftp://x.example.com/" }))).toBe("VALIDATION_ERROR");
    expect(await codeOf(updateEndpoint(deps, owner, endpointId, { events: ["nope"] }))).toBe("VALIDATION_ERROR");
  });

  test("delete removes the endpoint and its deliveries", async () => {
    const { deps, db } = await setup();
    const owner = wallet();
    const { endpointId } = await createEndpoint(deps, owner, { url: "https://a.example.com/", events: ["payment.completed"] });
    const { deliveryId } = await sendTestEvent(deps, owner, endpointId);
    expect(await deleteEndpoint(deps, owner, endpointId)).toEqual({ deleted: true });
    expect(await codeOf(getEndpoint(deps, owner, endpointId))).toBe("NOT_FOUND");
    expect(await store.findDelivery(db, deliveryId)).toBeNull();
    expect(await codeOf(deleteEndpoint(deps, owner, endpointId))).toBe("NOT_FOUND");
  });

  test("a delete is recorded for restores of earlier backups, a year long; another owner's refused delete records nothing", async () => {
    const { deps, db, clock } = await setup();
    const owner = wallet();
    const { endpointId } = await createEndpoint(deps, owner, { url: "https://a.example.com/", events: ["payment.completed"] });
    const kept = await createEndpoint(deps, owner, { url: "https://b.example.com/", events: ["payment.completed"] });
    expect(await codeOf(deleteEndpoint(deps, wallet(), kept.endpointId))).toBe("NOT_FOUND");
    const deletedAt = clock.now();
    await deleteEndpoint(deps, owner, endpointId);
    const records = () => db.sqlite.query("SELECT id, deleted_at AS at FROM webhook_endpoint_deletions").all();
    expect(records()).toEqual([{ id: endpointId, at: deletedAt }]);
    clock.advance(ENDPOINT_DELETIONS_KEPT_DAYS * DAY_MS);
    expect((await purgeWebhooks(deps)).webhookDeletionRecords).toBe(0);
    expect(records()).toHaveLength(1); // a year to the millisecond: still kept
    clock.advance(1);
    expect((await purgeWebhooks(deps)).webhookDeletionRecords).toBe(1);
    expect(records()).toEqual([]);
  });
});

describe("the secret", () => {
  test("is sealed at rest under the endpoint id: not in the row, and not openable from another row", async () => {
    const { deps, db } = await setup();
    const owner = wallet();
    const a = await createEndpoint(deps, owner, { url: "https://a.example.com/", events: ["payment.completed"] });
    const b = await createEndpoint(deps, owner, { url: "https://b.example.com/", events: ["payment.completed"] });
    const rowA = (await store.findEndpoint(db, a.endpointId))!;
    const secretBytes = Buffer.from(webhookSecretBytes(a.secret)!);
    expect(Buffer.from(rowA.secretCiphertext).includes(secretBytes)).toBe(false);
    const dump = JSON.stringify(db.sqlite.query("SELECT * FROM webhook_endpoints").all());
    expect(dump).not.toContain(a.secret.slice(6));
    expect(await revealEndpointSecret(deps, owner, a.endpointId)).toEqual({ secret: a.secret });
    // Copy A's sealed secret into B's row: GCM refuses it there (the AAD is the endpoint id).
    db.sqlite.query("UPDATE webhook_endpoints SET secret_iv = ?, secret_ciphertext = ? WHERE id = ?").run(rowA.secretIv, rowA.secretCiphertext, b.endpointId);
    expect(await codeOf(revealEndpointSecret(deps, owner, b.endpointId))).toBe("INTERNAL_ERROR");
    expect(endpointSigningSecrets(deps, (await store.findEndpoint(db, b.endpointId))!, [], deps.clock.now())).toBeNull();
  });

  test("rotation: a new secret; the old one signs alongside for 24 hours, then alone the new one", async () => {
    const { deps, db, clock } = await setup();
    const owner = wallet();
    const { endpointId, secret: first } = await createEndpoint(deps, owner, { url: "https://a.example.com/", events: ["payment.completed"] });
    const signing = async () => endpointSigningSecrets(deps, (await store.findEndpoint(db, endpointId))!, await store.listSigningPreviousSecrets(db, endpointId, clock.now()), clock.now());
    expect(await signing()).toEqual([first]);

    const { secret: second } = await rotateEndpointSecret(deps, owner, endpointId);
    expect(second).not.toBe(first);
    expect(await revealEndpointSecret(deps, owner, endpointId)).toEqual({ secret: second });
    expect(await signing()).toEqual([second, first]);
    clock.advance(PREVIOUS_SECRET_TTL_MS - 1);
    expect(await signing()).toEqual([second, first]);
    clock.advance(1);
    expect(await signing()).toEqual([second]);
    // Each of the two looks on its own: the store lists no secret past its day, and a list read a moment
    // earlier signs with none of its secrets once their day is over.
    const listedBefore = await store.listSigningPreviousSecrets(db, endpointId, clock.now() - 1);
    expect(listedBefore.length).toBe(1);
    expect(await store.listSigningPreviousSecrets(db, endpointId, clock.now())).toEqual([]);
    expect(endpointSigningSecrets(deps, (await store.findEndpoint(db, endpointId))!, listedBefore, clock.now())).toEqual([second]);

    const { secret: third } = await rotateEndpointSecret(deps, owner, endpointId);
    expect(await signing()).toEqual([third, second]);
    expect(await codeOf(rotateEndpointSecret(deps, wallet(), endpointId))).toBe("NOT_FOUND"); // another owner's
  });

  test("migration 17 moves a replaced secret still signing out of the endpoint's row, bytes and day unchanged", () => {
    const db = openDatabase(":memory:");
    migrate(db.sqlite, 1, MIGRATIONS.filter((m) => m.version <= 16));
    const [iv, ct, oldIv, oldCt] = [12, 48, 12, 48].map((n, i) => new Uint8Array(n).fill(i + 1));
    db.sqlite
      .query(
        `INSERT INTO webhook_endpoints (id, owner, url, events, enabled, secret_iv, secret_ciphertext, previous_secret_iv, previous_secret_ciphertext, previous_secret_until, created_at, updated_at)
         VALUES ('whe_a', 'o', 'https://a.example.com/', '[]', 1, ?, ?, ?, ?, 5000, 1, 2), ('whe_b', 'o', 'https://b.example.com/', '[]', 0, ?, ?, NULL, NULL, NULL, 3, 4)`,
      )
      .run(iv!, ct!, oldIv!, oldCt!, iv!, ct!);
    expect(migrate(db.sqlite, 2, MIGRATIONS.filter((m) => m.version <= 17)).applied).toEqual([17]);
    expect(db.sqlite.query("SELECT endpoint_id, secret_iv, secret_ciphertext, signs_until FROM webhook_previous_secrets").all()).toEqual([
      { endpoint_id: "whe_a", secret_iv: oldIv, secret_ciphertext: oldCt, signs_until: 5000 },
    ]);
    expect(db.sqlite.query("SELECT id, enabled, secret_iv, created_at, updated_at FROM webhook_endpoints ORDER BY id").all()).toEqual([
      { id: "whe_a", enabled: 1, secret_iv: iv, created_at: 1, updated_at: 2 },
      { id: "whe_b", enabled: 0, secret_iv: iv, created_at: 3, updated_at: 4 },
    ]);
    db.close();
  });

  test("two rotations within a day: each replaced secret signs for its own 24 hours; at most MAX_PREVIOUS_SECRETS at once", async () => {
    const { deps, db, clock } = await setup();
    const owner = wallet();
    const { endpointId, secret: a } = await createEndpoint(deps, owner, { url: "https://a.example.com/", events: ["payment.completed"] });
    const signing = async () => endpointSigningSecrets(deps, (await store.findEndpoint(db, endpointId))!, await store.listSigningPreviousSecrets(db, endpointId, clock.now()), clock.now());
    const { secret: b } = await rotateEndpointSecret(deps, owner, endpointId);
    clock.advance(60 * 60_000);
    const { secret: c } = await rotateEndpointSecret(deps, owner, endpointId);
    expect(await signing()).toEqual([c, b, a]); // a's day is not cut short by the second rotation
    clock.advance(PREVIOUS_SECRET_TTL_MS - 60 * 60_000);
    expect(await signing()).toEqual([c, b]); // a's 24 hours are over; b's go on for one more hour
    clock.advance(60 * 60_000);
    expect(await signing()).toEqual([c]);

    // Each replaced secret adds a signature to every delivery: a rotation beyond the cap waits for the oldest.
    const secrets = [c];
    for (let i = 0; i < MAX_PREVIOUS_SECRETS; i++) {
      secrets.unshift((await rotateEndpointSecret(deps, owner, endpointId)).secret);
      clock.advance(1_000);
    }
    expect(await signing()).toEqual(secrets);
    const refused = await rotateEndpointSecret(deps, owner, endpointId).catch((err: unknown) => err);
    expect(refused).toMatchObject({ code: "RATE_LIMITED", extra: { retryAfter: PREVIOUS_SECRET_TTL_MS / 1000 - MAX_PREVIOUS_SECRETS } });
    expect(await revealEndpointSecret(deps, owner, endpointId)).toEqual({ secret: secrets[0]! }); // unchanged
    clock.advance((PREVIOUS_SECRET_TTL_MS / 1000 - MAX_PREVIOUS_SECRETS) * 1000);
    const { secret: next } = await rotateEndpointSecret(deps, owner, endpointId);
    expect(await signing()).toEqual([next, ...secrets.slice(0, MAX_PREVIOUS_SECRETS)]);

    // The purge deletes those past their day; deleting the endpoint deletes the rest.
    const count = () => (db.sqlite.query("SELECT COUNT(*) AS n FROM webhook_previous_secrets WHERE endpoint_id = ?").get(endpointId) as { n: number }).n;
    expect(count()).toBe(MAX_PREVIOUS_SECRETS); // the one past its day went in the rotation's write
    clock.advance(1_000);
    expect((await purgeWebhooks(deps)).webhookOldSecrets).toBe(1);
    expect(count()).toBe(MAX_PREVIOUS_SECRETS - 1);
    await deleteEndpoint(deps, owner, endpointId);
    expect(count()).toBe(0);
  });
});
