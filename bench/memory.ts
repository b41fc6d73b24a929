// Row "RSS after 10,000 sign-ins and 1,000 idle MCP sessions (rate limits off)": at most 300 MB, and the
// memory each idle MCP session holds (operations.md). RSS is the server's VmRSS from /proc, read after a
// one-second pause at each step.
import { readFileSync } from "node:fs";
import { openSession } from "./mcp.ts";
import { issueSignedBodies, postSignIns } from "./sign-in.ts";
import { startLoadServer, stopProcess, type Resources } from "./support.ts";

export type MemoryOptions = { serverCommand: string[]; signIns: number; sessions: number };

export type MemoryResult = {
  signIns: number;
  sessions: number;
  rssAtStartKb: number;
  rssAfterSignInsKb: number;
  rssAfterSessionsKb: number;
  /** What the idle sessions added, per session. */
  kbPerSession: number;
};

const CONCURRENCY = 32;

function rssKb(pid: number): number {
  const match = /^VmRSS:\s+(\d+) kB$/m.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
  if (match === null) throw new Error(`no VmRSS for process ${pid}`);
  return Number(match[1]);
}

const settled = async (pid: number) => {
  await Bun.sleep(1_000);
  return rssKb(pid);
};

export async function measureMemory(resources: Resources, options: MemoryOptions): Promise<MemoryResult> {
  const dir = resources.tempDir("memory");
  const { server, url } = await startLoadServer(resources, options.serverCommand, dir);
  try {
    const rssAtStartKb = await settled(server.pid);
    const { bodies } = await issueSignedBodies(url, options.signIns);
    await postSignIns(url, bodies);
    const rssAfterSignInsKb = await settled(server.pid);
    let opened = 0;
    await Promise.all(
      Array.from({ length: CONCURRENCY }, async () => {
        while (opened < options.sessions) {
          opened++;
          await openSession(url, false);
        }
      }),
    );
    const rssAfterSessionsKb = await settled(server.pid);
    return {
      signIns: options.signIns,
      sessions: options.sessions,
      rssAtStartKb,
      rssAfterSignInsKb,
      rssAfterSessionsKb,
      kbPerSession: Math.round(((rssAfterSessionsKb - rssAfterSignInsKb) / options.sessions) * 10) / 10,
    };
  } finally {
    await stopProcess(server, 10_000);
  }
}
