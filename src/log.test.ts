// The logger's standard-output sink: lines held in memory come out whole and in order; a log that cannot
// be written (a full disk) costs its lines, never the process.
import { describe, expect, test } from "bun:test";
import { closeSync, existsSync, openSync } from "node:fs";
import { createLogger, MAX_UNREAD_LOG_CHARS, stdoutSink, type LogWriter } from "./log.ts";

/** Runs `body` in a child process with `sink = stdoutSink()` and returns what it printed. */
async function printed(body: string): Promise<string> {
  const script = `const { stdoutSink } = await import(${JSON.stringify(new URL("./log.ts", import.meta.url).pathname)}); const sink = stdoutSink(); ${body}`;
  const child = Bun.spawn([process.execPath, "-e", script], { stdout: "pipe", stderr: "pipe" });
  const [code, out, err] = await Promise.all([child.exited, new Response(child.stdout).text(), new Response(child.stderr).text()]);
  if (code !== 0) throw new Error(err);
  return out;
}

describe("stdoutSink", () => {
  test("request lines wait in memory, yet every line comes out once and in order", async () => {
    const out = await printed(`
      sink.write("r1\\n", true); sink.write("r2\\n", true); sink.write("warn\\n");
      await new Promise((r) => setImmediate(r));
      sink.write("r3\\n", true);
      await new Promise((r) => setTimeout(r, 120)); // longer than ACCESS_FLUSH_MS: written by the timer
      sink.write("r4\\n", true);
      await sink.flush();`);
    expect(out).toBe("r1\nr2\nwarn\nr3\nr4\n");
  });

  test("lines still held when the process exits are written out (process.exit in the same turn)", async () => {
    const out = await printed(`sink.write("r1\\n", true); sink.write("error\\n"); process.exit(0);`);
    expect(out).toBe("r1\nerror\n");
  });

  test.if(existsSync("/dev/full"))("a log on a full disk: lines are dropped, stderr says so once, the process goes on", async () => {
    const full = openSync("/dev/full", "w"); // every write fails with ENOSPC
    try {
      const script = `const { stdoutSink } = await import(${JSON.stringify(new URL("./log.ts", import.meta.url).pathname)}); const sink = stdoutSink();
        for (let i = 0; i < 3; i++) { sink.write("line " + i + "\\n"); sink.write("request " + i + "\\n", true); await sink.flush(); }
        console.error("still running");`;
      const child = Bun.spawn([process.execPath, "-e", script], { stdout: full, stderr: "pipe" });
      const [code, err] = await Promise.all([child.exited, new Response(child.stderr).text()]);
      expect(code).toBe(0);
      expect(err.match(/the log cannot be written \(.*\); its lines are dropped until it can/g)?.length).toBe(1);
      expect(err).toContain("still running");
    } finally {
      closeSync(full);
    }
  });

  test("a reader that does not keep up: lines past the bound are dropped, not held, and counted once it catches up", async () => {
    let written = 0;
    let release: () => void = () => undefined;
    let stalled: Promise<number> | null = null;
    let reading = false;
    const writer: LogWriter = {
      write: (text) => (written += text.length),
      // The reader takes nothing until released: every flush meanwhile is the same waiting Promise.
      flush: () => (reading ? written : (stalled ??= new Promise<number>((resolve) => (release = () => resolve(written))))),
    };
    const reports: string[] = [];
    const sink = stdoutSink((text) => reports.push(text), writer);
    const line = `${"x".repeat(999)}\n`;
    const lines = Math.ceil((2 * MAX_UNREAD_LOG_CHARS) / line.length);
    for (let i = 0; i < lines; i++) {
      sink.write(line);
      if (i % 1000 === 999) void sink.flush();
    }
    void sink.flush();
    await Bun.sleep(10);
    expect(written).toBeLessThanOrEqual(MAX_UNREAD_LOG_CHARS); // held at the bound, not at the 16 MB written
    expect(reports).toEqual(["walletgate: the log's reader is not keeping up; lines are dropped until it does\n"]);
    const kept = written / line.length;
    reading = true;
    release();
    await sink.flush();
    sink.write("after\n");
    await sink.flush();
    expect(reports[1]).toBe(`walletgate: the log's reader caught up; ${lines - kept} lines were dropped\n`);
    expect(written).toBe(kept * line.length + "after\n".length);
  });

  test("a burst larger than the buffer is written without waiting, all of it", async () => {
    const out = await printed(`
      for (let i = 0; i < 2000; i++) sink.write("request line " + i + " " + "x".repeat(80) + "\\n", true);
      await sink.flush();`);
    const lines = out.trimEnd().split("\n");
    expect(lines.length).toBe(2000);
    expect(lines[1999]).toStartWith("request line 1999 ");
  });
});

describe("request lines", () => {
  test("the JSON request line is what the generic line would be, field for field", () => {
    const lines: string[] = [];
    const log = createLogger("info", "json", (line) => lines.push(line), () => Date.UTC(2026, 10, 22, 11, 0, 0, 5));
    const fields = { requestId: "0f8e", method: "POST", path: '/odd "path"\\\u2028', status: 404, ms: 0.07 };
    log.request(fields);
    log.info("request", fields);
    expect(lines[0]).toBe(lines[1]!);
    expect(JSON.parse(lines[0]!)).toEqual({ time: "2026-11-22T11:00:00.005Z", level: "info", msg: "request", ...fields });
    createLogger("warn", "json", (line) => lines.push(line)).request(fields);
    expect(lines.length).toBe(2); // below the level: nothing
  });
});
