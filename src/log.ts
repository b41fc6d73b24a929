// One logger: JSON lines (or a readable line on a terminal), filtered by level. Never given secrets.
import type { LogLevel } from "./config.ts";

export type LogFields = Record<string, unknown>;
export type Logger = {
  debug(msg: string, fields?: LogFields): void;
  info(msg: string, fields?: LogFields): void;
  warn(msg: string, fields?: LogFields): void;
  error(msg: string, fields?: LogFields): void;
  /** Writes out buffered lines; resolves when they are handed to the OS (await it before exit). */
  flush(): Promise<void>;
};

export type LogSink = { write(line: string): void; flush(): Promise<void> };

/**
 * Standard output, written once per event-loop turn rather than once per line (a write per request
 * line cost more than the line itself). Avoids `process.stdout`, which is slow to create.
 */
export function stdoutSink(): LogSink {
  const sink = Bun.stdout.writer();
  let scheduled = false;
  const flush = async () => {
    scheduled = false;
    await sink.flush(); // a Promise when the reader is slow
  };
  return {
    write(line) {
      sink.write(line);
      if (!scheduled) {
        scheduled = true;
        setImmediate(() => void flush());
      }
    },
    flush,
  };
}

const RANK: Record<LogLevel, number> = { debug: 10, info: 20, warn: 30, error: 40, silent: 100 };

export function createLogger(
  level: LogLevel,
  format: "json" | "pretty",
  sink: LogSink | ((line: string) => void) = stdoutSink(),
  now: () => number = Date.now,
): Logger {
  const write = typeof sink === "function" ? sink : (line: string) => sink.write(line);
  const min = RANK[level];
  const emit = (lvl: Exclude<LogLevel, "silent">, msg: string, fields?: LogFields) => {
    if (RANK[lvl] < min) return;
    const time = new Date(now()).toISOString();
    if (format === "json") {
      write(JSON.stringify({ time, level: lvl, msg, ...fields }) + "\n");
    } else {
      const extra = fields ? Object.entries(fields).map(([k, v]) => `${k}=${typeof v === "string" ? v : JSON.stringify(v)}`) : [];
      write(`${time} ${lvl.toUpperCase().padEnd(5)} ${msg}${extra.length ? " " + extra.join(" ") : ""}\n`);
    }
  };
  return {
    debug: (m, f) => emit("debug", m, f),
    info: (m, f) => emit("info", m, f),
    warn: (m, f) => emit("warn", m, f),
    error: (m, f) => emit("error", m, f),
    flush: async () => {
      if (typeof sink !== "function") await sink.flush();
    },
  };
}
