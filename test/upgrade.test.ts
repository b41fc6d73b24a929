// Upgrading a database an older walletgate wrote: a DATA_DIR migrated only as far as an earlier version and
// holding rows as the code of that time wrote them is served by this version. The rows survive the
// migrations that rebuild, alter and backfill their tables (13: offered_at, 14: auth_tokens keyed anew,
// 15: clear event bodies, 17: webhook endpoints rebuilt and their replaced secrets moved, 18, 19, 21, 24:
// agent events' owner),
// and the server started on it honours them: old session tokens, API keys, purchases, feature tokens and
// webhook endpoints (a delivery pending before the upgrade arrives, signed by the current and the
// replaced secret).
import { Database } from "bun:sqlite";
import { afterAll, describe, expect, test } from "bun:test";
import { rmSync } from "node:fs";
import { join } from "node:path";
import { migrate } from "../src/db/migrate.ts";
import { MIGRATIONS } from "../src/db/migrations.ts";
import { createJwtKeys, signSessionJwt } from "../src/auth/tokens.ts";
import { encryptAesGcm } from "../src/lib/aes-gcm.ts";
import { sha256Hex } from "../src/lib/hash.ts";
import { formatWebhookSecret } from "../src/webhooks/signing.ts";
import { verifyingReceiver, type Receiver } from "./helpers/receiver.ts";
import { runCli, startTestServer, tempDir, type TestServer } from "./helpers/server.ts";
import { call, newWallet } from "./helpers/wallet.ts";
import { until } from "./helpers/until.ts";

const servers: TestServer[] = [];
const receivers: Receiver[] = [];
afterAll(async () => {
  for (const r of receivers) await r.stop();
  for (const s of servers) await s.dispose();
});

const JWT_SECRET = "upgrade-test-jwt-secret-of-more-than-32-bytes!";
const KEY = new Uint8Array(32).fill(7);
const KEY_HEX = Buffer.from(KEY).toString("hex");
const utf8 = (text: string) => new TextEncoder().encode(text);
const random = (n: number) => crypto.getRandomValues(new Uint8Array(n));
const seal = (plain: Uint8Array, aad: string) => encryptAesGcm(KEY, plain, utf8(aad));
const HOUR = 3_600_000;
const DAY = 24 * HOUR;


/** A DATA_DIR whose database an older walletgate migrated to `version` and then wrote `rows` into. */
function oldDatabase(version: number, rows: (db: Database) => void): { dataDir: string; path: string } {
  const dataDir = tempDir("walletgate-upgrade-");
  const path = join(dataDir, "walletgate.db");
  const db = new Database(path, { create: true, strict: true });
  db.run("PRAGMA journal_mode = WAL");
  db.run("PRAGMA foreign_keys = ON");
  migrate(db, Date.now() - 30 * DAY, MIGRATIONS.filter((m) => m.version <= version));
  db.transaction(() => rows(db))();
  db.close();
  return { dataDir, path };
}

