// The running server: socket, request ids and access log, body limit, purge timer, graceful shutdown.
import type { Server } from "bun";
import { statSync } from "node:fs";
import { ConfigError, inDataDir, defaultBaseUrl, listensEverywhere, resolveSecrets, walletKeySource, type Config, type Secrets } from "./config.ts";
import { openDatabase, type Db } from "./db/open.ts";
import { holdServeLock, restoringMessage } from "./db/file-lock.ts";
import { migrate, pendingVersions, settleMigrations } from "./db/migrate.ts";
import { watchSchema } from "./db/schema-watch.ts";
import { createFromImage } from "./db/fresh.ts";
import { holdsSealedData, requireSealingKey } from "./db/sealed.ts";
import { createDeps, type Deps } from "./deps.ts";
import { requireGenesisDecimals, requireNetwork } from "./ledger/create.ts";
import { AppError, errorResponse, errorText, fieldError, internalError } from "./errors.ts";
import { DAY_MS, systemClock, type Clock } from "./lib/clock.ts";
import { STEP_CHECK_MS, systemClockSources, watchClockSteps, type ClockSources } from "./lib/clock-steps.ts";
import { readClockMark, saveClockMark } from "./db/clock-mark.ts";
import { cryptoRandom, type Random } from "./lib/ids.ts";
import { resolveClientIp, trustsPeer } from "./lib/ip.ts";
import { pathOf } from "./lib/path.ts";
import { startRepeating } from "./lib/repeat.ts";
import { createMcpEndpoint, sweepPeriodMs } from "./mcp/endpoint.ts";
import { jsonRpcError } from "./mcp/json-rpc.ts";
import { createDeliveryWorker, moveRetriesWithClock } from "./webhooks/outbox.ts";
import { importQuietly } from "./lib/quiet-import.ts";

/** How often open checkouts are looked for on the ledger. */
const CHECKOUT_WATCH_MS = 5_000;
/** How often orders whose state ends by itself (expiry, deadline, auto-release) are looked for. */
const ORDER_TIMERS_MS = 30_000;
/** The first look after start-up. */
const ORDER_TIMERS_FIRST_MS = 1_000;
import { workerVerifier } from "./lib/verifier.ts";
import { createLogger, type Logger } from "./log.ts";
import { createServiceMetrics, type RouteOf } from "./metrics/metrics.ts";
import { purgeAuth } from "./auth/purge.ts";
import { recordSigner } from "./auth/sessions.ts";
import { purgeMcpSessions } from "./mcp/purge.ts";
import { purgeWebhooks } from "./webhooks/purge.ts";
import { purgeTransferKeys } from "./wallets/purge.ts";
import { RATE_LIMIT_SWEEP_MS } from "./auth/rate-limit.ts";
import type { RequestMeta } from "./app.ts";
import { settlesWithin } from "./lib/sleep.ts";
import { isEventStream, withOpeningComment } from "./lib/event-stream.ts";
// The pages (dashboard.md): bundled by Bun with their scripts and styles, and embedded by `bun build --compile`.
import dashboardPage from "./dashboard/web/dashboard.html";
import payPage from "./dashboard/web/pay.html";
import { createPageCache, isAssetRequest, pageOf } from "./dashboard/pages.ts";

export type RunningServer = {
  url: string;
  port: number;
  deps: Deps;
  /** Stops accepting, lets in-flight requests finish (up to `graceMs`), stops timers, closes the database. */
  stop(graceMs?: number): Promise<void>;
};

export type StartOptions = {
  clock?: Clock;
  random?: Random;
  log?: Logger;
  /** The clocks a step of `clock` is told by; the system's with the system clock, none (no steps) with a clock given without them. */
  clockSources?: ClockSources;
};

const SHUTDOWN_GRACE_MS = 10_000;
/** How long the stop waits for its last log lines to be taken by standard output's reader. */
const LOG_FLUSH_AT_EXIT_MS = 2_000;

/** The peer address of a request's socket; "0.0.0.0" when the socket has none (closed). */
function socketAddress(server: Server<unknown>, request: Request): string {
  return server.requestIP(request)?.address ?? "0.0.0.0";
}

/**
 * A request's id and client. The address is taken from the socket as the request arrives (a socket the
 * client has since closed has none), except where it is asked for rarely or never (ADDRESS_ON_DEMAND):
 * there it would be a system call (`getpeername`) per request for nothing.
 */
