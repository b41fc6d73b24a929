// Sliding-window rate limits keyed by client address and wallet: sign-in's (auth.md "Rate limits") and every
// feature's own per-client and per-wallet limits (MCP sessions, checkouts, /pay checks, marketplace messages,
// owners' writes, webhook sends, wallets made, transfers), kept in one table so that every limit is in one
// place. The owners' per-tier limits of /public/* are paygate/rate-limit.ts.
import { AppError } from "../errors.ts";
import { networkKey } from "../lib/ip.ts";

export type Limit = { name: string; max: number; windowMs: number };

export const AUTH_LIMITS = {
  verifyPerClientWallet: { name: "verify-ip-wallet", max: 5, windowMs: 15 * 60_000 },
  verifyPerNetwork: { name: "verify-ip", max: 50, windowMs: 15 * 60_000 },
  challengePerClientWallet: { name: "challenge-ip-wallet", max: 10, windowMs: 60_000 },
  // Not in the spec's table: bounds the challenge rows one network can make by cycling wallets.
  challengePerNetwork: { name: "challenge-ip", max: 600, windowMs: 60_000 },
  // Not in the spec's table either: each MCP initialize holds a session in memory and a record.
  mcpSessionsPerNetwork: { name: "mcp-initialize-ip", max: 120, windowMs: 60_000 },
  // Nor this: each checkout opened is a row the watcher will look after for 15 minutes.
  checkoutsPerNetwork: { name: "checkout-ip", max: 60, windowMs: 60_000 },
  // Nor this: each /pay submit or confirm may read the chain (on RPC networks, the operator's RPC quota).
  paymentChecksPerNetwork: { name: "payment-check-ip", max: 300, windowMs: 60_000 },
  // Nor these: each marketplace message is a row kept for good and an event posted to the agent.
  messagesPerWallet: { name: "message-wallet", max: 60, windowMs: 60_000 },
  messagesPerNetwork: { name: "message-ip", max: 300, windowMs: 60_000 },
  // Nor these: each product change and each test or resent webhook is an outbox event and a delivery.
  ownerWritesPerOwner: { name: "owner-write", max: 120, windowMs: 60_000 },
  // Nor this: the same writes, and API keys, webhook endpoints and marketplace agents made or changed, by all
  // the owners of one client network. A wallet costs nothing to make, so the per-owner limit and caps (1,000
  // products, 20 agents) alone would let one client fill the disk by signing in new owners.
  ownerWritesPerNetwork: { name: "owner-write-ip", max: 300, windowMs: 60_000 },
  webhookSendsPerOwner: { name: "webhook-send-owner", max: 30, windowMs: 60_000 },
  // Nor this: custodial wallets made by wallet_create (a key kept for good). Their own count, not the
  // verification attempts' one: making wallets must not lock a network's real sign-ins out.
  walletsCreatedPerNetwork: { name: "wallet-create-ip", max: 50, windowMs: 15 * 60_000 },
  // Nor these: wallet_transfer and wallet_submit_transaction calls. On localnet each transfer is a ledger row
  // kept for good, paid with the faucet's free SOL (one wallet's 2 SOL pays 400,000 transfers' fees).
  transfersPerWallet: { name: "transfer-wallet", max: 120, windowMs: 60_000 },
  transfersPerNetwork: { name: "transfer-ip", max: 600, windowMs: 60_000 },
  // Nor these: wallet_get_history calls. On devnet and mainnet one call may cost the operator's RPC quota up
  // to 103 requests (the wallet's and its token accounts' signatures, then up to 100 transactions).
  historyPerWallet: { name: "history-wallet", max: 60, windowMs: 60_000 },
  historyPerNetwork: { name: "history-ip", max: 300, windowMs: 60_000 },
  // Nor these: consumer_search_agents calls. One page may be ~1 MB of agents (~0.1 s of the JS thread), and a
  // batch of ten is one request.
  searchesPerWallet: { name: "search-wallet", max: 60, windowMs: 60_000 },
  searchesPerNetwork: { name: "search-ip", max: 120, windowMs: 60_000 },
} as const satisfies Record<string, Limit>;

/**
 * How many keys the limiter holds at most per limit; past it the least recently hit key of that limit is
 * forgotten. Per limit, so that a flood of cheap keys (challenges, MCP sessions) cannot push out the
 * verification counters of a client that spent its attempts.
 */
export const MAX_RATE_LIMIT_KEYS = 100_000;

/** How often stale windows are swept (independent of the database purge). */
export const RATE_LIMIT_SWEEP_MS = 60_000;

export type RateLimiter = {
  /** Counts one hit against every (limit, key) pair, or none of them when any is full. */
  consume(hits: [Limit, string][], now: number): void;
  /** Drops windows with nothing left in them; returns how many. */
  purge(now: number): number;
  size(): number;
};

type Window = { windowMs: number; hits: number[] };

/**
 * An exact sliding log per key (at most `max` timestamps each), held in process memory: this server
 * is one process over one SQLite file. A key exists only once a hit was recorded for it, so refused
 * requests cost no memory, and the number of keys is capped.
 */
