// How calls are cut into messages: at most `maxBatch` per message, answers in the callers' order, and no
// empty message when a turn's calls filled the last batch exactly.
import { afterAll, expect, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { workerCalls } from "./worker-batch.ts";

const dir = mkdtempSync(join(tmpdir(), "walletgate-batch-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

// Answers each item with [item * 2, size of its batch, number of batches seen so far].
const file = join(dir, "counting.ts");
writeFileSync(
  file,
  "let batches = 0;\n" +
    "self.onmessage = (e) => { batches++; self.postMessage({ id: e.data.id, results: e.data.items.map((x) => [x * 2, e.data.items.length, batches]) }); };\n",
);
const url = Bun.pathToFileURL(file).href;
const inline = (x: number): [number, number, number] => [x * 2, 0, 0];

test("20 calls in one turn go as messages of 8, 8 and 4, answered in order", async () => {
  const errors: unknown[] = [];
  const calls = workerCalls<number, [number, number, number]>(url, { inline, onWorkerError: (e) => errors.push(e), maxBatch: 8 });
  const answers = await Promise.all(Array.from({ length: 20 }, (_, i) => calls.call(i)));
  expect(answers.map((a) => a[0])).toEqual(Array.from({ length: 20 }, (_, i) => i * 2));
  expect(answers.map((a) => a[1])).toEqual([...Array(8).fill(8), ...Array(8).fill(8), ...Array(4).fill(4)]);
  expect(answers.map((a) => a[2])).toEqual([...Array(8).fill(1), ...Array(8).fill(2), ...Array(4).fill(3)]);
  expect(errors).toEqual([]);
  await calls.stop();
});

test("a turn of exactly maxBatch calls sends one message, and the next turn's call the second", async () => {
  const errors: unknown[] = [];
  const calls = workerCalls<number, [number, number, number]>(url, { inline, onWorkerError: (e) => errors.push(e), maxBatch: 8 });
  const first = await Promise.all(Array.from({ length: 8 }, (_, i) => calls.call(i)));
  expect(first.map((a) => a[1])).toEqual(Array(8).fill(8));
  const later = await calls.call(100);
  expect(later).toEqual([200, 1, 2]); // batch 2: the full first batch left no empty message behind
  expect(errors).toEqual([]);
  await calls.stop();
});

test("a worker that answers a batch with too few results is given up: every call is still answered, inline (mutation review)", async () => {
  // worker-batch.ts onmessage: `|| event.data.results.length !== entry.items.length` dropped → the calls past
  // the short answer's end would never be answered (a sign-in waiting for ever).
  const short = join(dir, "short.ts");
  writeFileSync(short, "self.onmessage = (e) => { self.postMessage({ id: e.data.id, results: e.data.items.slice(1).map((x) => [x * 2, 9, 9]) }); };\n");
  const errors: unknown[] = [];
  const calls = workerCalls<number, [number, number, number]>(Bun.pathToFileURL(short).href, { inline, onWorkerError: (e) => errors.push(e), maxBatch: 8 });
  const answers = await Promise.race([Promise.all([1, 2, 3].map((i) => calls.call(i))), Bun.sleep(3_000).then(() => "unanswered" as const)]);
  expect(answers).toEqual([
    [2, 0, 0],
    [4, 0, 0],
    [6, 0, 0],
  ]);
  expect(errors.map((e) => (e as Error).message)).toEqual(["worker answered a batch with the wrong number of results"]);
  await calls.stop();
});