class ClientOfRequest implements RequestMeta {
  #peer: string | null = null;
  #ip: string | null = null;
  constructor(
    readonly requestId: string,
    private readonly request: Request,
    private readonly socketIp: string | null,
    private readonly server: Server<unknown>,
    private readonly trustProxy: Config["trustProxy"],
    /** BASE_URL is https: every request came through a proxy (this server speaks plain HTTP). */
    private readonly proxied: boolean,
  ) {}
  /** The socket's peer, looked up once (on demand it is a system call). */
  private get peer(): string {
    this.#peer ??= this.socketIp ?? socketAddress(this.server, this.request);
    return this.#peer;
  }
  get ip(): string {
    this.#ip ??= resolveClientIp(this.peer, this.request.headers.get("x-forwarded-for"), this.trustProxy);
    return this.#ip;
  }
  get userAgent(): string {
    return this.request.headers.get("user-agent") ?? "";
  }
  /** Through a proxy (X-Forwarded-For sent, or an https BASE_URL) that TRUST_PROXY does not name: `ip` is the proxy's. */
  get behindUntrustedProxy(): boolean {
    if (!this.proxied && !this.request.headers.has("x-forwarded-for")) return false;
    return !trustsPeer(this.peer, this.trustProxy);
  }
}

/**
 * Paths whose routes ask for the client's address on demand: never on /public/* (API-key routes: limits
 * are per owner); on /mcp only while answering a session's initialization (its rate limit and
 * fingerprint) or a plain-envelope call (the sign-in and logout tools), never for a tool call inside a
 * session. It is read while the client waits for the answer; a client that has hung up by then counts as
 * 0.0.0.0.
 */
const addressOnDemand = (path: string) => path.startsWith("/public/") || path === "/mcp";

/** Reads a body without Content-Length up to `max` bytes; null when it is larger. */
async function readCapped(request: Request, max: number): Promise<Uint8Array | null> {
  const reader = request.body!.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.byteLength;
    if (size > max) {
      await reader.cancel();
      return null;
    }
    chunks.push(value);
  }
  return Buffer.concat(chunks);
}

/** The migration that made the network's record (network_in_use), which the network check before the secrets reads. */
const NETWORK_RECORD_MIGRATION = 35;

/** What running behind a proxy TRUST_PROXY does not name costs, and what to set (the start's and the first such request's warnings). */
const UNTRUSTED_PROXY_COST =
  "every client has the proxy's address, so all share one set of sign-in rate limits, and MCP fingerprint restore is off for them; set TRUST_PROXY to the proxy's address (e.g. TRUST_PROXY=127.0.0.1/32)";

/** A Content-Length that is one plain decimal number, else null. */
function declaredLength(header: string | null): number | null {
  return header !== null && /^\d{1,15}$/.test(header) ? Number(header) : null;
}

type Handler = (request: Request, server: Server<unknown>) => Response | Promise<Response>;

/**
 * How long a request without a body that may wait on the ledger may go without a byte, while it is answered:
 * Bun's most. Bun resets a connection silent for HTTP_IDLE_TIMEOUT_S even while the answer to such a request
 * is being made (one with a body it lets finish), and an RPC node may take longer than that to answer a lookup.
 */
const LEDGER_WAIT_TIMEOUT_S = 255;

/** The requests without a body whose answer waits on the ledger: a txHash verified. */
const waitsOnLedgerWithoutBody = (path: string) => path.startsWith("/public/verify/");

/** Why HOST and PORT could not be listened on, naming both (operations.md: a message naming the variable). */
function listenFailure(config: Config, err: unknown): string {
  const where = `cannot listen on HOST=${config.host} PORT=${config.port}`;
  switch ((err as { code?: unknown } | null)?.code) {
    case "EADDRINUSE":
      return `${where}: the port is in use (set PORT to a free port, or 0 for any)`;
    case "EADDRNOTAVAIL":
      return `${where}: HOST is not an address of this machine`;
    case "EACCES":
      return `${where}: permission denied (ports below 1024 need privileges)`;
    case "EINVAL":
    case "ENOTFOUND":
      return `${where}: HOST does not resolve to an address of this machine`;
    default:
      return `${where}: ${errorText(err)}`;
  }
}