export function createRateLimiter(options: { maxKeys?: number; enabled?: boolean } = {}): RateLimiter {
  const maxKeys = options.maxKeys ?? MAX_RATE_LIMIT_KEYS;
  // AUTH_RATE_LIMIT=off (tests, benchmarks; refused on mainnet): every limit of this limiter counts nothing.
  const enabled = options.enabled ?? true;
  /** Per limit name: its keys' windows, least recently hit first. */
  const limits = new Map<string, Map<string, Window>>();
  const windowsOf = (name: string) => {
    let windows = limits.get(name);
    if (windows === undefined) limits.set(name, (windows = new Map()));
    return windows;
  };

  function liveHits(entry: Window | undefined, now: number): number[] {
    if (entry === undefined) return [];
    const since = now - entry.windowMs;
    let drop = 0;
    while (drop < entry.hits.length && entry.hits[drop]! <= since) drop++;
    if (drop > 0) entry.hits.splice(0, drop);
    // Hits "after" now: the wall clock was stepped back since. They count from now, so a refusal lasts at
    // most a window, not the step as well (and the clock's step does not forget them either).
    for (let i = entry.hits.length - 1; i >= 0 && entry.hits[i]! > now; i--) entry.hits[i] = now;
    return entry.hits;
  }

  return {
    consume(hits, now) {
      if (!enabled) return;
      let retryAfterMs = 0;
      const ids = hits.map(([limit, key]) => {
        const windows = windowsOf(limit.name);
        const live = liveHits(windows.get(key), now);
        if (live.length >= limit.max) retryAfterMs = Math.max(retryAfterMs, live[live.length - limit.max]! + limit.windowMs - now);
        return { windows, key, limit };
      });
      if (retryAfterMs > 0) {
        const retryAfter = Math.max(1, Math.ceil(retryAfterMs / 1000));
        throw new AppError("RATE_LIMITED", `too many attempts; try again in ${retryAfter} s`, { retryAfter });
      }
      for (const { windows, key, limit } of ids) {
        const entry = windows.get(key) ?? { windowMs: limit.windowMs, hits: [] };
        entry.hits.push(now);
        windows.delete(key); // re-insert: Map order is then least recently hit first
        windows.set(key, entry);
        while (windows.size > maxKeys) windows.delete(windows.keys().next().value!);
      }
    },
    purge(now) {
      let removed = 0;
      for (const windows of limits.values()) {
        for (const [key, entry] of windows) {
          if (entry.hits.length === 0 || entry.hits[entry.hits.length - 1]! <= now - entry.windowMs) {
            windows.delete(key);
            removed++;
          }
        }
      }
      return removed;
    },
    size: () => [...limits.values()].reduce((n, windows) => n + windows.size, 0),
  };
}

/** The hits one verification attempt counts: per client+wallet, and per client network (IPv6 /64). */
export function verifyHits(clientIp: string, wallet: string): [Limit, string][] {
  return [
    [AUTH_LIMITS.verifyPerClientWallet, `${clientIp}|${wallet}`],
    [AUTH_LIMITS.verifyPerNetwork, networkKey(clientIp)],
  ];
}

/** A custodial wallet made (wallet_create's own sign-in) from this client's network (IPv6 by /64). */
export function walletCreateHits(clientIp: string): [Limit, string][] {
  return [[AUTH_LIMITS.walletsCreatedPerNetwork, networkKey(clientIp)]];
}

export function challengeHits(clientIp: string, wallet: string): [Limit, string][] {
  return [
    [AUTH_LIMITS.challengePerClientWallet, `${clientIp}|${wallet}`],
    [AUTH_LIMITS.challengePerNetwork, networkKey(clientIp)],
  ];
}

/** An MCP initialize from this client's network (IPv6 by /64). */
export function mcpInitializeHits(clientIp: string): [Limit, string][] {
  return [[AUTH_LIMITS.mcpSessionsPerNetwork, networkKey(clientIp)]];
}

/** A checkout opened from this client's network (IPv6 by /64). */
export function checkoutHits(clientIp: string): [Limit, string][] {
  return [[AUTH_LIMITS.checkoutsPerNetwork, networkKey(clientIp)]];
}

/** A call counted for `wallet`, and for this client's network (IPv6 by /64). */
function walletAndNetwork(perWallet: Limit, perNetwork: Limit, wallet: string, clientIp: string): [Limit, string][] {
  return [
    [perWallet, wallet],
    [perNetwork, networkKey(clientIp)],
  ];
}

/** A marketplace message (or a conversation's first) sent by `wallet` from this client's network. */
export function messageHits(wallet: string, clientIp: string): [Limit, string][] {
  return walletAndNetwork(AUTH_LIMITS.messagesPerWallet, AUTH_LIMITS.messagesPerNetwork, wallet, clientIp);
}

/** A consumer_search_agents call of `wallet` from this client's network. */
export function searchHits(wallet: string, clientIp: string): [Limit, string][] {
  return walletAndNetwork(AUTH_LIMITS.searchesPerWallet, AUTH_LIMITS.searchesPerNetwork, wallet, clientIp);
}

/** A dashboard change that makes an outbox event (products), or a webhook sent on request (test, resend). */
export function ownerWriteHits(owner: string, kind: "write" | "webhook", clientIp: string): [Limit, string][] {
  return [
    [kind === "write" ? AUTH_LIMITS.ownerWritesPerOwner : AUTH_LIMITS.webhookSendsPerOwner, owner],
    [AUTH_LIMITS.ownerWritesPerNetwork, networkKey(clientIp)],
  ];
}

/** A wallet_get_history call of `wallet` from this client's network. */
export function historyHits(wallet: string, clientIp: string): [Limit, string][] {
  return walletAndNetwork(AUTH_LIMITS.historyPerWallet, AUTH_LIMITS.historyPerNetwork, wallet, clientIp);
}

/** A wallet_transfer or wallet_submit_transaction call of `wallet` from this client's network. */
export function transferHits(wallet: string, clientIp: string): [Limit, string][] {
  return walletAndNetwork(AUTH_LIMITS.transfersPerWallet, AUTH_LIMITS.transfersPerNetwork, wallet, clientIp);
}

/** A checkout's payment submitted or looked for from this client's network (IPv6 by /64). */
export function paymentCheckHits(clientIp: string): [Limit, string][] {
  return [[AUTH_LIMITS.paymentChecksPerNetwork, networkKey(clientIp)]];
}
