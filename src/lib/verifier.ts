// Signature verification as a service: inline, or on a worker thread so the server's one JS thread
// is free for HTTP and the database while another core verifies.
import { verifyStrict } from "./ed25519.ts";
import type { VerifyBatch, VerifyResults } from "./ed25519-worker.ts";

export type SignatureVerifier = {
  verify(publicKey: Uint8Array, message: Uint8Array, signature: Uint8Array): Promise<boolean>;
  stop(): Promise<void>;
};

/** Verifies on the calling thread (tests, CLI commands). */
export const inlineVerifier: SignatureVerifier = {
  verify: async (publicKey, message, signature) => verifyStrict(publicKey, message, signature),
  stop: async () => undefined,
};

/**
 * Verifies on one worker thread (`workerUrl`: ed25519-worker.ts), started on first use. Requests of one event-loop turn go as one
 * message. Should the worker fail, its pending requests and all later ones are verified inline, so a
 * broken worker costs speed, never a wrong answer.
 */
export function workerVerifier(workerUrl: string, onWorkerError: (err: unknown) => void, replyTimeoutMs = 10_000): SignatureVerifier {
  let worker: Worker | null = null;
  let broken = false;
  let nextId = 1;
  const inFlight = new Map<number, { batch: VerifyBatch; resolvers: ((ok: boolean) => void)[]; timer: ReturnType<typeof setTimeout> }>();
  let queue: VerifyBatch["items"] = [];
  let resolvers: ((ok: boolean) => void)[] = [];

  const verifyInline = (items: VerifyBatch["items"], waiting: ((ok: boolean) => void)[]) =>
    items.forEach(([publicKey, message, signature], i) => waiting[i]!(verifyStrict(publicKey, message, signature)));

  function fail(err: unknown): void {
    if (broken) return;
    broken = true;
    onWorkerError(err);
    answerInFlightInline();
    worker?.terminate();
  }

  function answerInFlightInline(): void {
    for (const { batch, resolvers: waiting, timer } of inFlight.values()) {
      clearTimeout(timer);
      verifyInline(batch.items, waiting);
    }
    inFlight.clear();
  }

  function start(): Worker {
    const w = new Worker(workerUrl);
    w.unref(); // never keeps the process alive
    w.onmessage = (event: MessageEvent<VerifyResults>) => {
      const entry = inFlight.get(event.data.id);
      if (entry === undefined) return;
      clearTimeout(entry.timer);
      inFlight.delete(event.data.id);
      event.data.results.forEach((ok, i) => entry.resolvers[i]!(ok === true));
    };
    w.onerror = (event) => fail(event.error ?? new Error(event.message));
    w.addEventListener("close", () => fail(new Error("verification worker exited")));
    return w;
  }

  function flush(): void {
    const batch: VerifyBatch = { id: nextId++, items: queue };
    const waiting = resolvers;
    queue = [];
    resolvers = [];
    if (broken) return verifyInline(batch.items, waiting);
    try {
      worker ??= start();
      // A worker that is alive but silent must not hang sign-ins: past the timeout it counts as failed.
      const timer = setTimeout(() => fail(new Error(`verification worker gave no answer in ${replyTimeoutMs} ms`)), replyTimeoutMs);
      timer.unref();
      inFlight.set(batch.id, { batch, resolvers: waiting, timer });
      worker.postMessage(batch);
    } catch (err) {
      inFlight.delete(batch.id);
      fail(err);
      verifyInline(batch.items, waiting);
    }
  }

  return {
    verify(publicKey, message, signature) {
      if (broken) return Promise.resolve(verifyStrict(publicKey, message, signature));
      if (queue.length === 0) setImmediate(flush);
      queue.push([publicKey, message, signature]);
      return new Promise((resolve) => resolvers.push(resolve));
    },
    async stop() {
      broken = true; // what is queued, in flight or asked later is verified inline
      if (queue.length > 0) flush();
      answerInFlightInline();
      worker?.terminate();
    },
  };
}