/**
 * The socket. Opened before anything is written to DATA_DIR: a HOST or PORT that cannot be used stops
 * start-up with a ConfigError naming them, with no secrets generated and no database created.
 */
function listen(config: Config, fetch: Handler): Server<unknown> {
  try {
    return Bun.serve({
      port: config.port,
      hostname: config.host,
      reusePort: false,
      development: false,
      idleTimeout: config.httpIdleTimeoutS,
      // The limit, with the catalogue's 413 body, a request id and a log line, is enforced in `handle`,
      // which answers a declared length over MAX_BODY_BYTES without reading the body and stops reading an
      // undeclared one at the limit. Bun's own cap must therefore never be the one that answers: above it,
      // Bun replies with a bare 413 of its own (no body, no request id, no log line).
      maxRequestBodySize: Number.MAX_SAFE_INTEGER,
      // No `routes`: every request, the pages and their bundled assets too, is answered by `handle`, with a
      // request id, an access-log line and metrics (the bundles are served from loopback: dashboard/pages.ts).
      fetch,
    });
  } catch (err) {
    throw new ConfigError(listenFailure(config, err));
  }
}

export async function startServer(config: Config, options: StartOptions = {}): Promise<RunningServer> {
  const log = options.log ?? createLogger(config.logLevel, config.logFormat);
  const clock = options.clock ?? systemClock;
  // Requests that arrive before `handle` can answer (the database being opened, the app being loaded) wait for it.
  let ready: Handler | null = null;
  const handlerReady = Promise.withResolvers<Handler>();
  const server = listen(config, (request, server) => (ready !== null ? ready(request, server) : handlerReady.promise.then((h) => h(request, server))));
  try {
    return await serve(config, options, log, clock, server, (handle) => {
      ready = handle;
      handlerReady.resolve(handle);
    });
  } catch (err) {
    await server.stop(true); // the port is free again for whoever fixes what stopped start-up
    throw err;
  }
}

