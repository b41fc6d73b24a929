// The guarded outbound client: refused targets, the pinned connection (http and https), no redirects, timeout, body cap.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { GuardedFetchError, guardedFetch, utf8Prefix, type GuardedFetchReason, type ResolvedAddress } from "./guarded-fetch.ts";
import { ipv6Loopback } from "../../test/helpers/ipv6.ts";

async function reasonOf(promise: Promise<unknown>): Promise<GuardedFetchReason | "resolved"> {
  try {
    await promise;
    return "resolved";
  } catch (err) {
    if (!(err instanceof GuardedFetchError)) throw err;
    return err.reason;
  }
}

/** A lookup that answers from a table and counts its calls (to prove there is no second lookup). */
function fakeLookup(table: Record<string, string[]>) {
  const calls: string[] = [];
  const lookup = async (hostname: string): Promise<ResolvedAddress[]> => {
    calls.push(hostname);
    const addresses = table[hostname];
    if (addresses === undefined) throw Object.assign(new Error("ENOTFOUND"), { code: "ENOTFOUND" });
    return addresses.map((address) => ({ address, family: address.includes(":") ? 6 : 4 }));
  };
  return { lookup, calls };
}

const hits: { path: string; host: string | null; method: string; body: string }[] = [];
let server: ReturnType<typeof Bun.serve>;
let base: string;
let endlessSent = 0;

beforeAll(() => {
  server = Bun.serve({
    port: 0,
    hostname: "127.0.0.1",
    async fetch(req) {
      const url = new URL(req.url);
      hits.push({ path: url.pathname + url.search, host: req.headers.get("host"), method: req.method, body: await req.text() });
      switch (url.pathname) {
        case "/redirect":
          return new Response(null, { status: 302, headers: { location: `${base}/target` } });
        case "/slow":
          await Bun.sleep(2000);
          return new Response("late");
        case "/big":
          return new Response("x".repeat(100_000));
        case "/multibyte":
          return new Response("é".repeat(600)); // 1200 bytes, each character 2
        case "/endless": {
          // A body that never ends (a hostile receiver): what was sent is counted.
          const chunk = new Uint8Array(64 * 1024).fill(120);
          return new Response(
            new ReadableStream({
              pull(controller) {
                endlessSent += chunk.length;
                controller.enqueue(chunk);
              },
            }),
          );
        }
        default:
          return new Response(`ok ${req.method}`, { status: 201 });
      }
    },
  });
  base = `http://127.0.0.1:${server.port}`;
});

afterAll(() => server.stop(true));

describe("refused targets", () => {
  const refused = [
    "http://127.0.0.1/",
    "http://127.1.2.3:8080/x",
    "http://[::1]/",
    "http://10.1.2.3/",
    "http://172.16.0.1/",
    "http://192.168.1.1/",
    "http://169.254.169.254/latest/meta-data/",
    "http://100.64.0.1/",
    "http://100.100.100.200/", // Alibaba metadata, in CGNAT space
    "http://0.0.0.0/",
    "http://224.0.0.1/",
    "http://255.255.255.255/",
    "http://192.0.0.192/", // Oracle metadata, reserved
    "http://168.63.129.16/", // Azure's platform address (WireServer), public unicast
    "http://[fd00::1]/",
    "http://[fd00:ec2::254]/", // AWS IPv6 metadata
    "http://[fe80::1]/",
    "http://[::]/",
    "http://[ff02::1]/",
    "http://[::ffff:127.0.0.1]/",
    "http://[::ffff:169.254.169.254]/",
    "http://[64:ff9b::7f00:1]/", // NAT64 of 127.0.0.1
    "http://[2002:7f00:1::]/", // 6to4 of 127.0.0.1
    "http://[::127.0.0.1]/", // IPv4-compatible (deprecated), parsed as [::7f00:1]
    "http://[0:0:0:0:0:0:169.254.169.254]/",
    "http://2130706433/", // 127.0.0.1 spelled as one number
    "http://0x7f.1/",
  ];
  for (const url of refused) {
    test(`${url} is refused as private_address`, async () => {
      expect(await reasonOf(guardedFetch(url, {}, { allowPrivate: false }))).toBe("private_address");
    });
  }

  test("a hostname resolving to loopback (localhost, real DNS) is refused", async () => {
    expect(await reasonOf(guardedFetch(`http://localhost:${server.port}/`, {}, { allowPrivate: false }))).toBe("private_address");
    expect(hits.length).toBe(0);
  });

  test("a name with any private address among its answers is refused, even if a public one comes first", async () => {
    const { lookup } = fakeLookup({ "mixed.example.test": ["93.184.216.34", "10.0.0.5"] });
    expect(await reasonOf(guardedFetch("https://mixed.example.test/", {}, { allowPrivate: false, lookup }))).toBe("private_address");
  });

  test("non-http schemes, credentials and garbage are bad_url", async () => {
    for (const url of ["ftp://example.com/file", "file:///etc/passwd", "gopher://example.com/", "not a url", "http://user:pw@example.com/", "https://token@example.com/"]) {
      expect({ url, reason: await reasonOf(guardedFetch(url, {}, { allowPrivate: true })) }).toEqual({ url, reason: "bad_url" });
    }
  });

  test("a name that does not resolve is dns without the address check; with it, the same refusal as a private name", async () => {
    const { lookup } = fakeLookup({ "inside.example.test": ["10.0.0.5"], "empty.example.test": [] });
    expect(await reasonOf(guardedFetch("https://nowhere.example.test/", {}, { allowPrivate: true, lookup }))).toBe("dns");
    // An owner must not learn from the refusal which names the server's own network resolves.
    const refusal = async (url: string) => {
      const err = await guardedFetch(url, {}, { allowPrivate: false, lookup }).then(() => null, (e: GuardedFetchError) => e);
      return { reason: err?.reason, message: err?.message.replace(/^[a-z.]+ /, "HOST ") };
    };
    const unknown = await refusal("https://nowhere.example.test/");
    expect(unknown).toEqual({ reason: "private_address", message: "HOST does not resolve, or resolves to a non-public address" });
    expect(await refusal("https://inside.example.test/")).toEqual(unknown);
    expect(await refusal("https://empty.example.test/")).toEqual(unknown);
  });

  test("the error message does not carry the URL's path or query", async () => {
    const failureOf = (call: Promise<unknown>) =>
      call.then(
        () => null,
        (err: unknown) => err as GuardedFetchError,
      );
    const refused = await failureOf(guardedFetch("http://10.0.0.1/hook?token=sekrit", {}, { allowPrivate: false }));
    expect(refused).toBeInstanceOf(Error); // it must fail: no answer makes this pass
    expect(refused!.message).not.toContain("sekrit");
    const unreachable = await failureOf(guardedFetch("http://127.0.0.1:1/hook?token=sekrit", {}, { allowPrivate: true }));
    expect(unreachable).toBeInstanceOf(Error);
    expect(unreachable!.reason).toBe("network");
    expect(unreachable!.message).not.toContain("sekrit");
  });
});

