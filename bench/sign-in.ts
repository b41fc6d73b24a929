// Row "POST /auth/verify successful sign-ins per second (challenge pre-issued)" against native Ed25519
// verifies per second on one core, measured in the same run.
import { Database } from "bun:sqlite";
import { generateKeyPairSync, sign } from "node:crypto";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { base58 } from "@scure/base";
import { autocannonLoad, cleanEnv, round, startLoadServer, stopProcess, type LoadGenerator, type Resources } from "./support.ts";

export type SignInOptions = {
  /** walletgate's argv up to and including `serve` (absolute paths: it runs in a temp dir). */
  serverCommand: string[];
  /** Load duration in seconds. */
  seconds: number;
  /** The row's load (48, as the bench has always measured it). */
  connections: number;
  /** Also measured, after it and for information: enough connections to keep the server busy (its capacity). */
  capacityConnections: number;
  /** "wrk", or "autocannon" (used when wrk is not installed). */
  loadGenerator: LoadGenerator;
  baselineSeconds: number;
};

export type LoadResult = {
  successes: number;
  non2xx: number;
  socketErrors: number;
  seconds: number;
  latencyP50Ms: number;
  latencyP99Ms: number;
  bodiesLoaded: number;
  bodiesSent: number;
  /** Requests sent after a thread had used all its bodies (each a 401): the bench had too few bodies. */
  exhaustedRequests: number;
};

export type SignInResult = {
  loadGenerator: string;
  /** The row's load (`load`, `signInsPerSecond`, `ratio`). */
  connections: number;
  /** Mean of the baseline measured just before and just after the two loads (the machine's speed drifts). */
  nativeVerifiesPerSecond: number;
  nativeVerifiesPerSecondBeforeAfter: [number, number];
  signInsPerSecond: number;
  ratio: number;
  messageBytes: number;
  warmupSignIns: number;
  /** Token rows in the database afterwards: warm-up + counted sign-ins of both loads + those still in flight at their ends. */
  tokensInDatabase: number;
  load: LoadResult;
  /** The capacity load, run second on the same server with bodies of its own. */
  capacity: { connections: number; signInsPerSecond: number; ratio: number; load: LoadResult };
};

const SPKI_PREFIX_BYTES = 12; // DER SPKI header before the raw 32-byte Ed25519 key
const WARMUP_SIGN_INS = 2_000;
const ISSUE_CONCURRENCY = 64;
/** Bodies per expected sign-in: the server cannot verify faster than the baseline does on one core. */
const BODY_MARGIN = 1.3;

async function nativeBaseline(resources: Resources, seconds: number): Promise<{ verifiesPerSecond: number }> {
  const child = resources.track(
    Bun.spawn([process.execPath, join(import.meta.dir, "native-verify.ts"), String(seconds), "300"], {
      stdout: "pipe",
      stderr: "inherit",
    }),
  );
  const [code, out] = await Promise.all([child.exited, new Response(child.stdout).text()]);
  if (code !== 0) throw new Error(`native-verify baseline exited ${code}`);
  return JSON.parse(out) as { verifiesPerSecond: number };
}

type SignedBody = string;

/** Asks for `count` challenges, each for a fresh keypair, and signs them: JSON bodies for /auth/verify. */
export async function issueSignedBodies(url: string, count: number): Promise<{ bodies: SignedBody[]; messageBytes: number }> {
  const bodies: SignedBody[] = [];
  let messageBytes = 0;
  let next = 0;
  const worker = async () => {
    while (next < count) {
      next++;
      const { publicKey, privateKey } = generateKeyPairSync("ed25519");
      const walletAddress = base58.encode(publicKey.export({ format: "der", type: "spki" }).subarray(SPKI_PREFIX_BYTES));
      const response = await fetch(`${url}/auth/challenge?wallet=${walletAddress}`);
      if (response.status !== 200) throw new Error(`GET /auth/challenge answered ${response.status}: ${await response.text()}`);
      const challenge = (await response.json()) as { nonce: string; message: string };
      const message = Buffer.from(challenge.message, "utf8");
      messageBytes = message.length;
      const signature = sign(null, message, privateKey).toString("base64");
      bodies.push(JSON.stringify({ walletAddress, nonce: challenge.nonce, signature }));
    }
  };
  await Promise.all(Array.from({ length: ISSUE_CONCURRENCY }, worker));
  return { bodies, messageBytes };
}

/**
 * Posts each body to /auth/verify with fetch, 32 at a time, and requires a 200 for each: the warm-up here
 * (JIT, and a check that the bodies are right before the timed run), and the memory row's sign-ins.
 */
export async function postSignIns(url: string, bodies: SignedBody[]): Promise<void> {
  let next = 0;
  const worker = async () => {
    while (next < bodies.length) {
      const body = bodies[next++]!;
      const response = await fetch(`${url}/auth/verify`, { method: "POST", headers: { "content-type": "application/json" }, body });
      if (response.status !== 200) throw new Error(`POST /auth/verify answered ${response.status}: ${await response.text()}`);
      await response.arrayBuffer();
    }
  };
  await Promise.all(Array.from({ length: 32 }, worker));
}

type Load = { seconds: number; connections: number };

