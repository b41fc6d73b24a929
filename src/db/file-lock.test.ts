// The locks between walletgate processes on one database: shared open locks coexist, an exclusive one
// excludes them (in either order, across processes), a waiting opener gets in once the holder lets go.
import { afterAll, describe, expect, test } from "bun:test";
import { chmodSync, chownSync, mkdirSync, mkdtempSync, rmSync, statSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { holdOpenLock, holdServeLock, lockPathOf, tryLock, type LockMode } from "./file-lock.ts";

const dir = mkdtempSync(join(tmpdir(), "walletgate-lock-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const locked = (attempt: ReturnType<typeof tryLock>) => ("lock" in attempt ? "lock" : "held" in attempt ? "held" : "unsupported");

/** Another process holding `path` as `mode` for `ms`; resolves once it holds it. */
/**
 * A lock held by another process. With `ms`, it lets go by itself that long after taking it (`releaseAt`, by
 * its clock: this process may be blocked in a wait meanwhile); without, when `release()` is called.
 */
async function heldElsewhere(path: string, mode: LockMode, ms?: number): Promise<{ done: Promise<number>; releaseAt: number; release: () => void }> {
  const hold = ms === undefined ? "for await (const _ of Bun.stdin.stream()) {}" : `await Bun.sleep(${ms});`;
  const script = `const { tryLock } = await import(${JSON.stringify(join(import.meta.dir, "file-lock.ts"))});
    const a = tryLock(${JSON.stringify(path)}, ${JSON.stringify(mode)});
    console.log(JSON.stringify({ locked: "lock" in a, releaseAt: Date.now() + ${ms ?? 0} })); ${hold}`;
  const proc = Bun.spawn([process.execPath, "-e", script], { stdin: "pipe", stdout: "pipe" });
  const reader = proc.stdout.getReader();
  const first = JSON.parse(new TextDecoder().decode((await reader.read()).value)) as { locked: boolean; releaseAt: number };
  expect(first.locked).toBe(true);
  return { done: proc.exited, releaseAt: first.releaseAt, release: () => void proc.stdin.end() };
}

describe("tryLock", () => {
  test("shared locks coexist; an exclusive one waits for none of them and excludes them", () => {
    const path = join(dir, "a.locks");
    const one = tryLock(path, "shared");
    const two = tryLock(path, "shared");
    expect([locked(one), locked(two)]).toEqual(["lock", "lock"]);
    expect(locked(tryLock(path, "exclusive"))).toBe("held");
    if ("lock" in one) one.lock.release();
    expect(locked(tryLock(path, "exclusive"))).toBe("held"); // the second shared one still holds
    if ("lock" in two) two.lock.release();
    const only = tryLock(path, "exclusive");
    expect(locked(only)).toBe("lock");
    expect(locked(tryLock(path, "shared"))).toBe("held");
    if ("lock" in only) only.lock.release();
    expect(statSync(path).mode & 0o777).toBe(0o644 & ~process.umask());
  });

  test("across processes: a lock held by another process is held here, and free once that process ends", async () => {
    const path = join(dir, "b.locks");
    const other = await heldElsewhere(path, "exclusive");
    expect(locked(tryLock(path, "shared"))).toBe("held");
    other.release();
    await other.done;
    const after = tryLock(path, "shared");
    expect(locked(after)).toBe("lock");
    if ("lock" in after) after.lock.release();
  });
});

const AS_NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"];
/**
 * Root, with setpriv, and a checkout that user nobody can read (not one cloned under a private directory):
 * a lock file of root's can then be tried as another user.
 */
/** Runs `body` as user nobody in a Bun process with file-lock.ts imported as `locks`: what it printed, trimmed. */
const runAsNobody = (body: string) =>
  Bun.spawnSync([...AS_NOBODY, process.execPath, "-e", `const locks = await import(${JSON.stringify(join(import.meta.dir, "file-lock.ts"))});\n${body}`], {
    env: { HOME: "/tmp", PATH: process.env.PATH ?? "" },
  }).stdout.toString().trim();
const canActAsNobody =
  process.getuid?.() === 0 &&
  (() => {
    try {
      return runAsNobody(`console.log("ok");`) === "ok";
    } catch {
      return false; // no setpriv
    }
  })();

/** A folder of root's that every user may enter and read, removed after `fn`. */
function withSharedDir(fn: (dir: string) => void): void {
  const shared = mkdtempSync(join(tmpdir(), "walletgate-lock-users-"));
  try {
    chmodSync(shared, 0o755);
    fn(shared);
  } finally {
    rmSync(shared, { recursive: true, force: true });
  }
}

describe("a lock file another user made", () => {
  test.skipIf(!canActAsNobody)("readable by all (as made here): shared through a read, exclusive refused; made 0600 (umask 077): refused, naming it, not skipped", () => {
    withSharedDir((shared) => {
      const path = join(shared, "x.locks");
      const asNobody = (mode: string) =>
        runAsNobody(`try { const a = locks.tryLock(${JSON.stringify(path)}, ${JSON.stringify(mode)}); console.log("lock" in a ? "lock" : "held" in a ? "held" : "unsupported"); }
             catch (e) { console.log("threw " + e.code); }`);
      const mine = tryLock(path, "shared"); // made by root, 0644 less the umask
      if ("lock" in mine) mine.lock.release();
      chmodSync(path, 0o644);
      expect(asNobody("shared")).toBe("lock");
      expect(asNobody("exclusive")).toBe("threw EACCES"); // a read-only connection would hold no exclusive lock
      chmodSync(path, 0o600);
      expect(asNobody("shared")).toBe("threw EACCES");
    });
  });
});

describe("a backup by a user who may only read DATA_DIR", () => {
  test.skipIf(!canActAsNobody)("goes without a lock file it cannot open, where a command that writes is refused naming it", () => {
    // file-lock.ts holdLock(): `if (options.readOnlyUse === true && codeOf(err) === "EACCES") return null;` removed
    withSharedDir((shared) => {
      const database = join(shared, "walletgate.db");
      const mine = tryLock(lockPathOf(database), "shared"); // the server's lock file, its user's alone (umask 077)
      if ("lock" in mine) mine.lock.release();
      chmodSync(lockPathOf(database), 0o600);
      const asNobody = (readOnlyUse: boolean) =>
        runAsNobody(`try { const lock = locks.holdOpenLock(${JSON.stringify(database)}, () => new Error("restoring"), { waitMs: 0, readOnlyUse: ${readOnlyUse} }); console.log(lock === null ? "none" : "lock"); }
             catch (e) { console.log("threw " + e.code); }`);
      expect(asNobody(true)).toBe("none");
      expect(asNobody(false)).toBe("threw EACCES");
    });
  });
});

describe("a lock file root makes", () => {
  test.skipIf(process.getuid?.() !== 0)("is given to DATA_DIR's owner, whose server must lock it too", () => {
    const data = mkdtempSync(join(tmpdir(), "walletgate-lock-owner-"));
    try {
      chownSync(data, 65534, 65534);
      const attempt = tryLock(join(data, "walletgate.db.locks"), "shared");
      if ("lock" in attempt) attempt.lock.release();
      expect([statSync(join(data, "walletgate.db.locks")).uid, statSync(join(data, "walletgate.db.locks")).gid]).toEqual([65534, 65534]);
    } finally {
      rmSync(data, { recursive: true, force: true });
    }
  });
});

describe("holdOpenLock", () => {
  test("waits while a restore holds the lock, then has it", async () => {
    const db = join(dir, "c.db");
    const other = await heldElsewhere(lockPathOf(db), "exclusive", 400);
    const lock = holdOpenLock(db, () => new Error("restoring"), { waitMs: 10_000 });
    expect(Date.now()).toBeGreaterThanOrEqual(other.releaseAt); // had only once the other let go
    expect(lock).not.toBeNull();
    lock!.release();
    await other.done;
  });

  test("gives up after its wait with the caller's error", async () => {
    const db = join(dir, "d.db");
    const other = await heldElsewhere(lockPathOf(db), "exclusive");
    expect(() => holdOpenLock(db, () => new Error("being restored"), { waitMs: 200 })).toThrow("being restored");
    other.release();
    await other.done;
  });

  test("the lock file sits beside the file a symlinked database leads to, so every name for it shares one", () => {
    const real = join(dir, "real.db");
    writeFileSync(real, "");
    const link = join(dir, "link.db");
    symlinkSync(real, link);
    expect(lockPathOf(link)).toBe(`${real}.locks`);
    expect(lockPathOf(join(dir, "missing.db"))).toBe(join(dir, "missing.db.locks"));
  });

  test("a link to a database still to be made locks beside the file it will be, as every start after the first does", () => {
    const link = join(dir, "early-link.db");
    symlinkSync("later/made.db", link); // relative: read from the link's folder
    mkdirSync(join(dir, "later"));
    const before = lockPathOf(link);
    expect(before).toBe(join(dir, "later", "made.db.locks"));
    writeFileSync(join(dir, "later", "made.db"), "");
    expect(lockPathOf(link)).toBe(before);
    // A database still to be made in a folder reached through a link: beside the real folder, as once made.
    symlinkSync(join(dir, "later"), join(dir, "later-alias"));
    expect(lockPathOf(join(dir, "later-alias", "next.db"))).toBe(join(dir, "later", "next.db.locks"));
  });
});

describe("holdServeLock", () => {
  test("a second server is refused with the caller's error at once, while the commands' shared locks go on; it may start once the first has let go", () => {
    const db = join(dir, "e.db");
    const errors = { alreadyServed: () => new Error("already served"), restoring: () => new Error("restoring") };
    const first = holdServeLock(db, errors);
    const command = holdOpenLock(db, () => new Error("restoring"), { waitMs: 0 });
    expect(command).not.toBeNull();
    const started = performance.now();
    expect(() => holdServeLock(db, errors)).toThrow("already served");
    expect(performance.now() - started).toBeLessThan(1_000); // not the restore's wait
    expect(locked(tryLock(lockPathOf(db), "exclusive"))).toBe("held"); // nor can a restore begin
    first.release();
    command!.release();
    holdServeLock(db, errors).release();
  });

  test("a server started while a restore holds the lock waits for it, then starts", async () => {
    const db = join(dir, "f.db");
    const other = await heldElsewhere(lockPathOf(db), "exclusive", 400);
    const lock = holdServeLock(db, { alreadyServed: () => new Error("already served"), restoring: () => new Error("restoring") });
    expect(Date.now()).toBeGreaterThanOrEqual(other.releaseAt); // started only once the other let go
    lock.release();
    await other.done;
  });
});
