// One logger: JSON lines (or a readable line on a terminal), filtered by level. Never given secrets.
import type { LogLevel } from "./config.ts";

export type LogFields = Record<string, unknown>;
/** The fields of the one line per request (operations.md). */
export type RequestLine = { requestId: string; method: string; path: string; status: number; ms: number };
export type Logger = {
  debug(msg: string, fields?: LogFields): void;
  info(msg: string, fields?: LogFields): void;
  warn(msg: string, fields?: LogFields): void;
  error(msg: string, fields?: LogFields): void;
  /**
   * The one line per request (info level, message "request"). Written out within ACCESS_FLUSH_MS
   * together with the other requests of that time, not on its own turn: under load a write per request
   * cost more than the request. Every other line still goes out at the end of its turn.
   */
  request(fields: RequestLine): void;
  /** Writes out buffered lines; resolves when they are handed to the OS (await it before exit). */
  flush(): Promise<void>;
};

/** `deferred` lines may wait up to ACCESS_FLUSH_MS before they are written out. */
export type LogSink = { write(line: string, deferred?: boolean): void; flush(): Promise<void> };

/** How long a request line may wait in memory before it is written out. */
export const ACCESS_FLUSH_MS = 50;

/**
 * Request lines held in memory beyond this many characters are written out at once. Kept small: under
 * load, joining ~100 KB per write made the allocator return memory to the kernel and fault it back in
 * (four times the `madvise` calls of a server that logs nothing, measured with `strace -c`).
 */
const ACCESS_BUFFER_CHARS = 16 * 1024;

/**
 * Characters handed to standard output that its reader has not taken yet, at most: past this, lines are
 * dropped (and counted) until it catches up. A reader that is slow or stopped (a pipe nobody drains) made
 * them pile up in memory without bound: ~3.8 GB in 40 s of requests with long paths.
 */
export const MAX_UNREAD_LOG_CHARS = 8 * 1024 * 1024;

/** What stdoutSink writes to: Bun's writer of standard output (its flush is a Promise while the reader lags). */
export type LogWriter = { write(text: string): unknown; flush(): number | Promise<number> };

/**
 * Standard output: lines are collected here and handed to the OS once per event-loop turn, and request
 * lines at most every ACCESS_FLUSH_MS (Bun's own writer would write at the end of every turn). Avoids
 * `process.stdout`, which is slow to create.
 */
export function stdoutSink(report: (text: string) => void = reportOnStderr, writer?: LogWriter): LogSink {
  const sink: LogWriter = writer ?? Bun.stdout.writer();
  let pending: string[] = [];
  let pendingChars = 0;
  let soon = false;
  let timer: ReturnType<typeof setTimeout> | null = null;
  // A log that cannot be written (the reading end of a pipe closed, the disk full) must not stop the
  // service: its lines are dropped, and stderr says so once, and how many when the log works again.
  let broken = false;
  let dropped = 0;
  // Handed to the writer, not yet taken by the reader; lines dropped meanwhile once that passed the bound.
  let handed = 0; // characters ever handed to the writer
  let taken = 0; // of them, those a completed flush has seen out
  let lagging = false;
  let lagDropped = 0;
  const flush = async () => {
    soon = false;
    if (timer !== null) clearTimeout(timer);
    timer = null;
    let lines = 0;
    try {
      if (pending.length > 0 && handed - taken + pendingChars > MAX_UNREAD_LOG_CHARS) {
        if (!lagging) report("walletgate: the log's reader is not keeping up; lines are dropped until it does\n");
        lagging = true;
        lagDropped += pending.length;
        pending = [];
        pendingChars = 0;
      }
      if (pending.length > 0) {
        const text = pending.length === 1 ? pending[0]! : pending.join("");
        lines = pending.length;
        pending = [];
        pendingChars = 0;
        // A write the OS does not take at once (a large one, a slow reader) is a Promise, which rejects when
        // the write fails (EPIPE): awaited here, or its failure would end the process.
        const written = sink.write(text);
        handed += text.length;
        if (written instanceof Promise) await written;
      }
      const mark = handed;
      const flushed = sink.flush(); // a Promise when the reader is slow
      if (flushed instanceof Promise) await flushed;
      taken = Math.max(taken, mark); // what was handed before this flush is out
      if (lagging && taken === handed) {
        report(`walletgate: the log's reader caught up; ${lagDropped} lines were dropped\n`);
        lagging = false;
        lagDropped = 0;
      }
    } catch (err) {
      if (!broken) report(`walletgate: the log cannot be written (${err instanceof Error ? err.message : String(err)}); its lines are dropped until it can\n`);
      broken = true;
      dropped += lines;
      return;
    }
    if (broken && lines > 0) {
      report(`walletgate: the log can be written again; ${dropped} lines were dropped\n`);
      broken = false;
      dropped = 0;
    }
  };
  // Bun writes out what its writer holds when the process exits (`process.exit` included): hand it ours.
  process.once("exit", () => {
    try {
      if (pending.length > 0) sink.write(pending.join(""));
    } catch {
      // nowhere left to say it
    }
    pending = [];
  });
  const soonFlush = () => {
    if (soon) return;
    soon = true;
    setImmediate(() => void flush());
  };
  return {
    write(line, deferred = false) {
      pending.push(line);
      pendingChars += line.length;
      if (!deferred || pendingChars > ACCESS_BUFFER_CHARS) soonFlush();
      else if (timer === null) timer = setTimeout(() => void flush(), ACCESS_FLUSH_MS);
    },
    flush,
  };
}

