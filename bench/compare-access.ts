// Compares builds on the access-check row with more precision than one bench run gives: the baseline and
// every build run side by side and are loaded in rotation (2-s windows, the order reversed every round),
// so a drift in the machine's speed falls on all of them alike. For telling apart changes of a few
// per cent (BENCHMARKS.md, seventh pass); not a row of operations.md.
// Usage: bun bench/compare-access.ts /abs/build-a /abs/build-b ... [--rounds 6] [--seconds 2]
// (each a walletgate executable, or a script that runs one with the arguments it is given).
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

const resources = createResources();
process.once("SIGINT", () => void resources.close().finally(() => process.exit(130)));
try {
  const targets: { label: string; load: AccessLoad }[] = [];
  const baseline = await startAccessBaseline(resources, resources.tempDir("compare"));
  targets.push({ label: "baseline (Elysia + 1 PK lookup)", load: baseline.load });
  for (const build of positionals) {
    const started = await startAccessServer(resources, [build, "serve"], resources.tempDir("compare"));
    targets.push({ label: build, load: started.load });
  }
  for (const target of targets) await target.load(1); // warm-up
  const rates = new Map<string, number[]>(targets.map((t) => [t.label, []]));
  let non2xx = 0;
  for (let round = 0; round < rounds; round++) {
    for (const target of round % 2 === 0 ? targets : [...targets].reverse()) {
      const rate = await target.load(seconds);
      non2xx += rate.non2xx;
      rates.get(target.label)!.push(rate.requestsPerSecond);
    }
  }
  const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
  const base = mean(rates.get(targets[0]!.label)!);
  for (const [label, xs] of rates) {
    const windows = xs.map((x) => Math.round(x / 1000)).join(" ");
    process.stdout.write(`${label.padEnd(44)} ${Math.round(mean(xs)).toLocaleString("en-US").padStart(8)}/s  ${(mean(xs) / base).toFixed(3)}x  (k/s per window: ${windows})\n`);
  }
  if (non2xx > 0) process.stderr.write(`compare: WARNING ${non2xx} non-2xx answers: the figures do not count\n`);
} finally {
  await resources.close();
}