async function serve(
  config: Config,
  options: StartOptions,
  log: Logger,
  clock: Clock,
  server: Server<unknown>,
  onReady: (handle: Handler) => void,
): Promise<RunningServer> {
  // Before anything of the database is read: one server per database, and none while a restore replaces it.
  const lock = inDataDir(config, () =>
    holdServeLock(config.databasePath, {
      alreadyServed: () =>
        new ConfigError(
          `another walletgate serve is already using ${config.databasePath} (one server per database: its rate limits and timers live in its memory): stop it, or give this one another DATA_DIR`,
        ),
      restoring: () => new ConfigError(restoringMessage(config.databasePath)),
    }),
  );
  let opened: { db: Db; created: boolean };
  try {
    opened = inDataDir(config, () => {
      const created = createFromImage(config.databasePath); // a first start of the executable: written whole
      return { db: openDatabase(config.databasePath, { synchronous: config.sqliteSynchronous }), created };
    });
  } catch (err) {
    lock.release();
    throw err;
  }
  const { db, created } = opened;
  let secrets: Secrets;
  let migrated: ReturnType<typeof migrate>;
  try {
    // Its first read: a damaged file, or one of a newer version, names DATA_DIR and stops the start here.
    const pending = inDataDir(config, () => pendingVersions(db.sqlite));
    // The network before the secrets (checked only; recorded below), on a schema that has its record
    // (migration 35; an upgrade's later ones may be pending): a start without the server's settings on a
    // mainnet DATA_DIR lacks its NETWORK as well as its keys.
    if (pending.every((version) => version > NETWORK_RECORD_MIGRATION)) inDataDir(config, () => requireNetwork(config, db, false));
    // Only then are missing secrets generated: a start that cannot use the database leaves no key files
    // behind (which a backup restored next, without its own, would then be refused under).
    secrets = inDataDir(config, () => resolveSecrets(config, { holdsSealedData: () => holdsSealedData(config.databasePath) }));
    if (pending.length > 0) {
      // Said, and written out, before the work: on a big database it takes seconds.
      log.info("migrating database", { applying: pending });
      await log.flush();
    }
    migrated = inDataDir(config, () => {
      const migrated = migrate(db.sqlite, clock.now());
      if (migrated.applied.length > 0) {
        settleMigrations(db); // on disk before anything is served
        log.info("database migrated", { version: migrated.version, applied: migrated.applied });
      } else if (created) {
        log.info("database created", { version: migrated.version });
      }
      requireSealingKey(db, secrets.walletEncryptionKey, walletKeySource(config));
      requireGenesisDecimals(config, db);
      requireNetwork(config, db, true);
      return migrated;
    });
  } catch (err) {
    db.close();
    lock.release();
    throw err;
  }

  const metrics = createServiceMetrics();
  const meta = new WeakMap<Request, RequestMeta>();
  // Set before `handle` is handed to the socket (onReady): requests that arrive sooner wait in startServer.
  let appFetch: (request: Request) => Response | Promise<Response>;
  let appRouteOf: RouteOf;
  /** The metrics' route of a request: a page, a page's asset, or one of the app's routes (else none). */
  const routeOf: RouteOf = (method, path) => {
    const page = pageOf(method, path);
    if (page !== null) return page === "dashboard" ? "/dashboard" : "/pay/:productId";
    return isAssetRequest(method, path) ? "asset" : appRouteOf(method, path);
  };
  /** The 413 answered before any route runs; an owner's answers are never cached, errors included (as routes/dashboard do). */
  const tooLarge = (path: string, headers: Headers) => {
    const message = `request body is larger than ${config.maxBodyBytes} bytes`;
    // In an MCP session, as /mcp answers any body it cannot take there: a JSON-RPC error (mcp/http.ts).
    if (path === "/mcp" && headers.has("mcp-session-id")) return jsonRpcError(413, -32600, `Invalid Request: ${message}`);
    const response = errorResponse(new AppError("PAYLOAD_TOO_LARGE", message));
    if (path.startsWith("/dashboard/api/")) response.headers.set("cache-control", "no-store");
    return response;
  };

  const pages = createPageCache({ dashboard: dashboardPage, pay: payPage });
  // The first request with X-Forwarded-For tells whether TRUST_PROXY names its proxy (a hop count believes
  // every peer): said then, once a process, and not looked at again (the peer's address may be a system call).
  let forwardedSeen = config.trustProxy.kind === "hops";
  // This server speaks plain HTTP: an https BASE_URL means a proxy in front, whose address every client has
  // unless TRUST_PROXY names it.
  const proxied = config.baseUrl?.startsWith("https:") === true;
  const handle = async (incoming: Request, server: Server<unknown>): Promise<Response> => {
    const started = performance.now();
    const requestId = crypto.randomUUID();
    if (!forwardedSeen && incoming.headers.has("x-forwarded-for")) {
      forwardedSeen = true;
      if (!trustsPeer(socketAddress(server, incoming), config.trustProxy)) {
        const why = config.trustProxy.kind === "none" ? "while TRUST_PROXY is not set" : "from an address TRUST_PROXY does not name";
        log.warn(`a request came with X-Forwarded-For, which is ignored ${why}: behind a proxy, ${UNTRUSTED_PROXY_COST}`, { requestId });
      }
    }
    // A url that is only a path (no usable Host) gets an origin, so the app routes it as any other; the
    // socket's own calls (its address, its timeout) keep the request Bun gave.
    let request = incoming.url.startsWith("/") ? new Request(`http://localhost${incoming.url}`, incoming) : incoming;
    const path = pathOf(incoming.url); // never the query: the access log shows it too
    const waitsOnLedger = waitsOnLedgerWithoutBody(path);
    if (waitsOnLedger) server.timeout(incoming, LEDGER_WAIT_TIMEOUT_S);
    // No request reads a database state older than its arrival (another process's commits included).
    db.endReads();
    const socketIp = addressOnDemand(path) ? null : socketAddress(server, incoming);
    let response: Response;
    try {
      // Trusted only as one plain number. Bun also takes the header sent twice with one value ("N, N"),
      // which is no number here: such a body is counted as it is read, like one without a length.
      const length = declaredLength(incoming.headers.get("content-length"));
      const page = pageOf(incoming.method, path);
      const asset = page === null && isAssetRequest(incoming.method, path) ? await pages.asset(path, incoming) : null;
      if (page !== null) {
        response = await pages.respond(page, incoming.method);
      } else if (asset !== null) {
        response = asset;
      } else if (length !== null && length > config.maxBodyBytes) {
        response = tooLarge(path, incoming.headers);
      } else if (length === null && request.body !== null) {
        // A body cut off by its client (the connection closed mid-way) is the client's failure, not ours.
        const body = await readCapped(request, config.maxBodyBytes).catch(() => undefined);
        if (body === undefined) response = errorResponse(fieldError("body", "the body could not be read to its end: the connection was closed"));
        else if (body === null) response = tooLarge(path, incoming.headers);
        else request = new Request(request, { body });
      }
      response ??= await (() => {
        meta.set(request, new ClientOfRequest(requestId, incoming, socketIp, server, config.trustProxy, proxied));
        return appFetch(request);
      })();
    } catch (err) {
      log.error("request failed", { requestId, error: errorText(err) });
      response = errorResponse(internalError());
    }
    // Answered: the connection is held to the usual idle timeout again (Bun keeps a request's for its connection).
    if (waitsOnLedger) server.timeout(incoming, config.httpIdleTimeoutS);
    // An event stream (GET /mcp) lasts as long as its client stays: no idle timeout while it is open (the
    // usual one once it ends), and a comment at once that a proxy passes its headers on with (lib/event-stream.ts).
    if (isEventStream(response)) {
      server.timeout(incoming, 0);
      const restore = () => {
        try {
          server.timeout(incoming, config.httpIdleTimeoutS);
        } catch {
          // the connection is gone
        }
      };
      response = new Response(withOpeningComment(response.body!, restore), response);
    }
    response.headers.set("x-request-id", requestId);
    const ms = Math.round((performance.now() - started) * 100) / 100;
    log.request({ requestId, method: incoming.method, path, status: response.status, ms });
    metrics.request(incoming.method, path, response.status, ms, routeOf);
    return response;
  };

  const port = server.port ?? config.port;
  const baseUrl = config.baseUrl ?? defaultBaseUrl(config.host, port);
  // Committed with the first batch of writes, not waited for: lost in a crash, the next start records it.
  recordSigner(db, secrets.jwtSecret, baseUrl).catch((err) => log.warn("could not record the JWT key id and issuer", { error: errorText(err) }));
  // Resolved from this file, the bundle's entry directory: src/ in a checkout, the root of the
  // executable's embedded files when compiled (where the build puts the worker as a second entrypoint).
  const workerUrl = new URL("./lib/ed25519-worker.ts", import.meta.url).href;
  const verifier = workerVerifier(workerUrl, (err) =>
    log.error("verification worker failed; verifying on the main thread", { error: errorText(err) }),
  );
  const deps = await createDeps({ config, secrets, baseUrl, db, clock, random: options.random ?? cryptoRandom, log, verifier, metrics });
  const mcp = createMcpEndpoint(deps);
  metrics.registry.gauge("walletgate_mcp_sessions_live", "MCP sessions held in memory now.", () => mcp.liveSessions());
  const { createApp } = await import("./app.ts");
  const app = createApp(deps, { metaOf: (r) => meta.get(r)!, mcp });
  appFetch = app.handle;
  appRouteOf = app.routeOf;
  onReady(handle);

  const onTimerError = (what: string) => (err: unknown) =>
    log.error(`${what} failed`, { error: errorText(err), ...(db.noteFailure(err) ? { database: "damaged: writes stopped, /readyz fails" } : {}) });
  // A step of the wall clock (lib/clock-steps.ts): one back moves the internal retry times with it, so that
  // none waits longer for it. One forward moves none: it may be the clock catching up with time that did
  // pass (a VM its host paused), and a retry brought forward does no harm. The purge stays as far behind
  // the clock as it was stepped forward, so that a wrong clock deletes nothing live.
  const sources = options.clockSources ?? (options.clock === undefined ? systemClockSources : null);
  // Held back for the longest a session row can live and a day after the last step forward: by then no row
  // that was live before the step can still be (rows written since are dated on the stepped clock).
  const longestRowMs = Math.max(config.sessionTtlS, config.sessionMaxAgeS) * 1000 + DAY_MS;
  // The mark the last start or step left: a step made while the server was stopped is told at the first look.
  const steps = sources === null ? null : watchClockSteps(sources, onTimerError("following a clock step"), longestRowMs, readClockMark(db));
  steps?.onStep(async (stepMs, now, mark) => {
    let moved = { webhookRetries: 0, payoutHolds: 0 };
    if (stepMs < 0) {
      const orders = await importQuietly(() => import("./marketplace/orders/orders.ts"));
      moved = { webhookRetries: await moveRetriesWithClock(deps, stepMs, now), payoutHolds: await orders.movePayoutHoldsWithClock(deps, stepMs, now) };
    }
    log.warn("the wall clock was stepped", { stepMs: Math.round(stepMs), ...moved, purgeBehindMs: Math.round(steps.aheadMs()) });
    // As of this step, after its moves: a crash between them moves them again, never not at all, and a later
    // step seen while these moved is left to its own listener.
    await saveClockMark(db, mark);
  });
  if (steps !== null) {
    // The first look, before the purge's: a step while stopped is told (and marked); else a mark missing or of
    // another boot is written. A restart on the same boot with no step writes nothing.
    const stale = steps.markStale();
    steps
      .check()
      .then((stepMs) => (stale && stepMs === 0 ? saveClockMark(db, steps.mark()) : undefined))
      .catch(onTimerError("clock step check"));
    metrics.registry.gauge("walletgate_purge_behind_seconds", "How far the purge stays behind the wall clock after it was stepped forward (0 normally).", () => steps.aheadMs() / 1000);
  }
  const stepWatch = steps === null ? null : startRepeating(() => steps.check(), STEP_CHECK_MS, onTimerError("clock step check"));
  const purgeDeps: Deps = steps === null ? deps : { ...deps, clock: { now: () => clock.now() - steps.aheadMs() } };
  const purge = startRepeating(
    async (stopping) => {
      await steps?.check(); // a step not yet seen is seen before anything is deleted
      log.debug("purge", {
        ...(await purgeAuth(purgeDeps, stopping)),
        ...(await purgeMcpSessions(purgeDeps, { stopping })),
        ...(await purgeWebhooks(purgeDeps, stopping)),
        ...(await purgeTransferKeys(purgeDeps, stopping)),
        // Imported here: the checkout store is not loaded at start-up (its routes are built on first use).
        ...(await (await import("./paygate/purge.ts")).purgeCheckouts(purgeDeps, stopping)),
      });
    },
    config.purgeIntervalMs,
    onTimerError("purge"),
    true, // at start-up too: a server restarted more often than the interval still purges
  );
  // Webhook deliveries from the durable outbox (paygate.md), through the guarded client.
  const webhooks = createDeliveryWorker(deps, { allowPrivate: config.allowPrivateNetworkTargets, agents: (await import("./marketplace/notify.ts")).agentTargets(deps) });
  webhooks.start();
  // Open checkouts are confirmed (or expired) in the background too, not only when the buyer asks.
  let checkouts: { runOnce(stopping: AbortSignal): Promise<number> } | null = null; // loaded on the first tick with an open checkout: it needs web3.js
  const checkoutWatch = startRepeating(
    async (stopping) => {
      // No checkout open (a server that sells nothing, most of the time): checkout.ts and web3.js stay unloaded.
      if (checkouts === null && !(await (await import("./paygate/watching.ts")).checkoutsToWatch(deps))) return 0;
      checkouts ??= (await importQuietly(() => import("./paygate/checkout.ts"))).createCheckoutWatcher(deps);
      return checkouts.runOnce(stopping);
    },
    CHECKOUT_WATCH_MS,
    onTimerError("checkout watcher"),
  );
  // marketplace.md: proposals expire after 24 h, missed deadlines are refunded, deliveries auto-release
  // after 72 h. The due times are stored, so this only has to look; loaded on the first tick with work (web3.js).
  // The first round a second after start-up, not a period: a server restarted more often than every 30 s
  // (a crash loop, a deploy script) would otherwise never run them.
  const orderTimers = startRepeating(
    async (stopping) => {
      // Nothing due and nothing in flight (most rounds): the timers' module, and web3.js with it, stays unloaded.
      if (!(await (await import("./marketplace/orders/due.ts")).orderTimersHaveWork(deps))) return 0;
      return (await importQuietly(() => import("./marketplace/orders/orders.ts"))).runOrderTimers(deps, undefined, stopping);
    },
    ORDER_TIMERS_MS,
    onTimerError("order timers"),
    ORDER_TIMERS_FIRST_MS,
  );
  // mcp.md: idle MCP sessions leave memory after MCP_SESSION_TIMEOUT_MS, checked every min(60 s, timeout).
  const mcpSweep = startRepeating(() => mcp.sweep(), sweepPeriodMs(config.mcpSessionTimeoutMs), onTimerError("mcp session sweep"));
  const sweep = startRepeating(
    async () => deps.auth.rateLimiter.purge(clock.now()) + deps.paygate.rateLimiter.purge(clock.now()),
    Math.min(RATE_LIMIT_SWEEP_MS, config.purgeIntervalMs),
    onTimerError("rate-limit sweep"),
  );

  const schemaWatch = watchSchema(db, migrated.version, log, onTimerError("schema watch"));

  const url = `http://${config.host.includes(":") ? `[${config.host}]` : config.host}:${port}`;
  log.info("listening", { url, baseUrl, network: config.network, dataDir: config.dataDir });
  if (config.allowPrivateNetworkTargets) {
    // Said at every start: it turns off the outbound guard, cloud metadata addresses included.
    log.warn("ALLOW_PRIVATE_NETWORK_TARGETS=true: webhooks and agent endpoints may reach private, loopback and link-local addresses", {
      network: config.network,
    });
  }
  if (listensEverywhere(config.host) && !config.baseUrlGiven) {
    // Reachable from other machines, but what it signs and links names loopback: their sign-ins, browser
    // pages and MCP hosts would be refused ("another BASE_URL", "Invalid Origin header").
    log.warn(`HOST=${config.host} without BASE_URL: challenges, tokens, links and the Origin /mcp and the pages accept name ${baseUrl}, which other machines cannot use; set BASE_URL to the address clients reach this server at`, {
      baseUrl,
    });
  }
  if (proxied && config.trustProxy.kind === "none") {
    log.warn(`BASE_URL is https, so a proxy ends TLS in front of this server, but TRUST_PROXY is not set: ${UNTRUSTED_PROXY_COST}`, { baseUrl });
  }
  const dataDirMode = modeOf(config.dataDir);
  if ((dataDirMode & 0o022) !== 0) {
    // Said, not refused: its files are the owner's alone, but whoever may write the folder may replace them
    // (a secret file before the next start, say). Made by hand with 0777, or a shared mount.
    log.warn("DATA_DIR can be written by other users of this machine: they could replace its files (secrets included); chmod 700 it", {
      dataDir: config.dataDir,
      mode: dataDirMode.toString(8),
    });
  }

  let stopping: Promise<void> | null = null;
  return {
    url,
    port,
    deps,
    stop(graceMs = SHUTDOWN_GRACE_MS) {
      stopping ??= (async () => {
        const graceful = server.stop(false);
        // An MCP client's event stream (GET /mcp) stays open until it leaves: it would hold the grace to
        // its end. Those streams end now; tool calls in flight still finish within the grace.
        mcp.endStreams();
        const timeout = new Promise<"timeout">((r) => setTimeout(() => r("timeout"), graceMs).unref());
        if ((await Promise.race([graceful.then(() => "done" as const), timeout])) === "timeout") {
          log.warn("shutdown: in-flight requests cut off after grace period", { graceMs });
          await server.stop(true);
        }
        // The ledger stops with the timers, not after them: it cuts off their RPC calls in flight, which
        // against a node that does not answer would each hold the shutdown for their timeout (15 s).
        // What a cut-off tick left unsettled is settled by the next start, as after a crash.
        await Promise.all([
          purge.stop(),
          stepWatch?.stop(),
          sweep.stop(),
          mcpSweep.stop(),
          checkoutWatch.stop(),
          orderTimers.stop(),
          schemaWatch.stop(),
          webhooks.stop(),
          deps.ledger.stop(),
        ]);
        await mcp.stop();
        await Promise.all([verifier.stop(), pages.stop()]);
        db.close();
        lock.release();
        log.info("stopped");
        // A log nobody reads (a pipe never drained) would hold the exit for ever: its last lines wait a while.
        await settlesWithin(log.flush(), LOG_FLUSH_AT_EXIT_MS);
      })();
      return stopping;
    },
  };
}

/** A folder's permission bits; 0 when it cannot be read (nothing to warn about). */
function modeOf(path: string): number {
  try {
    return statSync(path).mode & 0o777;
  } catch {
    return 0;
  }
}