async function runWrk(resources: Resources, url: string, bodies: SignedBody[], options: Load, dir: string): Promise<LoadResult> {
  const threads = 2; // one per core of the machine the figures are for; the server has one JS thread
  for (let t = 0; t < threads; t++) {
    writeFileSync(join(dir, `bodies-${t + 1}.txt`), bodies.filter((_, i) => i % threads === t).join("\n") + "\n");
  }
  const child = resources.track(
    Bun.spawn(
      [
        "wrk",
        `-t${threads}`,
        `-c${options.connections}`,
        `-d${options.seconds}s`,
        "--timeout",
        "10s",
        "-s",
        join(import.meta.dir, "sign-in.lua"),
        `${url}/auth/verify`,
      ],
      { env: { ...cleanEnv({}), WG_BODIES_DIR: dir }, stdout: "pipe", stderr: "pipe" },
    ),
  );
  const [code, out, err] = await Promise.all([child.exited, new Response(child.stdout).text(), new Response(child.stderr).text()]);
  const line = out.split("\n").find((l) => l.startsWith("WRK_RESULT "));
  if (code !== 0 || line === undefined) throw new Error(`wrk failed (exit ${code}):\n${out}\n${err}`);
  const r = JSON.parse(line.slice("WRK_RESULT ".length)) as Record<string, number>;
  return {
    successes: r.requests! - r.non2xx!,
    non2xx: r.non2xx!,
    socketErrors: r.connectErrors! + r.readErrors! + r.writeErrors! + r.timeouts!,
    seconds: r.durationUs! / 1e6,
    latencyP50Ms: r.latencyP50Us! / 1000,
    latencyP99Ms: r.latencyP99Us! / 1000,
    bodiesLoaded: r.bodiesLoaded!,
    bodiesSent: r.bodiesSent!,
    exhaustedRequests: r.exhaustedRequests!,
  };
}

/** Fallback where wrk is not installed: autocannon in this process, one shared queue of bodies. */
async function runAutocannon(url: string, bodies: SignedBody[], options: Load): Promise<LoadResult> {
  let sent = 0;
  let exhausted = 0;
  const summary = await autocannonLoad({
    url: `${url}/auth/verify`,
    connections: options.connections,
    seconds: options.seconds,
    nextBody: () => {
      if (sent < bodies.length) return bodies[sent++]!;
      exhausted++;
      return bodies[bodies.length - 1]!;
    },
  });
  return {
    successes: summary.requests - summary.non2xx,
    non2xx: summary.non2xx,
    socketErrors: summary.socketErrors,
    seconds: summary.seconds,
    latencyP50Ms: summary.latencyP50Ms,
    latencyP99Ms: summary.latencyP99Ms,
    bodiesLoaded: bodies.length,
    bodiesSent: sent,
    exhaustedRequests: exhausted,
  };
}

export async function measureSignIn(resources: Resources, options: SignInOptions): Promise<SignInResult> {
  // Baseline on a quiet machine, before and after the load, so a drift in the machine's speed (a
  // shared VM's neighbours) shows up and is averaged rather than landing on one side of the ratio.
  const before = await nativeBaseline(resources, options.baselineSeconds);

  const dir = resources.tempDir("sign-in");
  const { server, url, dataDir } = await startLoadServer(resources, options.serverCommand, dir);
  try {
    const needed = Math.ceil(before.verifiesPerSecond * options.seconds * BODY_MARGIN); // per load
    const issue = async (count: number) => {
      const started = performance.now();
      const issued = await issueSignedBodies(url, count);
      process.stdout.write(`  ${issued.bodies.length} challenges issued and signed in ${((performance.now() - started) / 1000).toFixed(1)} s\n`);
      return issued;
    };
    const run = (timed: SignedBody[], connections: number) => {
      const load = { seconds: options.seconds, connections };
      return options.loadGenerator === "wrk" ? runWrk(resources, url, timed, load, dir) : runAutocannon(url, timed, load);
    };
    // The row's load first, on the same server and database as before the capacity load was added; the
    // capacity load's bodies are issued only after it.
    const { bodies, messageBytes } = await issue(WARMUP_SIGN_INS + needed);
    await postSignIns(url, bodies.slice(0, WARMUP_SIGN_INS));
    const load = await run(bodies.slice(WARMUP_SIGN_INS), options.connections);
    const capacity = await run((await issue(needed)).bodies, options.capacityConnections);
    await stopProcess(server, 15_000);
    const after = await nativeBaseline(resources, options.baselineSeconds);
    const nativeVerifiesPerSecond = (before.verifiesPerSecond + after.verifiesPerSecond) / 2;

    const db = new Database(join(dataDir, "walletgate.db"), { readonly: true });
    const { n } = db.query("SELECT COUNT(*) AS n FROM auth_tokens").get() as { n: number };
    db.close();

    const signInsPerSecond = load.successes / load.seconds;
    const capacityPerSecond = capacity.successes / capacity.seconds;
    const rounded = (l: LoadResult): LoadResult => ({ ...l, seconds: round(l.seconds, 3), latencyP50Ms: round(l.latencyP50Ms, 2), latencyP99Ms: round(l.latencyP99Ms, 2) });
    return {
      loadGenerator: options.loadGenerator,
      connections: options.connections,
      nativeVerifiesPerSecond: Math.round(nativeVerifiesPerSecond),
      nativeVerifiesPerSecondBeforeAfter: [Math.round(before.verifiesPerSecond), Math.round(after.verifiesPerSecond)],
      signInsPerSecond: Math.round(signInsPerSecond),
      ratio: signInsPerSecond / nativeVerifiesPerSecond, // unrounded: the verdict is on it
      messageBytes,
      warmupSignIns: WARMUP_SIGN_INS,
      tokensInDatabase: n,
      load: rounded(load),
      capacity: {
        connections: options.capacityConnections,
        signInsPerSecond: Math.round(capacityPerSecond),
        ratio: capacityPerSecond / nativeVerifiesPerSecond,
        load: rounded(capacity),
      },
    };
  } finally {
    await stopProcess(server, 15_000);
  }
}
