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
  PREVIOUS_SECRET_TTL_MS,
  revealEndpointSecret,
  rotateEndpointSecret,
  updateEndpoint,
  WEBHOOK_EVENT_TYPES,
} from "./endpoints.ts";
import { listDeliveries, sendTestEvent } from "./outbox.ts";
import { webhookSecretBytes } from "./signing.ts";
import * as store from "./store.ts";

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
    expect(endpointSigningSecrets(deps, (await store.findEndpoint(db, b.endpointId))!, deps.clock.now())).toBeNull();
  });

  test("rotation: a new secret; the old one signs alongside for 24 hours, then alone the new one", async () => {
    const { deps, db, clock } = await setup();
    const owner = wallet();
    const { endpointId, secret: first } = await createEndpoint(deps, owner, { url: "https://a.example.com/", events: ["payment.completed"] });
    const row = async () => (await store.findEndpoint(db, endpointId))!;
    expect(endpointSigningSecrets(deps, await row(), clock.now())).toEqual([first]);

    const { secret: second } = await rotateEndpointSecret(deps, owner, endpointId);
    expect(second).not.toBe(first);
    expect(await revealEndpointSecret(deps, owner, endpointId)).toEqual({ secret: second });
    expect(endpointSigningSecrets(deps, await row(), clock.now())).toEqual([second, first]);
    clock.advance(PREVIOUS_SECRET_TTL_MS - 1);
    expect(endpointSigningSecrets(deps, await row(), clock.now())).toEqual([second, first]);
    clock.advance(1);
    expect(endpointSigningSecrets(deps, await row(), clock.now())).toEqual([second]);

    // A second rotation keeps only the one just replaced.
    const { secret: third } = await rotateEndpointSecret(deps, owner, endpointId);
    expect(endpointSigningSecrets(deps, await row(), clock.now())).toEqual([third, second]);
  });
});
