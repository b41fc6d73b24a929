// The test helpers' own promises: a server that cannot start leaves no process and no DATA_DIR behind.
import { expect, test } from "bun:test";
import { existsSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { startTestServer, tempDir } from "./helpers/server.ts";

const ours = () => new Set(readdirSync(tmpdir()).filter((name) => name.startsWith("walletgate-test-")));

test("startTestServer: a server that exits before listening is gone, with the DATA_DIR made for it; a given DATA_DIR stays", async () => {
  const before = ours();
  const failed = await startTestServer({ PORT: "not-a-port" }).then(
    () => "started",
    (err: Error) => err.message,
  );
  expect(failed).toContain("server exited before listening");
  expect([...ours()].filter((name) => !before.has(name))).toEqual([]);
  const given = tempDir();
  await expect(startTestServer({ PORT: "not-a-port" }, given)).rejects.toThrow("server exited before listening");
  expect(existsSync(given)).toBe(true);
  rmSync(given, { recursive: true, force: true });
});
