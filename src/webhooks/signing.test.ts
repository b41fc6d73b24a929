// Standard Webhooks signing, checked by the npm `standardwebhooks` verifier (what receivers run).
import { afterEach, describe, expect, setSystemTime, test } from "bun:test";
import { Webhook } from "standardwebhooks";
import { cryptoRandom } from "../lib/ids.ts";
import { newWebhookSecret, signWebhook, webhookSecretBytes } from "./signing.ts";

const TIMESTAMP_S = 1_795_000_000;
const BODY = JSON.stringify({ id: "evt_1", type: "payment.completed", amount: "9.99", note: "ünïcødé ✓" });

afterEach(() => setSystemTime());

/** The verifier checks the timestamp against Date.now(): put "now" at the signing time. */
function verify(secret: string, headers: Record<string, string>, body = BODY): unknown {
  setSystemTime(new Date(TIMESTAMP_S * 1000));
  return new Webhook(secret).verify(body, headers);
}

describe("newWebhookSecret", () => {
  test("is whsec_ + standard base64 of 32 bytes from the injected random source", () => {
    const secret = newWebhookSecret(cryptoRandom);
    expect(secret).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/);
    expect(webhookSecretBytes(secret)?.length).toBe(32);
    const fixed = newWebhookSecret((n) => new Uint8Array(n).fill(7));
    expect(fixed).toBe(`whsec_${Buffer.alloc(32, 7).toString("base64")}`);
    expect(newWebhookSecret(cryptoRandom)).not.toBe(secret);
  });
});

describe("signWebhook", () => {
  test("headers verify with standardwebhooks and parse back to the body", () => {
    const secret = newWebhookSecret(cryptoRandom);
    const headers = signWebhook([secret], "evt_1", TIMESTAMP_S, BODY);
    expect(headers["webhook-id"]).toBe("evt_1");
    expect(headers["webhook-timestamp"]).toBe(String(TIMESTAMP_S));
    expect(headers["webhook-signature"]).toMatch(/^v1,[A-Za-z0-9+/]{43}=$/);
    expect(verify(secret, headers)).toEqual(JSON.parse(BODY));
  });

  test("matches the reference library's own signature byte for byte", () => {
    const secret = newWebhookSecret(cryptoRandom);
    const reference = new Webhook(secret).sign("evt_ref", new Date(TIMESTAMP_S * 1000), BODY);
    expect(signWebhook([secret], "evt_ref", TIMESTAMP_S, BODY)["webhook-signature"]).toBe(reference);
  });

  test("during a rotation both signatures are sent and a verifier with either secret accepts", () => {
    const oldSecret = newWebhookSecret(cryptoRandom);
    const newSecret = newWebhookSecret(cryptoRandom);
    const headers = signWebhook([newSecret, oldSecret], "evt_2", TIMESTAMP_S, BODY);
    expect(headers["webhook-signature"]!.split(" ")).toHaveLength(2);
    expect(verify(newSecret, headers)).toEqual(JSON.parse(BODY));
    expect(verify(oldSecret, headers)).toEqual(JSON.parse(BODY));
    expect(() => verify(newWebhookSecret(cryptoRandom), headers)).toThrow("No matching signature found");
  });

  test("a changed body, id or timestamp does not verify", () => {
    const secret = newWebhookSecret(cryptoRandom);
    const headers = signWebhook([secret], "evt_3", TIMESTAMP_S, BODY);
    expect(() => verify(secret, headers, BODY.replace("9.99", "0.01"))).toThrow();
    expect(() => verify(secret, { ...headers, "webhook-id": "evt_4" })).toThrow();
    expect(() => verify(secret, { ...headers, "webhook-timestamp": String(TIMESTAMP_S + 1) })).toThrow();
  });

  test("receivers refuse a timestamp older than 5 minutes, which is why every attempt is signed anew", () => {
    const secret = newWebhookSecret(cryptoRandom);
    const headers = signWebhook([secret], "evt_5", TIMESTAMP_S, BODY);
    setSystemTime(new Date((TIMESTAMP_S + 301) * 1000));
    expect(() => new Webhook(secret).verify(BODY, headers)).toThrow("Message timestamp too old");
  });

  test("refuses no secrets, a non-whsec secret and a fractional timestamp, without echoing the secret", () => {
    expect(() => signWebhook([], "evt", TIMESTAMP_S, BODY)).toThrow();
    let message = "";
    try {
      signWebhook(["not-a-secret-value"], "evt", TIMESTAMP_S, BODY);
    } catch (err) {
      message = (err as Error).message;
    }
    expect(message).not.toContain("not-a-secret-value");
    expect(message).not.toBe("");
    expect(() => signWebhook([newWebhookSecret(cryptoRandom)], "evt", 1.5, BODY)).toThrow();
    expect(webhookSecretBytes("whsec_")).toBeNull();
    expect(webhookSecretBytes("whsec_not base64!")).toBeNull();
  });
});