function reportOnStderr(text: string): void {
  try {
    const written = Bun.stderr.writer().write(text);
    if (written instanceof Promise) written.catch(() => {}); // stderr is gone too
  } catch {
    // stderr is gone too
  }
}

/** A number as JSON.stringify writes it (null when not finite). */
const number = (n: number): string => (Number.isFinite(n) ? String(n) : "null");

const RANK: Record<LogLevel, number> = { debug: 10, info: 20, warn: 30, error: 40, silent: 100 };

export function createLogger(
  level: LogLevel,
  format: "json" | "pretty",
  sink: LogSink | ((line: string) => void) = stdoutSink(),
  now: () => number = Date.now,
): Logger {
  const write = typeof sink === "function" ? sink : (line: string, deferred?: boolean) => sink.write(line, deferred);
  const min = RANK[level];
  let lastMs = Number.NaN;
  let lastTime = "";
  const timeNow = () => {
    const ms = now();
    if (ms !== lastMs) {
      lastMs = ms;
      lastTime = new Date(ms).toISOString(); // lines of the same millisecond share it (request lines under load)
    }
    return lastTime;
  };
  const emit = (lvl: Exclude<LogLevel, "silent">, msg: string, fields?: LogFields, deferred = false) => {
    if (RANK[lvl] < min) return;
    const time = timeNow();
    if (format === "json") {
      write(JSON.stringify({ time, level: lvl, msg, ...fields }) + "\n", deferred);
    } else {
      const extra = fields ? Object.entries(fields).map(([k, v]) => `${k}=${typeof v === "string" ? v : JSON.stringify(v)}`) : [];
      write(`${time} ${lvl.toUpperCase().padEnd(5)} ${msg}${extra.length ? " " + extra.join(" ") : ""}\n`, deferred);
    }
  };
  return {
    debug: (m, f) => emit("debug", m, f),
    info: (m, f) => emit("info", m, f),
    warn: (m, f) => emit("warn", m, f),
    error: (m, f) => emit("error", m, f),
    request: (f) => {
      if (RANK.info < min) return;
      if (format !== "json") return emit("info", "request", f, true);
      // The same line as emit's, written out field by field: one per request, so it is worth it.
      const s = JSON.stringify;
      write(
        `{"time":"${timeNow()}","level":"info","msg":"request","requestId":${s(f.requestId)},"method":${s(f.method)},"path":${s(f.path)},"status":${number(f.status)},"ms":${number(f.ms)}}\n`,
        true,
      );
    },
    flush: async () => {
      if (typeof sink !== "function") await sink.flush();
    },
  };
}