describe("allowed requests", () => {
  test("with allowPrivate a local receiver answers; method, body and status come back", async () => {
    const res = await guardedFetch(`${base}/hook?a=1`, { method: "POST", headers: { "content-type": "application/json" }, body: '{"x":1}' }, { allowPrivate: true });
    expect(res.status).toBe(201);
    expect(res.body).toBe("ok POST");
    expect(res.durationMs).toBeGreaterThanOrEqual(0);
    expect(hits.at(-1)).toEqual({ path: "/hook?a=1", host: `127.0.0.1:${server.port}`, method: "POST", body: '{"x":1}' });
  });

  test.if(ipv6Loopback)("an IPv6 literal is connected to as it is, never looked up as a name", async () => {
    const v6 = Bun.serve({ hostname: "::1", port: 0, fetch: (req) => new Response(`v6 ${req.method}`) });
    try {
      const { lookup, calls } = fakeLookup({});
      const res = await guardedFetch(`http://[::1]:${v6.port}/`, { method: "POST", body: "{}" }, { allowPrivate: true, lookup });
      expect([res.status, res.body, calls]).toEqual([200, "v6 POST", []]);
    } finally {
      v6.stop(true);
    }
  });

  test("a name is resolved once and the connection goes to that address, with the name as Host", async () => {
    const { lookup, calls } = fakeLookup({ "hooks.example.test": ["127.0.0.1"] });
    const res = await guardedFetch(`http://hooks.example.test:${server.port}/named`, { method: "POST", body: "{}" }, { allowPrivate: true, lookup });
    expect(res.status).toBe(201);
    expect(calls).toEqual(["hooks.example.test"]);
    expect(hits.at(-1)!.host).toBe(`hooks.example.test:${server.port}`);
  });

  test("redirects are not followed", async () => {
    const before = hits.length;
    const res = await guardedFetch(`${base}/redirect`, {}, { allowPrivate: true });
    expect(res.status).toBe(302);
    expect(hits.slice(before).map((h) => h.path)).toEqual(["/redirect"]);
  });

  test("a status that came before the body stopped (cut short, or still dribbling at the timeout) is the answer", async () => {
    const { createServer } = await import("node:net");
    const raw = createServer((socket) =>
      socket.once("data", (request) => {
        const path = request.toString().split(" ")[1];
        if (path === "/cut") socket.end("HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nshort"); // 95 bytes never come
        else socket.write("HTTP/1.1 202 Accepted\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nstill\r\n"); // and no end
      }),
    );
    await new Promise<void>((resolve) => raw.listen(0, "127.0.0.1", resolve));
    try {
      const at = `http://127.0.0.1:${(raw.address() as { port: number }).port}`;
      const cut = await guardedFetch(`${at}/cut`, {}, { allowPrivate: true });
      expect([cut.status, ["", "short"].includes(cut.body)]).toEqual([200, true]); // the runtime may hold back a body it finds short
      expect(await guardedFetch(`${at}/open`, {}, { allowPrivate: true, timeoutMs: 300 })).toMatchObject({ status: 202, body: "still" });
      // Stopped by its caller (shutdown) while the body comes: aborted, no answer to record.
      const stop = new AbortController();
      const stopped = guardedFetch(`${at}/open`, { signal: stop.signal }, { allowPrivate: true });
      setTimeout(() => stop.abort(), 150);
      expect(await reasonOf(stopped)).toBe("aborted");
    } finally {
      raw.close();
    }
  });

  test("times out", async () => {
    const started = performance.now();
    expect(await reasonOf(guardedFetch(`${base}/slow`, {}, { allowPrivate: true, timeoutMs: 150 }))).toBe("timeout");
    expect(performance.now() - started).toBeLessThan(1500);
  });

  test("a slow DNS answer counts against the timeout too", async () => {
    const lookup = () => new Promise<ResolvedAddress[]>(() => undefined);
    expect(await reasonOf(guardedFetch("https://stuck.example.test/", {}, { allowPrivate: false, timeoutMs: 100, lookup }))).toBe("timeout");
  });

  test("the caller's signal aborts as reason aborted", async () => {
    const controller = new AbortController();
    const pending = guardedFetch(`${base}/slow`, { signal: controller.signal }, { allowPrivate: true });
    setTimeout(() => controller.abort(), 50);
    expect(await reasonOf(pending)).toBe("aborted");
  });

  test("the body is capped: 1 KiB by default, or the given cap, never cutting a character", async () => {
    expect((await guardedFetch(`${base}/big`, {}, { allowPrivate: true })).body.length).toBe(1024);
    expect((await guardedFetch(`${base}/big`, {}, { allowPrivate: true, maxResponseBytes: 10 })).body).toBe("x".repeat(10));
    const multibyte = (await guardedFetch(`${base}/multibyte`, {}, { allowPrivate: true, maxResponseBytes: 1023 })).body;
    expect(multibyte).toBe("é".repeat(511));
    expect(utf8Prefix(new TextEncoder().encode("aé"), 2)).toBe("a");
  });

  test("a body that never ends is read only up to the cap: the answer comes at once, not at the timeout", async () => {
    endlessSent = 0;
    const started = performance.now();
    const answer = await guardedFetch(`${base}/endless`, {}, { allowPrivate: true, timeoutMs: 5000 });
    expect([answer.status, answer.body.length]).toEqual([200, 1024]);
    expect(performance.now() - started).toBeLessThan(4000); // well before the timeout: the reading stopped
    await Bun.sleep(100);
    expect(endlessSent).toBeLessThan(8 * 1024 * 1024); // what the server got out before the connection closed: not the stream
  });
});

