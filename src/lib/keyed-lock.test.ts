import { expect, test } from "bun:test";
import { createKeyedLock } from "./keyed-lock.ts";

test("work for one key runs one at a time, in order, failures included; other keys run alongside", async () => {
  const lock = createKeyedLock();
  const log: string[] = [];
  const step = (name: string, ms: number, fail = false) => async () => {
    log.push(`${name} start`);
    await Bun.sleep(ms);
    log.push(`${name} end`);
    if (fail) throw new Error(name);
    return name;
  };
  const a1 = lock.run("a", step("a1", 20, true));
  const a2 = lock.run("a", step("a2", 1));
  const b1 = lock.run("b", step("b1", 1));
  expect(await a1.catch((e: Error) => e.message)).toBe("a1");
  expect(await Promise.all([a2, b1])).toEqual(["a2", "b1"]);
  expect(log.indexOf("a2 start")).toBeGreaterThan(log.indexOf("a1 end"));
  expect(log.indexOf("b1 start")).toBeLessThan(log.indexOf("a1 end"));
});