describe("upgrade from version 12", () => {
  test("every row survives migrations 13 to 24, and the server serves them", async () => {
    const now = Date.now();
    const owner = newWallet().address;
    const agentOwner = newWallet().address;
    const buyer = newWallet().address;
    const other = newWallet().address;
    const hook = verifyingReceiver();
    receivers.push(hook);

    // Session tokens as sign-in recorded them (no kid or issuer yet), one revoked; a fingerprint link.
    const live = { jti: crypto.randomUUID(), sessionId: crypto.randomUUID(), iat: Math.floor(now / 1000) - 60 };
    const revoked = { jti: crypto.randomUUID(), sessionId: crypto.randomUUID(), iat: Math.floor(now / 1000) - 120 };
    const linked = { jti: crypto.randomUUID(), sessionId: crypto.randomUUID(), iat: Math.floor(now / 1000) - 30 };
    const exp = (iat: number) => iat + 7 * 24 * 3600;
    const tokenRows = [
      [live.jti, live.sessionId, owner, live.iat * 1000, exp(live.iat) * 1000, live.iat * 1000, null, null],
      [revoked.jti, revoked.sessionId, owner, revoked.iat * 1000, exp(revoked.iat) * 1000, revoked.iat * 1000, null, now - 1000],
      [linked.jti, linked.sessionId, other, linked.iat * 1000, exp(linked.iat) * 1000, linked.iat * 1000, "fp-hmac-of-other", null],
    ];

    const mcpSession = crypto.randomUUID();
    const apiKey = `pk_${Buffer.from(random(32)).toString("hex")}`;
    const revokedKey = `pk_${Buffer.from(random(32)).toString("hex")}`;
    const featureToken = "ft_" + "3".repeat(43);
    const featureHash = sha256Hex(featureToken);
    const sealedToken = seal(utf8(featureToken), featureHash);
    const [currentSecret, previousSecret] = [random(32), random(32)];
    hook.setSecret(formatWebhookSecret(currentSecret));
    const sealedCurrent = seal(currentSecret, "whe_live");
    const sealedPrevious = seal(previousSecret, "whe_live");
    const sealedOff = seal(random(32), "whe_off");
    const walletKey = seal(random(64), owner);
    const txAccess = "5".repeat(87);
    const txFeature = "4".repeat(87);
    const eventBody = JSON.stringify({ id: "evt_old", type: "product.created", productId: "prd_access", network: "localnet" });

    const { dataDir, path } = oldDatabase(12, (db) => {
      for (const r of tokenRows) {
        db.query(
          "INSERT INTO auth_tokens (jti, session_id, wallet, issued_at, expires_at, session_started_at, fingerprint, revoked_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        ).run(...(r as [string, string, string, number, number, number, string | null, number | null]));
      }
      db.query("INSERT INTO fingerprint_wallet_links (fingerprint, wallet, session_id, jti, updated_at) VALUES (?, ?, ?, ?, ?)").run(
        "fp-hmac-of-other",
        other,
        linked.sessionId,
        linked.jti,
        now - 30_000,
      );
      // An MCP session bound to the live token, swept from memory (its record keyed by the id's SHA-256).
      db.query(
        `INSERT INTO mcp_sessions (id, created_at, last_activity_at, protocol_version, fingerprint, wallet, session_id, jti, bound_by, ended_at)
         VALUES (?, ?, ?, '2025-06-18', NULL, ?, ?, ?, 'binding', NULL)`,
      ).run(sha256Hex(mcpSession), now - HOUR, now - 60_000, owner, live.sessionId, live.jti);
      db.query("INSERT INTO custodial_wallets (address, secret_iv, secret_ciphertext, created_at, label) VALUES (?, ?, ?, ?, ?)").run(
        owner,
        walletKey.iv,
        walletKey.ciphertext,
        now - DAY,
        "treasury",
      );
      db.query("INSERT INTO owners (wallet, tier, created_at) VALUES (?, 'pro', ?)").run(owner, now - 10 * DAY);
      const apiKeyRow = db.query("INSERT INTO api_keys (id, owner, key_hash, prefix, label, created_at, last_used_at, revoked_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)");
      apiKeyRow.run("key_live", owner, sha256Hex(apiKey), apiKey.slice(0, 11), "production", now - 9 * DAY, now - DAY, null);
      apiKeyRow.run("key_gone", owner, sha256Hex(revokedKey), revokedKey.slice(0, 11), "old", now - 9 * DAY, null, now - 2 * DAY);
      const product = db.query(
        `INSERT INTO products (id, owner, title, description, type, price, token, feature_ids, pay_to, access_days, redirect_origins, status, created_at, updated_at)
         VALUES (?, ?, ?, '', ?, 5000000, 'usdc', ?, ?, ?, '[]', 'active', ?, ?)`,
      );
      product.run("prd_access", owner, "Monthly pass", "access", "[]", owner, 30, now - 8 * DAY, now - 8 * DAY);
      product.run("prd_feature", owner, "Pro features", "feature_unlock", '["pro","export"]', owner, null, now - 8 * DAY, now - 8 * DAY);
      const checkout = db.query(
        `INSERT INTO checkouts (id, product_id, owner, wallet, reference, pay_to, amount, token, created_at, expires_at, status, purchase_id)
         VALUES (?, ?, ?, ?, ?, ?, 5000000, 'usdc', ?, ?, 'completed', ?)`,
      );
      checkout.run("chk_access", "prd_access", owner, buyer, newWallet().address, owner, now - 2 * DAY, now - 2 * DAY + 900_000, "pur_access");
      checkout.run("chk_feature", "prd_feature", owner, buyer, newWallet().address, owner, now - 2 * DAY, now - 2 * DAY + 900_000, "pur_feature");
      const purchase = db.query(
        `INSERT INTO purchases (id, owner, product_id, checkout_id, wallet, tx_hash, amount, token, network, purchased_at, expires_at)
         VALUES (?, ?, ?, ?, ?, ?, 5000000, 'usdc', 'localnet', ?, ?)`,
      );
      purchase.run("pur_access", owner, "prd_access", "chk_access", buyer, txAccess, now - 2 * DAY, now + 28 * DAY);
      purchase.run("pur_feature", owner, "prd_feature", "chk_feature", buyer, txFeature, now - 2 * DAY, null);
      db.query(
        `INSERT INTO feature_tokens (token_hash, token_iv, token_ciphertext, owner, product_id, purchase_id, wallet, features, created_at, expires_at, revoked_at)
         VALUES (?, ?, ?, ?, 'prd_feature', 'pur_feature', ?, '["pro","export"]', ?, NULL, NULL)`,
      ).run(featureHash, sealedToken.iv, sealedToken.ciphertext, owner, buyer, now - 2 * DAY);

      // A rotated endpoint (its replaced secret signing for another 20 hours), a disabled one, and an event
      // written in clear (before migration 15) whose delivery is still pending.
      db.query(
        `INSERT INTO webhook_endpoints (id, owner, url, events, enabled, secret_iv, secret_ciphertext, previous_secret_iv, previous_secret_ciphertext, previous_secret_until, created_at, updated_at)
         VALUES ('whe_live', ?, ?, '["product.created","payment.completed"]', 1, ?, ?, ?, ?, ?, ?, ?)`,
      ).run(owner, hook.url, sealedCurrent.iv, sealedCurrent.ciphertext, sealedPrevious.iv, sealedPrevious.ciphertext, now + 20 * HOUR, now - 5 * DAY, now - 4 * HOUR);
      db.query(
        `INSERT INTO webhook_endpoints (id, owner, url, events, enabled, secret_iv, secret_ciphertext, previous_secret_iv, previous_secret_ciphertext, previous_secret_until, created_at, updated_at)
         VALUES ('whe_off', ?, 'https://hooks.example.com/x', '["feature.unlocked"]', 0, ?, ?, NULL, NULL, NULL, ?, ?)`,
      ).run(owner, sealedOff.iv, sealedOff.ciphertext, now - 3 * DAY, now - 3 * DAY);
      db.query("INSERT INTO outbox_events (id, target_kind, target_id, type, payload, created_at) VALUES ('evt_old', 'owner', ?, 'product.created', ?, ?)").run(
        owner,
        eventBody,
        now - 60_000,
      );
      db.query(
        `INSERT INTO webhook_deliveries (id, event_id, endpoint_kind, endpoint_id, status, attempts, next_attempt_at, last_status_code, created_at, updated_at)
         VALUES ('whd_old', 'evt_old', 'owner_endpoint', 'whe_live', 'pending', 1, ?, 500, ?, ?)`,
      ).run(now - 1000, now - 60_000, now - 30_000);
      // An agent and the notifications written for it, and one for an agent gone since (migration 24 counts
      // each against the wallet that owns its agent, and the second against nobody).
      db.query(
        `INSERT INTO market_agents (id, owner_wallet, endpoint, name, tagline, description, categories, base_price, status, secret_iv, secret_ciphertext, created_at, updated_at)
         VALUES ('agt_1', ?, 'https://agent.example.com/', 'Logos', '', '', '["design"]', 1000000, 'active', ?, ?, ?, ?)`,
      ).run(agentOwner, ...Object.values(seal(random(32), "agt_1")), now - 2 * DAY, now - 2 * DAY);
      for (const [id, agent] of [["evt_agent", "agt_1"], ["evt_orphan", "agt_gone"]] as const) {
        db.query("INSERT INTO outbox_events (id, target_kind, target_id, type, payload, created_at) VALUES (?, 'agent', ?, 'message.received', '{}', ?)").run(id, agent, now - 50_000);
      }

      // A proposed order a connected consumer was handed an offer for (before migration 13 kept its time).
      db.query(
        `INSERT INTO market_orders (id, conversation_id, agent_id, consumer_wallet, provider_wallet, service_id, description, price, amount, token,
           delivery_time_min, status, due_at, deadline, offer_hash, created_at, updated_at)
         VALUES ('ord_offered', 'cnv_1', 'agt_1', ?, ?, NULL, 'a logo', '12.5', 12500000, 'usdc', 60, 'proposed', ?, NULL, ?, ?, ?)`,
      ).run(buyer, owner, now + 20 * HOUR, `${"ab".repeat(32)}:usdc:12500000:${newWallet().address}`, now - 4 * HOUR, now - 3 * HOUR);
    });

    const before = new Database(path, { readonly: true });
    const snapshot = (db: Database) => ({
      tokens: db.query("SELECT jti, session_id, wallet, issued_at, expires_at, session_started_at, fingerprint, revoked_at FROM auth_tokens ORDER BY rowid").values(),
      links: db.query("SELECT * FROM fingerprint_wallet_links").all(),
      keys: db.query("SELECT * FROM api_keys ORDER BY id").all(),
      purchases: db.query("SELECT * FROM purchases ORDER BY id").all(),
      featureTokens: db.query("SELECT token_hash, token_iv, token_ciphertext, owner, product_id, purchase_id, wallet, features, created_at, expires_at, revoked_at FROM feature_tokens").all(),
      endpoints: db.query("SELECT id, owner, url, events, enabled, secret_iv, secret_ciphertext, created_at, updated_at FROM webhook_endpoints ORDER BY id").all(),
    });
    const old = snapshot(before);
    before.close();

    const server = await startTestServer(
      { JWT_SECRET, WALLET_ENCRYPTION_KEY: KEY_HEX, ALLOW_PRIVATE_NETWORK_TARGETS: "true" },
      dataDir,
    );
    servers.push(server);
    // The server said which migrations it was applying before it applied them (they can take long).
    const migrating = server.output().split("\n").filter((l) => l.includes('"msg":"migrating database"'));
    expect(migrating.length).toBe(1);
    expect(JSON.parse(migrating[0]!).applying).toEqual(MIGRATIONS.filter((m) => m.version > 12).map((m) => m.version));
    const keys = await createJwtKeys(server.url, utf8(JWT_SECRET), null);
    const jwtOf = (t: { jti: string; sessionId: string; iat: number }, wallet: string) =>
      signSessionJwt(keys, { walletAddress: wallet, sessionId: t.sessionId, jti: t.jti, iat: t.iat, exp: exp(t.iat) });

    // Session tokens issued before the upgrade: the live one authenticates, the revoked one stays revoked.
    const session = await call(server.url, "/auth/session", { token: jwtOf(live, owner) });
    expect(session).toMatchObject({ status: 200, body: { walletAddress: owner, sessionId: live.sessionId } });
    expect((await call(server.url, "/auth/session", { token: jwtOf(revoked, owner) })).body).toMatchObject({ code: "TOKEN_REVOKED" });
    expect((await call(server.url, "/auth/session", { token: jwtOf(linked, other) })).status).toBe(200);

    // The MCP session comes back bound to the wallet its live token signed in.
    const rpc = await fetch(`${server.url}/mcp`, {
      method: "POST",
      headers: { "content-type": "application/json", accept: "application/json, text/event-stream", "mcp-session-id": mcpSession, "mcp-protocol-version": "2025-06-18" },
      body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/call", params: { name: "session_info", arguments: {} } }),
    });
    expect(rpc.status).toBe(200);
    const rpcText = await rpc.text();
    const rpcBody = JSON.parse(rpcText.startsWith("{") ? rpcText : rpcText.split("\n").find((l) => l.startsWith("data: "))!.slice(6));
    expect(rpcBody.result.structuredContent).toMatchObject({ success: true, data: { authenticated: true, walletAddress: owner, sessionId: live.sessionId } });

    // The API key checks access; the revoked one does not. The access pass and the feature purchase grant access.
    const publicCall = (p: string, body?: unknown, key = apiKey) => call(server.url, `/public${p}`, { body, headers: { "x-api-key": key } });
    expect(await publicCall("/access/check", { productId: "prd_access", walletAddress: buyer })).toMatchObject({
      status: 200,
      body: { hasAccess: true, txHash: txAccess, expiresAt: new Date(now + 28 * DAY).toISOString() },
    });
    expect(await publicCall("/access/check", { productId: "prd_feature", walletAddress: buyer })).toMatchObject({ status: 200, body: { hasAccess: true, txHash: txFeature } });
    expect(await publicCall("/access/check", { productId: "prd_access", walletAddress: other })).toMatchObject({ status: 200, body: { hasAccess: false } });
    expect(await publicCall("/feature/verify", { accessToken: featureToken })).toMatchObject({ status: 200, body: { valid: true, features: ["pro", "export"] } });
    expect((await publicCall("/products", undefined, revokedKey)).body).toMatchObject({ code: "INVALID_API_KEY" });

    // The owner's dashboard (with the old token) lists what was there.
    const dash = (p: string, init: { method?: string; body?: unknown } = {}) => call(server.url, `/dashboard/api${p}`, { ...init, token: jwtOf(live, owner) });
    const endpoints = await dash("/webhooks");
    expect(endpoints.status).toBe(200);
    expect(JSON.stringify(endpoints.body)).toContain("whe_live");
    expect(JSON.stringify(endpoints.body)).toContain("whe_off");
    expect((await dash("/webhooks/whe_live/secret")).body).toEqual({ secret: formatWebhookSecret(currentSecret) });
    expect((await dash("/keys")).body.keys.map((k: { keyId: string }) => k.keyId).sort()).toEqual(["key_gone", "key_live"]);

    // The delivery pending before the upgrade arrives with its body as written, signed by the current
    // secret and, for its remaining hours, the replaced one.
    const first = await until(() => hook.received.find((d) => d.id === "evt_old"), 8_000);
    expect(first).toMatchObject({ verified: true, body: JSON.parse(eventBody) });
    const byPrevious = verifyingReceiver();
    receivers.push(byPrevious);
    byPrevious.setSecret(formatWebhookSecret(previousSecret));
    expect((await dash("/webhooks/whe_live", { method: "PATCH", body: { url: byPrevious.url } })).status).toBe(200);
    expect((await dash("/deliveries/whd_old/resend", { method: "POST" })).status).toBe(200);
    expect(await until(() => byPrevious.received.find((d) => d.id === "evt_old"), 8_000)).toMatchObject({ verified: true });

    expect(await server.stop()).toBe(0);
    const after = new Database(path, { readonly: true });
    const now2 = snapshot(after);
    expect(now2.tokens).toEqual(old.tokens);
    expect(now2.links).toEqual(old.links);
    expect(now2.purchases).toEqual(old.purchases);
    expect(now2.featureTokens).toEqual(old.featureTokens);
    expect(now2.keys.map((k) => ({ ...(k as object), last_used_at: null }))).toEqual(old.keys.map((k) => ({ ...(k as object), last_used_at: null })));
    expect((now2.endpoints as { id: string }[]).find((e) => e.id === "whe_off")).toEqual((old.endpoints as { id: string }[]).find((e) => e.id === "whe_off"));
    expect(after.query("SELECT kid, issuer FROM auth_tokens").all()).toEqual(tokenRows.map(() => ({ kid: null, issuer: null })));
    // Migration 36: what an older token's purchase bought is not known; its expiry stays as it was.
    expect(after.query("SELECT access_ms FROM feature_tokens").all()).toEqual(old.featureTokens.map(() => ({ access_ms: null })));
    expect(after.query("SELECT endpoint_id, secret_iv, secret_ciphertext, signs_until FROM webhook_previous_secrets").all()).toEqual([
      { endpoint_id: "whe_live", secret_iv: sealedPrevious.iv, secret_ciphertext: sealedPrevious.ciphertext, signs_until: now + 20 * HOUR },
    ]);
    expect(after.query("SELECT offered_at, updated_at, offer_wire FROM market_orders").all()).toEqual([{ offered_at: now - 3 * HOUR, updated_at: now - 3 * HOUR, offer_wire: null }]);
    expect(after.query("SELECT substr(payload, 1, 10) AS head FROM outbox_events WHERE id = 'evt_old'").get()).toEqual({ head: "sealed:v1:" });
    expect(after.query("SELECT id, agent_owner FROM outbox_events ORDER BY id").all()).toEqual([
      { id: "evt_agent", agent_owner: agentOwner },
      { id: "evt_old", agent_owner: null },
      { id: "evt_orphan", agent_owner: null },
    ]);
    // Migrations 23 and 24 add their indexes; the checkout rows are as they were.
    expect(after.query("SELECT name FROM sqlite_master WHERE name IN ('checkouts_expired', 'webhook_deliveries_pending') ORDER BY name").all()).toEqual([
      { name: "checkouts_expired" },
      { name: "webhook_deliveries_pending" },
    ]);
    expect(after.query("SELECT label FROM custodial_wallets").all()).toEqual([{ label: "treasury" }]);
    expect(after.query("SELECT MAX(version) AS v FROM schema_migrations").get()).toEqual({ v: MIGRATIONS.length });
    expect(after.query("PRAGMA foreign_key_check").all()).toEqual([]);
    expect(after.query("PRAGMA integrity_check").get()).toEqual({ integrity_check: "ok" });
    after.close();
  }, 60_000);
});

describe("upgrade from before migration 20 (the wallet encryption key's check)", () => {
  // The first start after migration 20 records the check of the key it runs with, once that key opens what
  // is already sealed: a wrong key recorded then would refuse the right one ever after.
  const sealedOnlyIn = {
    "a webhook endpoint's secret": (db: Database) =>
      db
        .query(
          `INSERT INTO webhook_endpoints (id, owner, url, events, enabled, secret_iv, secret_ciphertext, created_at, updated_at)
           VALUES ('whe_1', ?, 'https://hooks.example.com/x', '["product.created"]', 1, ?, ?, 1, 1)`,
        )
        .run(newWallet().address, ...Object.values(seal(random(32), "whe_1"))),
    "a marketplace agent's secret": (db: Database) =>
      db
        .query(
          `INSERT INTO market_agents (id, owner_wallet, endpoint, name, tagline, description, categories, base_price, status, secret_iv, secret_ciphertext, created_at, updated_at)
           VALUES ('agt_1', ?, 'https://agent.example.com/', 'Logos', '', '', '["design"]', 1000000, 'active', ?, ?, 1, 1)`,
        )
        .run(newWallet().address, ...Object.values(seal(random(32), "agt_1"))),
  };
  for (const [what, rows] of Object.entries(sealedOnlyIn)) {
    test(`a database whose only sealed data is ${what} is not opened under another key, and its own key is recorded`, async () => {
      const { dataDir } = oldDatabase(19, rows);
      try {
        const env = { DATA_DIR: dataDir, JWT_SECRET };
        expect((await runCli(["migrate"], env)).code).toBe(0); // the key is not needed to migrate
        const wrong = await runCli(["owners", "list"], { ...env, WALLET_ENCRYPTION_KEY: "ab".repeat(32) });
        expect([wrong.code, wrong.stderr.includes("encrypted under another wallet encryption key than WALLET_ENCRYPTION_KEY")]).toEqual([1, true]);
        expect((await runCli(["owners", "list"], { ...env, WALLET_ENCRYPTION_KEY: KEY_HEX })).code).toBe(0);
        expect((await runCli(["owners", "list"], { ...env, WALLET_ENCRYPTION_KEY: "ab".repeat(32) })).code).toBe(1);
      } finally {
        rmSync(dataDir, { recursive: true, force: true });
      }
    }, 60_000);
  }
});

describe("a long migration", () => {
  test("is announced on stdout before it runs, and the log it wrote is cut back once it is done", async () => {
    const now = Date.now();
    const { dataDir, path } = oldDatabase(28, (db) => {
      db.query("INSERT INTO outbox_events (id, target_kind, target_id, type, payload, created_at) VALUES ('evt_1', 'owner', ?, 'product.created', '{}', ?)").run(
        newWallet().address,
        now - DAY,
      );
      db.query(
        `INSERT INTO webhook_deliveries (id, event_id, endpoint_kind, endpoint_id, status, attempts, next_attempt_at, last_status_code, created_at, updated_at)
         VALUES ('whd_1', 'evt_1', 'owner_endpoint', 'whe_gone', 'failed', 120000, NULL, 500, ?, ?)`,
      ).run(now - DAY, now - DAY);
      // Migration 29 rebuilds this table: ~0.5 s per 80,000 attempts.
      const attempt = db.query("INSERT INTO webhook_attempts (delivery_id, attempt, at, status_code, duration_ms, response) VALUES ('whd_1', ?, ?, 500, 3, ?)");
      const answer = "x".repeat(300);
      for (let i = 1; i <= 120_000; i++) attempt.run(i, now - DAY, answer);
    });
    const proc = Bun.spawn([process.execPath, join(import.meta.dir, "..", "src/main.ts"), "serve"], {
      env: { PATH: process.env.PATH ?? "", HOME: process.env.HOME ?? "/tmp", PORT: "0", HOST: "127.0.0.1", DATA_DIR: dataDir, LOG_FORMAT: "json", LOG_LEVEL: "info" },
      stdout: "pipe",
      stderr: "pipe",
    });
    try {
      const chunks: string[] = [];
      const decoder = new TextDecoder();
      for await (const chunk of proc.stdout as ReadableStream<Uint8Array>) {
        chunks.push(decoder.decode(chunk));
        if (chunks.join("").includes('"msg":"listening"')) break;
      }
      // The first thing written out names the migration, and is out before the work ends.
      expect(chunks[0]).toContain('"msg":"migrating database"');
      expect(chunks[0]).not.toContain('"msg":"database migrated"');
      expect(chunks.join("")).toContain('"msg":"database migrated"');
      // The copy of the table went through the log; it is not kept at that size while the server runs.
      const wal = Bun.file(`${path}-wal`);
      expect((await wal.exists()) ? wal.size : 0).toBeLessThan(1024 * 1024);
    } finally {
      proc.kill();
      await proc.exited;
      rmSync(dataDir, { recursive: true, force: true });
    }
  }, 60_000);
});