// A self-signed certificate for hooks.example.test, made with the openssl CLI when it is installed.
const haveOpenssl = Bun.which("openssl") !== null;
describe.skipIf(!haveOpenssl)("https to the checked address", () => {
  let dir: string;
  let cert: string;
  let tlsServer: ReturnType<typeof Bun.serve>;

  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), "walletgate-tls-"));
    const made = Bun.spawnSync([
      "openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
      "-keyout", join(dir, "key.pem"), "-out", join(dir, "cert.pem"), "-days", "2",
      "-subj", "/CN=hooks.example.test", "-addext", "subjectAltName=DNS:hooks.example.test",
    ]);
    if (made.exitCode !== 0) throw new Error("openssl could not make a test certificate");
    cert = readFileSync(join(dir, "cert.pem"), "utf8");
    tlsServer = Bun.serve({
      port: 0,
      hostname: "127.0.0.1",
      tls: { cert, key: readFileSync(join(dir, "key.pem"), "utf8") },
      fetch: (req) => new Response(`tls ${req.headers.get("host")}`),
    });
  });

  afterAll(() => {
    tlsServer.stop(true);
    rmSync(dir, { recursive: true, force: true });
  });

  test("connects to the resolved IP with SNI and certificate checked for the URL's name", async () => {
    const { lookup, calls } = fakeLookup({ "hooks.example.test": ["127.0.0.1"] });
    const res = await guardedFetch(`https://hooks.example.test:${tlsServer.port}/`, {}, { allowPrivate: true, lookup, ca: cert });
    expect(res).toMatchObject({ status: 200, body: `tls hooks.example.test:${tlsServer.port}` });
    expect(calls).toEqual(["hooks.example.test"]);
  });

  test("a certificate for another name is refused (the IP is not what is verified)", async () => {
    const { lookup } = fakeLookup({ "evil.example.test": ["127.0.0.1"] });
    expect(await reasonOf(guardedFetch(`https://evil.example.test:${tlsServer.port}/`, {}, { allowPrivate: true, lookup, ca: cert }))).toBe("network");
  });

  test("an untrusted certificate is refused", async () => {
    const { lookup } = fakeLookup({ "hooks.example.test": ["127.0.0.1"] });
    expect(await reasonOf(guardedFetch(`https://hooks.example.test:${tlsServer.port}/`, {}, { allowPrivate: true, lookup }))).toBe("network");
  });
});
