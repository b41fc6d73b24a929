// Compares builds on the access-check row with more precision than one bench run gives: the baseline and
// every build run side by side and are loaded in rotation (2-s windows, the order reversed every round),
// so a drift in the machine's speed falls on all of them alike. For telling apart changes of a few
// per cent (BENCHMARKS.md, seventh pass); not a row of operations.md. On Linux it also prints the CPU
// time each server's JS thread spent per request (from /proc), which varies less between windows than
// the rates do: on this VM the rate is about the inverse of that time (BENCHMARKS.md, tenth pass).
// Usage: bun bench/compare-access.ts /abs/build-a /abs/build-b ... [--rounds 6] [--seconds 2]
// (each a walletgate executable, or a script that `exec`s one with the arguments it is given, so that
// the process started is the server itself).
import { readFileSync } from "node:fs";
import { parseArgs } from "node:util";
import { startAccessBaseline, startAccessServer, type AccessLoad } from "./access-check.ts";
import { createResources } from "./support.ts";

const { values, positionals } = parseArgs({
  args: Bun.argv.slice(2),
  allowPositionals: true,
  options: { rounds: { type: "string", default: "6" }, seconds: { type: "string", default: "2" } },
});
const rounds = Number(values.rounds);
const seconds = Number(values.seconds);
if (positionals.length === 0 || !(rounds >= 1) || !(seconds >= 1)) {
  process.stderr.write("usage: bun bench/compare-access.ts /abs/build ... [--rounds 6] [--seconds 2]\n");
  process.exit(2);
}

/**
 * CPU time (user + system, in clock ticks of 10 ms) of a process's main thread, which is the JS thread of
 * a Bun server; null where /proc is not there to read.
 */
function mainThreadTicks(pid: number): number | null {
  try {
    const fields = readFileSync(`/proc/${pid}/task/${pid}/stat`, "utf8").split(") ")[1]!.split(" ");
    return Number(fields[11]) + Number(fields[12]);
  } catch {
    return null;
  }
}
const TICK_US = 10_000;

const resources = createResources();
process.once("SIGINT", () => void resources.close().finally(() => process.exit(130)));
try {
  const targets: { label: string; load: AccessLoad; pid: number }[] = [];
  const baseline = await startAccessBaseline(resources, resources.tempDir("compare"));
  targets.push({ label: "baseline (Elysia + 1 PK lookup)", load: baseline.load, pid: baseline.server.pid });
  for (const build of positionals) {
    const started = await startAccessServer(resources, [build, "serve"], resources.tempDir("compare"));
    targets.push({ label: build, load: started.load, pid: started.server.pid });
  }
  for (const target of targets) await target.load(1); // warm-up
  const rates = new Map<string, number[]>(targets.map((t) => [t.label, []]));
  const cpu = new Map<string, number[]>(targets.map((t) => [t.label, []])); // µs of the JS thread per request
  let non2xx = 0;
  for (let round = 0; round < rounds; round++) {
    for (const target of round % 2 === 0 ? targets : [...targets].reverse()) {
      const before = mainThreadTicks(target.pid);
      const rate = await target.load(seconds);
      const after = mainThreadTicks(target.pid);
      non2xx += rate.non2xx;
      rates.get(target.label)!.push(rate.requestsPerSecond);
      const requests = rate.requestsPerSecond * seconds;
      if (before !== null && after !== null && requests > 0) cpu.get(target.label)!.push(((after - before) * TICK_US) / requests);
    }
  }
  const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
  const base = mean(rates.get(targets[0]!.label)!);
  const baseCpu = cpu.get(targets[0]!.label)!;
  for (const [label, xs] of rates) {
    const windows = xs.map((x) => Math.round(x / 1000)).join(" ");
    process.stdout.write(`${label.padEnd(44)} ${Math.round(mean(xs)).toLocaleString("en-US").padStart(8)}/s  ${(mean(xs) / base).toFixed(3)}x  (k/s per window: ${windows})\n`);
  }
  const us = [...cpu.values()];
  if (us.every((xs) => xs.length === rounds)) {
    process.stdout.write("JS-thread CPU per request (the inverse ratio is what the rate would be if the thread were always busy):\n");
    for (const [label, xs] of cpu) {
      const windows = xs.map((x) => x.toFixed(1)).join(" ");
      process.stdout.write(`${label.padEnd(44)} ${mean(xs).toFixed(2).padStart(8)} µs  ${(mean(baseCpu) / mean(xs)).toFixed(3)}x  (µs per window: ${windows})\n`);
    }
  }
  if (non2xx > 0) process.stderr.write(`compare: WARNING ${non2xx} non-2xx answers: the figures do not count\n`);
} finally {
  await resources.close();
}
