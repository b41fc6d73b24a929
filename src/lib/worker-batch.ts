// Work handed to a worker thread: the calls of one event-loop turn go as messages of at most `maxBatch`
// calls, and the calling thread does the work itself whenever the worker cannot (it never started,
// crashed or fell silent), so a broken worker costs speed, never a wrong or missing answer. The worker
// side is `serveBatches`.

export type Batch<Req> = { id: number; items: Req[] };
/** The results in order, or why the worker could not do the batch (it is then done inline). */
export type BatchReply<Res> = { id: number; results: Res[] } | { id: number; error: string };

export type WorkerCalls<Req, Res> = {
  call(request: Req): Promise<Res>;
  /** Answers what is queued or in flight on this thread, ends the worker; later calls run inline. */
  stop(): Promise<void>;
};

export type WorkerCallOptions<Req, Res> = {
  /** The same work on the calling thread: the fallback. */
  inline: (request: Req) => Res | Promise<Res>;
  /** Told once, when the worker is given up. */
  onWorkerError: (err: unknown) => void;
  /** A worker that is alive but silent this long counts as failed. */
  replyTimeoutMs?: number;
  /**
   * The most calls per message (default 8). A turn's calls go as several messages, so the first answers
   * come back while the worker is still on the rest, and this thread carries on with them meanwhile: the
   * two threads overlap instead of taking turns (sign-ins ~8 % faster over HTTP than one message a turn).
   */
  maxBatch?: number;
};

/** Calls to one worker thread (`workerUrl`), started on the first call. */
export function workerCalls<Req, Res>(workerUrl: string, options: WorkerCallOptions<Req, Res>): WorkerCalls<Req, Res> {
  const replyTimeoutMs = options.replyTimeoutMs ?? 10_000;
  const maxBatch = Math.max(1, options.maxBatch ?? 8);
  type Waiting = { resolve: (r: Res) => void; reject: (err: unknown) => void };
  let worker: Worker | null = null;
  let broken = false;
  let nextId = 1;
  const inFlight = new Map<number, { items: Req[]; waiting: Waiting[]; timer: ReturnType<typeof setTimeout> }>();
  let queue: Req[] = [];
  let waiting: Waiting[] = [];
  /** One flush at the end of the turn sends what full batches left (it may be nothing). */
  let endOfTurnFlush = false;

  const runInline = (items: Req[], answer: Waiting[]) =>
    items.forEach((item, i) => {
      try {
        Promise.resolve(options.inline(item)).then(answer[i]!.resolve, answer[i]!.reject);
      } catch (err) {
        answer[i]!.reject(err);
      }
    });

  function fail(err: unknown): void {
    if (broken) return;
    broken = true;
    options.onWorkerError(err);
    answerInFlightInline();
    worker?.terminate();
  }

  function answerInFlightInline(): void {
    for (const entry of inFlight.values()) {
      clearTimeout(entry.timer);
      runInline(entry.items, entry.waiting);
    }
    inFlight.clear();
  }

  function start(): Worker {
    const w = new Worker(workerUrl);
    w.unref(); // never keeps the process alive
    w.onmessage = (event: MessageEvent<BatchReply<Res>>) => {
      const entry = inFlight.get(event.data.id);
      if (entry === undefined) return;
      clearTimeout(entry.timer);
      inFlight.delete(event.data.id);
      if ("error" in event.data || !Array.isArray(event.data.results) || event.data.results.length !== entry.items.length) {
        // A worker that cannot do its work (no key, a bug) is given up once; this batch and later ones run here.
        runInline(entry.items, entry.waiting);
        return fail(new Error("error" in event.data ? `worker failed a batch: ${event.data.error}` : "worker answered a batch with the wrong number of results"));
      }
      event.data.results.forEach((result, i) => entry.waiting[i]!.resolve(result));
    };
    w.onerror = (event) => fail(event.error ?? new Error(event.message));
    w.addEventListener("close", () => fail(new Error("worker exited")));
    return w;
  }

  function flush(): void {
    if (queue.length === 0) return; // sent already: the batch was full before the turn ended
    const batch: Batch<Req> = { id: nextId++, items: queue };
    const answer = waiting;
    queue = [];
    waiting = [];
    if (broken) return runInline(batch.items, answer);
    try {
      worker ??= start();
      const timer = setTimeout(() => fail(new Error(`worker gave no answer in ${replyTimeoutMs} ms`)), replyTimeoutMs);
      timer.unref();
      inFlight.set(batch.id, { items: batch.items, waiting: answer, timer });
      worker.postMessage(batch);
    } catch (err) {
      inFlight.delete(batch.id);
      fail(err);
      runInline(batch.items, answer);
    }
  }

  return {
    call(request) {
      if (broken) return Promise.resolve().then(() => options.inline(request));
      if (!endOfTurnFlush) {
        endOfTurnFlush = true;
        setImmediate(() => {
          endOfTurnFlush = false;
          flush();
        });
      }
      queue.push(request);
      const answer = new Promise<Res>((resolve, reject) => waiting.push({ resolve, reject }));
      if (queue.length >= maxBatch) flush();
      return answer;
    },
    async stop() {
      broken = true; // what is queued, in flight or asked later runs inline
      if (queue.length > 0) flush();
      answerInFlightInline();
      worker?.terminate();
    },
  };
}

/** The worker side: answers each batch with `handle` applied to every item, in order. */
export function serveBatches<Req, Res>(handle: (request: Req) => Res): void {
  const self = globalThis as unknown as Worker;
  self.onmessage = (event: MessageEvent<Batch<Req>>) => {
    const { id, items } = event.data;
    let reply: BatchReply<Res>;
    try {
      reply = { id, results: items.map(handle) };
    } catch (err) {
      reply = { id, error: String(err) };
    }
    self.postMessage(reply);
  };
}
