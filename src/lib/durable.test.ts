// Files created whole or not at all: a failed write leaves nothing behind in the directory.
import { afterAll, describe, expect, test } from "bun:test";
import { mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const root = mkdtempSync(join(tmpdir(), "walletgate-durable-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));

describe("createFilesDurably", () => {
  test("a write that fails part-way (the disk full) removes its temporary file", () => {
    const dir = join(root, "data");
    // A child whose file size limit (4 KiB) stands in for a full disk: past it, write() fails with EFBIG
    // (SIGXFSZ ignored), after the temporary file was created and partly written.
    const script =
      `import { createFilesDurably } from ${JSON.stringify(join(import.meta.dir, "durable.ts"))};` +
      `try { createFilesDurably(${JSON.stringify(dir)}, [{ name: "walletgate.db", data: new Uint8Array(65536), mode: 0o644 }]); console.log("written"); }` +
      ` catch (err) { console.log(err.code); }`;
    const child = Bun.spawnSync(["sh", "-c", `trap '' XFSZ; ulimit -f 8; exec "$0" -e "$1"`, process.execPath, script]);
    expect(child.stdout.toString().trim()).toBe("EFBIG");
    expect(readdirSync(dir)).toEqual([]);
  });
});
