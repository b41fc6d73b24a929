// The database layer: durable settings, migrations and their version check, group-committed writes,
// reads sharing one transaction per event-loop turn.
import { afterAll, describe, expect, test } from "bun:test";
import { Database } from "bun:sqlite";
import { chmodSync, existsSync, mkdirSync, readdirSync, readFileSync, realpathSync, rmSync, statSync } from "node:fs";
import { join } from "node:path";
import { openDatabase, WAL_CHECKPOINT_PAGES, type OpenOptions } from "./open.ts";
import { walIndexOf } from "./wal-index.ts";
import { joinSum, splitSum } from "./sum.ts";
import { migrate, SchemaTooNewError } from "./migrate.ts";
import { MIGRATIONS } from "./migrations.ts";
import { tempDir } from "../../test/helpers/server.ts";

const dir = tempDir();
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe("openDatabase", () => {
  test("a new database, its log and its shared memory are readable by their owner only, whatever the directory's mode", async () => {
    const open = join(dir, "open-dir");
    mkdirSync(open, { mode: 0o755 });
    chmodSync(open, 0o755);
    const path = join(open, "private.db");
    const db = openDatabase(path);
    await db.write(() => db.sqlite.run("CREATE TABLE t (x INTEGER) STRICT"));
    for (const file of [path, `${path}-wal`, `${path}-shm`]) expect({ file, mode: statSync(file).mode & 0o777 }).toEqual({ file, mode: 0o600 });
    db.close();
  });

  test("an existing database every user may read (an earlier version's, or copied in) loses those bits and group write, with its log; its group keeps read", async () => {
    for (const [given, kept] of [[0o644, 0o640], [0o606, 0o600], [0o640, 0o640], [0o664, 0o640]] as const) {
      const path = join(dir, `loose-${given.toString(8)}.db`);
      const first = openDatabase(path);
      await first.write(() => first.sqlite.run("CREATE TABLE t (x INTEGER) STRICT"));
      first.close();
      chmodSync(path, given);
      const db = openDatabase(path);
      await db.write(() => db.sqlite.run("INSERT INTO t VALUES (1)"));
      for (const file of [path, `${path}-wal`, `${path}-shm`]) expect({ file, mode: statSync(file).mode & 0o777 }).toEqual({ file, mode: kept });
      db.close();
    }
  });

  test("WAL and foreign keys on; FULL flushes the log itself (SQLite commits with NORMAL), EXTRA and NORMAL are SQLite's", () => {
    const db = openDatabase(join(dir, "a.db"));
    expect(db.sqlite.query("PRAGMA journal_mode").get()).toEqual({ journal_mode: "wal" });
    expect(db.sqlite.query("PRAGMA synchronous").get()).toEqual({ synchronous: 1 });
    expect(db.sqlite.query("PRAGMA foreign_keys").get()).toEqual({ foreign_keys: 1 });
    db.close();
    const extra = openDatabase(join(dir, "a.db"), { synchronous: "EXTRA" });
    expect(extra.sqlite.query("PRAGMA synchronous").get()).toEqual({ synchronous: 3 });
    extra.close();
  });

  test("the log is checkpointed at WAL_CHECKPOINT_PAGES pages, not SQLite's 1,000: it grows past 1,000 and wraps near the limit", async () => {
    const path = join(dir, "checkpoint.db");
    const db = openDatabase(path);
    db.sqlite.run("CREATE TABLE blobs (id INTEGER PRIMARY KEY, body BLOB NOT NULL) STRICT");
    const pageSize = (db.sqlite.query("PRAGMA page_size").get() as { page_size: number }).page_size;
    const framesOf = () => Math.max(0, (statSync(`${path}-wal`).size - 32) / (pageSize + 24));
    for (let commit = 0; commit < 200; commit++) {
      // ~30 pages a commit, 6,000 in all: one and a half times the limit
      await db.write(() => {
        for (let i = 0; i < 30; i++) db.sqlite.query("INSERT INTO blobs (body) VALUES (?)").run(new Uint8Array(pageSize - 100));
      });
    }
    // The file keeps its largest size when the log restarts from its beginning: with SQLite's default
    // it would stay near 1,000 frames; without checkpoints it would hold all 6,000 pages.
    expect(framesOf()).toBeGreaterThan(2 * 1_000);
    expect(framesOf()).toBeLessThanOrEqual(WAL_CHECKPOINT_PAGES + 2 * 40);
    expect((db.sqlite.query("SELECT COUNT(*) AS n FROM blobs").get() as { n: number }).n).toBe(6_000);
    db.close();
  });
});

describe("durable commits (FULL)", () => {
  /** A stand-in for fsync that finishes only when the test says so. */
  function manualSync() {
    const pending: { fd: number; done: (err: Error | null) => void }[] = [];
    return {
      pending,
      syncFile: (fd: number, done: (err: Error | null) => void) => void pending.push({ fd, done }),
      finish(err: Error | null = null) {
        pending.shift()!.done(err);
      },
    };
  }
  const settled = (p: Promise<unknown>) => {
    let state = "pending";
    p.then(
      () => (state = "resolved"),
      () => (state = "rejected"),
    );
    return () => state;
  };
  const nextTurn = () => new Promise((r) => setImmediate(r));

  test("a write is answered only after a flush of the log that began after its commit; commits during a flush share the next", async () => {
    const sync = manualSync();
    const db = openDatabase(join(dir, "d.db"), { syncFile: sync.syncFile });
    db.sqlite.run("CREATE TABLE t (k INTEGER PRIMARY KEY) STRICT");
    const first = settled(db.write(() => db.sqlite.query("INSERT INTO t VALUES (1)").run()));
    await nextTurn(); // committed (another connection sees it), not yet flushed
    const reader = openDatabase(join(dir, "d.db"));
    expect(reader.sqlite.query("SELECT COUNT(*) AS n FROM t").get()).toEqual({ n: 1 });
    expect(sync.pending.length).toBe(1);
    expect(first()).toBe("pending");
    const second = settled(db.write(() => db.sqlite.query("INSERT INTO t VALUES (2)").run()));
    await nextTurn();
    const third = settled(db.write(() => db.sqlite.query("INSERT INTO t VALUES (3)").run()));
    await nextTurn();
    expect(sync.pending.length).toBe(1); // one flush at a time
    sync.finish();
    await nextTurn();
    expect(first()).toBe("resolved");
    expect([second(), third()]).toEqual(["pending", "pending"]); // committed while that flush ran
    expect(sync.pending.length).toBe(1); // both share the next one
    sync.finish();
    await nextTurn();
    expect([second(), third()]).toEqual(["resolved", "resolved"]);
    reader.close();
    db.close();
  });

  test("a batch that changed no row has no flush of its own: answered at once, or with the flush of earlier commits", async () => {
    const sync = manualSync();
    const db = openDatabase(join(dir, "nochange.db"), { syncFile: sync.syncFile });
    db.sqlite.run("CREATE TABLE t (k INTEGER PRIMARY KEY) STRICT");
    const nothing = () => db.write(() => db.sqlite.query("DELETE FROM t WHERE k = 99").run()); // a poll finding nothing
    const insert = (k: number) => db.write(() => db.sqlite.query("INSERT INTO t VALUES (?)").run(k));

    // A connection's first batch flushes: it cannot know whether what others committed before it is on disk.
    const first0 = settled(nothing());
    await nextTurn();
    expect([first0(), sync.pending.length]).toEqual(["pending", 1]);
    sync.finish();
    await nextTurn();
    expect(first0()).toBe("resolved");

    // Then nothing committed waits for a flush: answered at once, and nothing is flushed.
    const idle = settled(nothing());
    await nextTurn();
    expect([idle(), sync.pending.length]).toEqual(["resolved", 0]);

    // During the flush of an earlier commit, it waits for that flush (what it read may be that commit's), and adds none.
    const first = settled(insert(1));
    await nextTurn();
    const during = settled(nothing());
    await nextTurn();
    expect([first(), during(), sync.pending.length]).toEqual(["pending", "pending", 1]);
    sync.finish();
    await nextTurn();
    expect([first(), during(), sync.pending.length]).toEqual(["resolved", "resolved", 0]);

    // With a commit waiting for the next flush, it waits for that one too.
    const second = settled(insert(2));
    await nextTurn();
    const third = settled(insert(3));
    await nextTurn();
    const afterThird = settled(nothing());
    await nextTurn();
    sync.finish(); // the second's
    await nextTurn();
    expect([second(), third(), afterThird(), sync.pending.length]).toEqual(["resolved", "pending", "pending", 1]);
    sync.finish(); // the third's
    await nextTurn();
    expect([third(), afterThird(), sync.pending.length]).toEqual(["resolved", "resolved", 0]);

    // After a failed flush it is refused, as every write is.
    const lost = insert(4);
    await nextTurn();
    sync.finish(new Error("EIO: i/o error, fsync"));
    await expect(lost).rejects.toThrow("EIO");
    await expect(nothing()).rejects.toThrow();
    db.close();
  });

  test("a batch that changed no row still flushes when another connection committed since (what it read may be theirs)", async () => {
    const sync = manualSync();
    const db = openDatabase(join(dir, "others.db"), { syncFile: sync.syncFile });
    db.sqlite.run("CREATE TABLE t (k INTEGER PRIMARY KEY) STRICT");
    // The other writer (`walletgate mcp`, a CLI command): committed, its own flush not finished.
    const other = openDatabase(join(dir, "others.db"), { syncFile: manualSync().syncFile });
    const theirs = settled(other.write(() => other.sqlite.query("INSERT INTO t VALUES (1)").run()));
    await nextTurn();
    expect(theirs()).toBe("pending");

    // This connection reads their row and settles: answered only after a flush of the log that began after it.
    expect(db.read(() => db.sqlite.query("SELECT COUNT(*) AS n FROM t").get())).toEqual({ n: 1 });
    const barrier = settled(db.settled());
    await nextTurn();
    expect([barrier(), sync.pending.length]).toEqual(["pending", 1]);
    sync.finish();
    await nextTurn();
    expect(barrier()).toBe("resolved");

    // Once flushed, an idle batch flushes nothing again.
    const idle = settled(db.settled());
    await nextTurn();
    expect([idle(), sync.pending.length]).toEqual(["resolved", 0]);
    other.close();
    db.close();
  });

  test("settled() resolves only once the writes made so far are flushed, and rejects with their batch", async () => {
    const sync = manualSync();
    const db = openDatabase(join(dir, "settled.db"), { syncFile: sync.syncFile });
    db.sqlite.run("CREATE TABLE t (k INTEGER PRIMARY KEY) STRICT");
    const write = settled(db.write(() => db.sqlite.query("INSERT INTO t VALUES (1)").run()));
    expect(db.read(() => db.sqlite.query("SELECT COUNT(*) AS n FROM t").get())).toEqual({ n: 1 }); // seen before it is durable
    const barrier = settled(db.settled());
    await nextTurn();
    expect([write(), barrier()]).toEqual(["pending", "pending"]);
    sync.finish();
    await nextTurn();
    expect([write(), barrier()]).toEqual(["resolved", "resolved"]);
    const lost = db.write(() => db.sqlite.query("INSERT INTO t VALUES (2)").run());
    const lostBarrier = db.settled();
    await nextTurn();
    sync.finish(new Error("EIO: i/o error, fsync"));
    await expect(lost).rejects.toThrow("EIO");
    await expect(lostBarrier).rejects.toThrow("EIO");
    db.close();
  });

  test("settled() rejects when SQLite has already rolled the batch back, as the batch's writers hear", async () => {
    const db = openDatabase(join(dir, "settled-lost.db"), { syncFile: manualSync().syncFile });
    db.sqlite.run("CREATE TABLE t (k INTEGER PRIMARY KEY) STRICT");
    const lost = db.write(() => db.sqlite.query("INSERT INTO t VALUES (1)").run());
    db.sqlite.run("ROLLBACK"); // what SQLite does to the whole transaction after some I/O errors
    await expect(db.settled()).rejects.toThrow("rolled back");
    await expect(lost).rejects.toThrow("rolled back");
    db.close();
  });

  test("a failed flush tells the batch's writers, and from then on writes are refused and readiness fails", async () => {
    const sync = manualSync();
    const db = openDatabase(join(dir, "e.db"), { syncFile: sync.syncFile });
    db.sqlite.run("CREATE TABLE t (k INTEGER PRIMARY KEY) STRICT");
    const lost = db.write(() => db.sqlite.query("INSERT INTO t VALUES (1)").run());
    await nextTurn();
    expect(db.ping()).toBe(true);
    sync.finish(new Error("EIO: i/o error, fsync"));
    await expect(lost).rejects.toThrow("EIO");
    // After a failed fsync nothing later can be promised durable: refused, not acknowledged.
    await expect(db.write(() => db.sqlite.query("INSERT INTO t VALUES (2)").run())).rejects.toThrow("refused until restart");
    expect(db.ping()).toBe(false);
    db.close();
  });

  test("after a failed flush, writes committed during it or in its turn are refused, though a later flush of the file succeeds", async () => {
    const sync = manualSync();
    const db = openDatabase(join(dir, "e2.db"), { syncFile: sync.syncFile });
    db.sqlite.run("CREATE TABLE t (k INTEGER PRIMARY KEY) STRICT");
    const a = settled(db.write(() => db.sqlite.query("INSERT INTO t VALUES (1)").run()));
    await nextTurn();
    const b = settled(db.write(() => db.sqlite.query("INSERT INTO t VALUES (2)").run())); // queued behind A's flush
    await nextTurn();
    sync.finish(new Error("EIO: i/o error, fsync")); // the kernel tells one flush of the loss, once
    const c = settled(db.write(() => db.sqlite.query("INSERT INTO t VALUES (3)").run())); // in the failure's turn
    await nextTurn();
    while (sync.pending.length > 0) sync.finish(); // any later flush of the file would succeed
    await nextTurn();
    expect([a(), b(), c()]).toEqual(["rejected", "rejected", "rejected"]);
    expect(db.ping()).toBe(false);
    db.close();
  });

  test("closing while a flush runs: what the closing flush covered is answered only once that flush reports", async () => {
    const sync = manualSync();
    const db = openDatabase(join(dir, "e3.db"), { syncFile: sync.syncFile });
    db.sqlite.run("CREATE TABLE t (k INTEGER PRIMARY KEY) STRICT");
    const a = settled(db.write(() => db.sqlite.query("INSERT INTO t VALUES (1)").run()));
    await nextTurn();
    const b = settled(db.write(() => db.sqlite.query("INSERT INTO t VALUES (2)").run()));
    await nextTurn();
    db.close(); // flushes B on this thread while A's flush is still out
    await nextTurn();
    expect([a(), b()]).toEqual(["pending", "pending"]);
    sync.finish(new Error("EIO: i/o error, fsync"));
    await nextTurn();
    expect([a(), b()]).toEqual(["rejected", "rejected"]);
  });

  test("closing while a flush runs, when the closing flush is the one told of a loss: both flushes' writers hear it", async () => {
    const sync = manualSync();
    let failNow = false;
    const syncFileNow = () => {
      if (failNow) throw new Error("EIO: i/o error, fsync");
    };
    const db = openDatabase(join(dir, "e4.db"), { syncFile: sync.syncFile, syncFileNow });
    db.sqlite.run("CREATE TABLE t (k INTEGER PRIMARY KEY) STRICT");
    const a = settled(db.write(() => db.sqlite.query("INSERT INTO t VALUES (1)").run()));
    await nextTurn();
    const b = settled(db.write(() => db.sqlite.query("INSERT INTO t VALUES (2)").run()));
    failNow = true;
    db.close();
    await nextTurn();
    sync.finish(); // the pool's flush was not told
    await nextTurn();
    expect([a(), b()]).toEqual(["rejected", "rejected"]);
  });

  test("a database reached through a symlink flushes the log SQLite writes (beside the real file)", async () => {
    const { symlinkSync, mkdirSync } = await import("node:fs");
    mkdirSync(join(dir, "real"), { recursive: true });
    const real = openDatabase(join(dir, "real", "s.db"));
    real.close();
    symlinkSync(join(dir, "real", "s.db"), join(dir, "link.db"));
    const db = openDatabase(join(dir, "link.db"));
    db.sqlite.run("CREATE TABLE t (k INTEGER PRIMARY KEY) STRICT");
    await db.write(() => db.sqlite.query("INSERT INTO t VALUES (1)").run());
    expect(db.ping()).toBe(true);
    db.close();
  });

  test("a symlinked database not made yet is made where the links lead, for its owner only; the links stay", async () => {
    const { lstatSync, symlinkSync } = await import("node:fs");
    mkdirSync(join(dir, "volume"), { recursive: true });
    symlinkSync(join(dir, "volume", "wg.db"), join(dir, "hop.db"));
    symlinkSync("hop.db", join(dir, "first.db")); // a chain, the second relative
    const db = openDatabase(join(dir, "first.db"));
    db.sqlite.run("CREATE TABLE t (k INTEGER PRIMARY KEY) STRICT");
    await db.write(() => db.sqlite.query("INSERT INTO t VALUES (1)").run());
    db.close();
    expect(statSync(join(dir, "volume", "wg.db")).mode & 0o777).toBe(0o600);
    expect(lstatSync(join(dir, "first.db")).isSymbolicLink()).toBe(true);
    expect(lstatSync(join(dir, "hop.db")).isSymbolicLink()).toBe(true);
    const again = openDatabase(join(dir, "volume", "wg.db"), { readOnlyUse: true });
    expect(again.sqlite.query("SELECT k FROM t").all()).toEqual([{ k: 1 }]);
    again.close();
  });

  test("a relative link's \"..\" is read from the folder the link really is in, as the kernel does (a DATA_DIR reached through a link)", async () => {
    const { existsSync, symlinkSync } = await import("node:fs");
    const { lockPathOf } = await import("./file-lock.ts");
    mkdirSync(join(dir, "phys", "wg"), { recursive: true });
    mkdirSync(join(dir, "phys", "vol"));
    mkdirSync(join(dir, "elsewhere", "vol"), { recursive: true }); // where a textual ".." would lead
    symlinkSync(join(dir, "phys", "wg"), join(dir, "elsewhere", "wg"));
    symlinkSync("../vol/wg.db", join(dir, "phys", "wg", "walletgate.db"));
    const named = join(dir, "elsewhere", "wg", "walletgate.db");
    const lockBefore = lockPathOf(named);
    const db = openDatabase(named);
    db.close();
    expect(statSync(join(dir, "phys", "vol", "wg.db")).mode & 0o777).toBe(0o600);
    expect(existsSync(join(dir, "elsewhere", "vol", "wg.db"))).toBe(false);
    expect(lockBefore).toBe(`${realpathSync(join(dir, "phys", "vol", "wg.db"))}.locks`);
    expect(lockPathOf(named)).toBe(lockBefore);
  });

  test("the log beside a symlinked database's file loses what others may read, as the file's own does", async () => {
    const { symlinkSync } = await import("node:fs");
    mkdirSync(join(dir, "shared-vol"), { recursive: true });
    const real = join(dir, "shared-vol", "w.db");
    // Another connection keeps a log with frames in it (closing the last one would delete it).
    const other = new Database(real);
    other.run("PRAGMA journal_mode = WAL");
    other.run("CREATE TABLE t (k INTEGER PRIMARY KEY) STRICT");
    chmodSync(real, 0o600);
    chmodSync(`${real}-wal`, 0o666);
    symlinkSync(real, join(dir, "shared-link.db"));
    const db = openDatabase(join(dir, "shared-link.db"));
    expect(statSync(`${real}-wal`).mode & 0o777).toBe(0o640);
    db.close();
    other.close();
  });

  test("closing flushes on the spot; what it covered is answered once an earlier flush still out has reported too", async () => {
    const sync = manualSync();
    const db = openDatabase(join(dir, "f.db"), { syncFile: sync.syncFile });
    db.sqlite.run("CREATE TABLE t (k INTEGER PRIMARY KEY) STRICT");
    const running = settled(db.write(() => db.sqlite.query("INSERT INTO t VALUES (1)").run()));
    await nextTurn();
    const waiting = settled(db.write(() => db.sqlite.query("INSERT INTO t VALUES (2)").run()));
    db.close(); // commits the open batch, flushes with fsync on this thread
    await nextTurn();
    // The earlier flush is still out (the file stays open for it), and may yet report a loss the flush on
    // this thread was not told of: both wait for it.
    expect([running(), waiting()]).toEqual(["pending", "pending"]);
    sync.finish();
    await nextTurn();
    expect([running(), waiting()]).toEqual(["resolved", "resolved"]);
  });
});

describe("migrate", () => {
  test("applies every migration once, in order, and records the version", () => {
    const db = openDatabase(join(dir, "m.db"));
    const first = migrate(db.sqlite, 1);
    expect(first.applied).toEqual(MIGRATIONS.map((m) => m.version));
    expect(migrate(db.sqlite, 2).applied).toEqual([]);
    const tables = db.sqlite.query("SELECT name FROM sqlite_master WHERE type = 'table'").all().map((r: any) => r.name);
    expect(tables).toContain("auth_tokens");
    db.close();
  });

  test("a migration numbered below the newest applied one is still applied (side-by-side work landing late)", () => {
    const db = openDatabase(":memory:");
    const a = { version: 1, name: "a", sql: "CREATE TABLE a (x INTEGER) STRICT" };
    const c = { version: 3, name: "c", sql: "CREATE TABLE c (x INTEGER) STRICT" };
    const b = { version: 2, name: "b", sql: "CREATE TABLE b (x INTEGER) STRICT" };
    expect(migrate(db.sqlite, 1, [a, c]).applied).toEqual([1, 3]);
    expect(migrate(db.sqlite, 2, [a, b, c])).toEqual({ applied: [2], version: 3 });
    expect(migrate(db.sqlite, 3, [a, b, c]).applied).toEqual([]);
    db.close();
  });

  test("tables are STRICT: a text in an integer column is refused", () => {
    const db = openDatabase(":memory:");
    migrate(db.sqlite, 1);
    expect(() =>
      db.sqlite.query("INSERT INTO auth_challenges (nonce, wallet, message, issued_at, expires_at) VALUES ('n','w','m','soon',1)").run(),
    ).toThrow();
    db.close();
  });

  test("a database newer than the program is refused with a clear message", () => {
    const db = openDatabase(join(dir, "new.db"));
    migrate(db.sqlite, 1);
    db.sqlite.query("INSERT INTO schema_migrations (version, name, applied_at) VALUES (999, 'future', 1)").run();
    expect(() => migrate(db.sqlite, 2)).toThrow(SchemaTooNewError);
    expect(() => migrate(db.sqlite, 2)).toThrow(/version 999/);
    db.close();
  });

  test("a failing migration leaves nothing half-applied", () => {
    const db = openDatabase(":memory:");
    const bad = [...MIGRATIONS, { version: 2, name: "broken", sql: "CREATE TABLE ok_table (x INTEGER) STRICT; CREATE TABLE nope (" }];
    expect(() => migrate(db.sqlite, 1, bad)).toThrow();
    const tables = db.sqlite.query("SELECT name FROM sqlite_master WHERE type = 'table'").all().map((r: any) => r.name);
    expect(tables).not.toContain("ok_table");
    expect(tables).not.toContain("auth_tokens");
    db.close();
  });
});

describe("group commit", () => {
  test("writes of one turn share a commit and resolve only after it; a failing write does not sink the others", async () => {
    const path = join(dir, "g.db");
    const db = openDatabase(path);
    db.sqlite.run("CREATE TABLE t (k INTEGER PRIMARY KEY, v TEXT NOT NULL) STRICT");
    const ok1 = db.write(() => db.sqlite.query("INSERT INTO t VALUES (1, 'a')").run());
    const dup = db.write(() => {
      db.sqlite.query("INSERT INTO t VALUES (2, 'b')").run();
      db.sqlite.query("INSERT INTO t VALUES (1, 'dup')").run(); // fails: all of this write rolls back
    }).then(
      () => "ok",
      (err) => err.code,
    );
    const ok2 = db.write(() => db.sqlite.query("INSERT INTO t VALUES (3, 'c')").run());
    // not yet committed: another connection sees nothing
    const reader = openDatabase(path);
    expect(reader.sqlite.query("SELECT COUNT(*) AS n FROM t").get()).toEqual({ n: 0 });
    await ok1;
    await ok2;
    expect(await dup).toBe("SQLITE_CONSTRAINT_PRIMARYKEY");
    expect(reader.sqlite.query("SELECT k FROM t ORDER BY k").all()).toEqual([{ k: 1 }, { k: 3 }]);
    reader.close();
    db.close();
  });

  test("writes return their value", async () => {
    const db = openDatabase(":memory:");
    db.sqlite.run("CREATE TABLE t (k INTEGER PRIMARY KEY) STRICT");
    expect(await db.write(() => db.sqlite.query("INSERT INTO t VALUES (7) RETURNING k").get())).toEqual({ k: 7 });
    db.close();
  });
});

describe("reads of a turn", () => {
  const nextTurn = () => new Promise((r) => setImmediate(r));
  /** A database with a table `t`, and a second connection to it (another process, as far as locks go). */
  function twoConnections(name: string, other: OpenOptions = {}) {
    const path = join(dir, name);
    const db = openDatabase(path);
    db.sqlite.run("CREATE TABLE t (k INTEGER PRIMARY KEY) STRICT");
    return { db, other: openDatabase(path, other) };
  }

  test("share one snapshot; another connection's commit shows from the next turn on", async () => {
    const { db, other } = twoConnections("r.db");
    const count = () => db.read(() => (db.sqlite.query("SELECT COUNT(*) AS n FROM t").get() as { n: number }).n);
    expect(count()).toBe(0);
    expect(db.sqlite.inTransaction).toBe(true);
    other.sqlite.run("INSERT INTO t VALUES (1)"); // commits at once (no batch)
    expect(count()).toBe(0); // same turn, same snapshot
    await nextTurn();
    expect(db.sqlite.inTransaction).toBe(false); // the snapshot and its lock are dropped at the end of the turn
    expect(count()).toBe(1);
    other.close();
    db.close();
  });

  test("a write in a turn that read takes a fresh write transaction and commits; later reads see it", async () => {
    const { db, other } = twoConnections("rw.db");
    expect(db.read(() => db.sqlite.query("SELECT COUNT(*) AS n FROM t").get())).toEqual({ n: 0 });
    other.sqlite.run("INSERT INTO t VALUES (1)"); // after our snapshot: a write must not be based on it
    const written = db.write(() => db.sqlite.query("INSERT INTO t SELECT MAX(k) + 1 FROM t RETURNING k").get());
    expect(db.read(() => db.sqlite.query("SELECT COUNT(*) AS n FROM t").get())).toEqual({ n: 2 });
    expect(await written).toEqual({ k: 2 });
    expect(other.sqlite.query("SELECT k FROM t ORDER BY k").all()).toEqual([{ k: 1 }, { k: 2 }]);
    other.close();
    db.close();
  });

  test("endReads drops the snapshot at once: the next request sees another process's commit in the same turn", () => {
    const { db, other } = twoConnections("re.db");
    const count = () => db.read(() => (db.sqlite.query("SELECT COUNT(*) AS n FROM t").get() as { n: number }).n);
    expect(count()).toBe(0);
    other.sqlite.run("INSERT INTO t VALUES (1)");
    expect(count()).toBe(0);
    db.endReads(); // the server does this as each request arrives
    expect(count()).toBe(1);
    other.close();
    db.close();
  });

  test("endReads keeps the snapshot while nothing was committed, and drops it after any commit", async () => {
    const { db, other } = twoConnections("rk.db");
    const count = () => db.read(() => (db.sqlite.query("SELECT COUNT(*) AS n FROM t").get() as { n: number }).n);
    db.endReads(); // the first request: the WAL index is mapped just after it
    await Bun.sleep(1);
    expect(count()).toBe(0);
    db.endReads();
    expect(db.sqlite.inTransaction).toBe(true); // nothing changed: the snapshot is as new as a fresh one
    other.sqlite.run("INSERT INTO t VALUES (1)"); // commits at once, in this turn (the turn's end would drop it too)
    expect([count(), db.sqlite.inTransaction]).toEqual([0, true]);
    db.endReads();
    expect(db.sqlite.inTransaction).toBe(false);
    expect(count()).toBe(1);
    other.close();
    db.close();
  });

  test("a commit by another process ends the snapshot at the next endReads", () => {
    const path = join(dir, "rp.db");
    const db = openDatabase(path);
    db.sqlite.run("CREATE TABLE t (k INTEGER PRIMARY KEY) STRICT");
    db.cache("probe", 1); // the WAL index is watched from here on
    const count = () => db.read(() => (db.sqlite.query("SELECT COUNT(*) AS n FROM t").get() as { n: number }).n);
    expect(count()).toBe(0);
    db.endReads();
    expect(db.sqlite.inTransaction).toBe(true); // nothing committed since: kept
    insertFromAnotherProcessNow(path, 7); // all in this turn: only endReads can end the snapshot
    expect(count()).toBe(0);
    db.endReads();
    expect(db.sqlite.inTransaction).toBe(false);
    expect(count()).toBe(1);
    db.close();
  });

  test("a read never blocks another process's writes, and closing ends it", async () => {
    const { db, other } = twoConnections("rc.db", { busyTimeoutMs: 50 });
    db.read(() => db.sqlite.query("SELECT COUNT(*) FROM t").get());
    await other.write(() => other.sqlite.query("INSERT INTO t VALUES (5)").run());
    db.close();
    expect(other.sqlite.query("SELECT k FROM t").all()).toEqual([{ k: 5 }]);
    other.close();
  });
});

/** Inserts k into t from a separate process (its own SQLite, its own mapping of the WAL index). */
const insertScript = (k: number) => `const { Database } = require("bun:sqlite"); new Database(process.argv[1]).run("INSERT INTO t VALUES (${k})");`;
async function insertFromAnotherProcess(path: string, k: number): Promise<void> {
  const child = Bun.spawn([process.execPath, "-e", insertScript(k), path], { stderr: "pipe" });
  if ((await child.exited) !== 0) throw new Error(await new Response(child.stderr).text());
}
/** The same, waiting without leaving the current turn (so nothing that runs at a turn's end runs). */
function insertFromAnotherProcessNow(path: string, k: number): void {
  const child = Bun.spawnSync([process.execPath, "-e", insertScript(k), path], { stderr: "pipe" });
  if (child.exitCode !== 0) throw new Error(child.stderr.toString());
}

describe("read caches", () => {
  function table(name: string) {
    const path = join(dir, name);
    const db = openDatabase(path);
    db.sqlite.run("CREATE TABLE t (k INTEGER PRIMARY KEY) STRICT");
    let loads = 0;
    const count = () =>
      db.cache<number>("count", 10).get("all", () => {
        loads++;
        return db.read(() => (db.sqlite.query("SELECT COUNT(*) AS n FROM t").get() as { n: number }).n);
      });
    return { db, path, count, loads: () => loads };
  }

  test("a value is kept until a commit of this process, then read again", async () => {
    const { db, count, loads } = table("c1.db");
    expect([count(), count(), loads()]).toEqual([0, 0, 1]);
    expect(db.cache<number>("count", 10)).toBe(db.cache<number>("count", 10)); // one cache per name
    await db.write(() => db.sqlite.run("INSERT INTO t VALUES (1)"));
    expect([count(), count(), loads()]).toEqual([1, 1, 2]);
    db.close();
  });

  test("a commit by another process is seen by the next lookup (a key revoked by the CLI)", async () => {
    const { db, path, count, loads } = table("c2.db");
    expect(count()).toBe(0);
    await insertFromAnotherProcess(path, 1);
    expect(count()).toBe(1);
    await insertFromAnotherProcess(path, 2);
    db.endReads(); // as a request arrives; the lookup alone would see it too
    expect([count(), loads()]).toEqual([2, 3]);
    db.close();
  });

  test("a value read inside a write batch that commits is read again after the commit", async () => {
    const { db, count, loads } = table("c3.db");
    const inBatch = db.write(() => {
      db.sqlite.run("INSERT INTO t VALUES (1)");
      return count(); // sees its own uncommitted row
    });
    expect(await inBatch).toBe(1);
    expect([count(), loads()]).toEqual([1, 2]); // committed now: read again, then kept
    expect(loads()).toBe(2);
    db.close();
  });

  test("a value read in a batch whose commit fails is not kept (nothing was committed to say it is stale)", async () => {
    const { db, count, loads } = table("c5.db");
    db.sqlite.run("CREATE TABLE c (id INTEGER PRIMARY KEY, p INTEGER NOT NULL REFERENCES t(k) DEFERRABLE INITIALLY DEFERRED) STRICT");
    const lost = db.write(() => {
      db.sqlite.run("INSERT INTO t VALUES (1)");
      db.sqlite.run("INSERT INTO c VALUES (1, 99)"); // refused only at COMMIT
      return count(); // sees its own row, which is never committed
    });
    expect(await lost.then(String, () => "rejected")).toBe("rejected");
    expect([count(), count(), loads()]).toEqual([0, 0, 2]);
    db.close();
  });

  test("at most maxEntries values, the oldest dropped first; null is a value", () => {
    const path = join(dir, "c4.db");
    const db = openDatabase(path);
    let loads = 0;
    const cache = db.cache<string | null>("bounded", 2);
    const get = (k: string) => cache.get(k, () => (loads++, k === "none" ? null : k));
    expect([get("a"), get("b"), get("none"), loads]).toEqual(["a", "b", null, 3]);
    expect([get("none"), get("b"), loads]).toEqual([null, "b", 3]);
    expect([get("a"), loads]).toEqual(["a", 4]); // "a" was dropped when "none" came in
    db.close();
  });

  test("an in-memory database keeps nothing (no WAL index to watch)", () => {
    const db = openDatabase(":memory:");
    let loads = 0;
    const cache = db.cache<number>("m", 10);
    cache.get("x", () => ++loads);
    cache.get("x", () => ++loads);
    expect(loads).toBe(2);
    db.close();
  });
});

describe("watching the WAL index leaves SQLite's locks alone", () => {
  /** The POSIX locks this process holds on `file` (Linux /proc/locks: "id: POSIX ADVISORY READ pid maj:min:inode start end"). */
  function ownLocks(inode: number): string[] {
    return readFileSync("/proc/locks", "utf8")
      .split("\n")
      .map((line) => line.split(/\s+/))
      .filter((f) => f[1] === "POSIX" && f[4] === String(process.pid) && f[5]?.split(":")[2] === String(inode))
      .map((f) => `${f[3]} ${f[6]}-${f[7]}`);
  }
  const linux = existsSync("/proc/locks");

  test.if(linux)("mapping the index keeps SQLite's lock on it (the lock that tells other processes it is in use)", () => {
    const path = join(dir, "lk.db");
    const db = openDatabase(path);
    db.sqlite.run("CREATE TABLE t (k INTEGER PRIMARY KEY) STRICT");
    const shm = statSync(`${path}-shm`).ino;
    const before = ownLocks(shm);
    expect(before).toContain("READ 128-128"); // SQLite's "in use" byte of the WAL index
    db.cache("probe", 1); // the first lookup maps the index
    expect(ownLocks(shm)).toEqual(before);
    const other = openDatabase(path); // a second database here shares the mapping
    other.cache("probe", 1);
    other.close(); // and closing it keeps the mapping's descriptor (and so the lock) for the first one
    expect(ownLocks(shm)).toEqual(before);
    db.close(); // the last connection here: SQLite lets go, and so does the mapping
    expect(ownLocks(shm)).toEqual([]);
  });

  test.if(linux)("a database that never watched keeps the lock when one that did is closed", async () => {
    const path = join(dir, "lk5.db");
    const a = openDatabase(path);
    a.sqlite.run("CREATE TABLE t (k INTEGER PRIMARY KEY) STRICT");
    const b = openDatabase(path); // open, never looks up anything
    const shm = statSync(`${path}-shm`).ino;
    const before = ownLocks(shm);
    a.cache("probe", 1); // maps the index
    a.close();
    expect(ownLocks(shm)).toEqual(before); // b's connection still holds SQLite's lock
    await insertFromAnotherProcess(path, 1);
    expect(statSync(`${path}-shm`).ino).toBe(shm);
    expect(b.sqlite.query("SELECT COUNT(*) AS n FROM t").get()).toEqual({ n: 1 });
    b.close();
    expect(ownLocks(shm)).toEqual([]);
  });

  test.if(linux)("closing a database that never watched leaves the one watching with its mapping and SQLite's lock", async () => {
    const path = join(dir, "lk7.db");
    const a = openDatabase(path);
    a.sqlite.run("CREATE TABLE t (k INTEGER PRIMARY KEY) STRICT");
    let loads = 0;
    const count = () => a.cache<number>("count", 1).get("n", () => (loads++, a.read(() => (a.sqlite.query("SELECT COUNT(*) AS n FROM t").get() as { n: number }).n)));
    expect(count()).toBe(0); // maps the index
    const b = openDatabase(path); // open, never looks up anything
    b.sqlite.query("SELECT 1").get();
    const shm = statSync(`${path}-shm`).ino;
    const before = ownLocks(shm);
    b.close();
    expect(ownLocks(shm)).toEqual(before);
    await Bun.sleep(1);
    expect([count(), loads]).toEqual([0, 1]); // still watching: nothing committed, nothing read again
    await insertFromAnotherProcess(path, 1);
    expect([count(), loads]).toEqual([1, 2]);
    a.close();
    expect(ownLocks(shm)).toEqual([]);
  });

  test.if(linux)("a new database file that reuses a lost one's inode number is watched on its own", async () => {
    // A database collected without close() leaves its entry behind (here: one taken and never released);
    // ext4 hands the freed inode number to the next file created, which must not share that entry.
    const old = join(dir, "gone.db");
    const db0 = openDatabase(old);
    db0.sqlite.run("CREATE TABLE t (k INTEGER PRIMARY KEY) STRICT");
    walIndexOf(realpathSync(old)).watch(); // never released
    const { ino } = statSync(old);
    db0.close();
    for (const suffix of ["", "-wal", "-shm"]) rmSync(old + suffix, { force: true });
    let path = "";
    for (let i = 0; i < 20; i++) {
      path = join(dir, `reuse-${i}.db`);
      openDatabase(path).close();
      if (statSync(path).ino === ino) break;
      for (const suffix of ["", "-wal", "-shm"]) rmSync(path + suffix, { force: true });
    }
    const db = openDatabase(path);
    db.sqlite.run("CREATE TABLE IF NOT EXISTS t (k INTEGER PRIMARY KEY) STRICT");
    const count = () => db.cache<number>("count", 1).get("n", () => db.read(() => (db.sqlite.query("SELECT COUNT(*) AS n FROM t").get() as { n: number }).n));
    expect(count()).toBe(0);
    await insertFromAnotherProcess(path, 1);
    expect(count()).toBe(1);
    db.close();
  });

  test.if(linux)("a close SQLite only defers (a statement still live) keeps the index's descriptor and SQLite's lock", () => {
    const path = join(dir, "lk6.db");
    const db = openDatabase(path);
    db.sqlite.run("CREATE TABLE t (k INTEGER PRIMARY KEY) STRICT");
    const live = db.sqlite.prepare("SELECT k FROM t"); // not finalized: SQLite defers the close
    const shm = statSync(`${path}-shm`).ino;
    const before = ownLocks(shm);
    db.cache("probe", 1);
    db.close();
    expect(ownLocks(shm)).toEqual(before);
    live.finalize();
  });

  test("another process writing the database while it is watched is seen at the next lookup; the index file stays the same", async () => {
    const path = join(dir, "lk2.db");
    const db = openDatabase(path);
    db.sqlite.run("CREATE TABLE t (k INTEGER PRIMARY KEY) STRICT");
    const count = () =>
      db.cache<number>("count", 1).get("n", () => db.read(() => (db.sqlite.query("SELECT COUNT(*) AS n FROM t").get() as { n: number }).n));
    expect(count()).toBe(0);
    const shm = statSync(`${path}-shm`);
    for (let k = 1; k <= 3; k++) {
      await insertFromAnotherProcess(path, k); // as a CLI command does: open, write, close
      db.endReads();
      expect(count()).toBe(k);
    }
    expect(statSync(`${path}-shm`)).toMatchObject({ ino: shm.ino, size: shm.size });
    db.close();
  });

  test.if(linux)("a database closed before the index is mapped (endReads maps it a moment later) stays closed", async () => {
    const db = openDatabase(join(dir, "lk4.db"));
    db.sqlite.run("CREATE TABLE t (k INTEGER PRIMARY KEY) STRICT");
    const openFds = () => readdirSync("/proc/self/fd").length;
    db.endReads();
    db.close();
    const after = openFds();
    await Bun.sleep(5);
    expect(openFds()).toBe(after); // nothing opened by the late mapping
  });

  test.if(linux)("closing every database here lets go of the index's descriptor", () => {
    const path = join(dir, "lk3.db");
    const openFds = () => readdirSync("/proc/self/fd").length;
    const db = openDatabase(path);
    db.sqlite.run("CREATE TABLE t (k INTEGER PRIMARY KEY) STRICT");
    const before = openFds();
    db.cache("probe", 1);
    expect(openFds()).toBe(before + 1);
    db.close();
    const again = openDatabase(path);
    again.cache("probe", 1);
    again.close();
    expect(openFds()).toBeLessThan(before);
  });
});

describe("group commit under failure", () => {
  test("when SQLite rolls back the whole batch (disk full), no write of it reports success or lands half", async () => {
    const path = join(dir, "full.db");
    const db = openDatabase(path);
    db.sqlite.run("CREATE TABLE t (k INTEGER PRIMARY KEY, v TEXT NOT NULL) STRICT");
    const pages = (db.sqlite.query("PRAGMA page_count").get() as { page_count: number }).page_count;
    db.sqlite.run(`PRAGMA max_page_count = ${pages + 2}`);
    const settle = (p: Promise<unknown>) => p.then(() => "ok", (e) => String(e.code ?? e.message));
    const a = settle(db.write(() => db.sqlite.query("INSERT INTO t VALUES (1, 'a')").run()));
    const big = settle(db.write(() => db.sqlite.query("INSERT INTO t VALUES (2, ?)").run("x".repeat(200_000))));
    const c = settle(db.write(() => db.sqlite.query("INSERT INTO t VALUES (3, 'c')").run()));
    const results = [await a, await big, await c];
    db.sqlite.run("PRAGMA max_page_count = 1073741823");
    const rows = (db.sqlite.query("SELECT k FROM t ORDER BY k").all() as { k: number }[]).map((r) => r.k);
    // every write that said "ok" is there, and none that failed
    for (const [i, k] of [1, 2, 3].entries()) expect({ k, ok: results[i] === "ok" }).toEqual({ k, ok: rows.includes(k) });
    expect(results[1]).not.toBe("ok");
    db.close();
  });

  test("a failed COMMIT rejects every write of the batch and leaves nothing behind", async () => {
    const path = join(dir, "deferred.db");
    const db = openDatabase(path);
    db.sqlite.run("CREATE TABLE p (id INTEGER PRIMARY KEY) STRICT");
    db.sqlite.run("CREATE TABLE c (id INTEGER PRIMARY KEY, p INTEGER NOT NULL REFERENCES p(id) DEFERRABLE INITIALLY DEFERRED) STRICT");
    const settle = (p: Promise<unknown>) => p.then(() => "ok", () => "rejected");
    const ok = settle(db.write(() => db.sqlite.query("INSERT INTO p VALUES (1)").run()));
    const orphan = settle(db.write(() => db.sqlite.query("INSERT INTO c VALUES (1, 99)").run())); // fails only at COMMIT
    expect([await ok, await orphan]).toEqual(["rejected", "rejected"]);
    expect(db.sqlite.query("SELECT COUNT(*) AS n FROM p").get()).toEqual({ n: 0 });
    // the next batch works
    await db.write(() => db.sqlite.query("INSERT INTO p VALUES (2)").run());
    expect(db.sqlite.query("SELECT id FROM p").all()).toEqual([{ id: 2 }]);
    db.close();
  });

  test("a database locked by another process makes writes reject, not hang or throw synchronously", async () => {
    const path = join(dir, "locked.db");
    const other = openDatabase(path);
    other.sqlite.run("CREATE TABLE t (k INTEGER) STRICT");
    const db = openDatabase(path, { busyTimeoutMs: 50 });
    other.sqlite.run("BEGIN IMMEDIATE");
    const p = db.write(() => db.sqlite.query("INSERT INTO t VALUES (1)").run());
    expect(p).toBeInstanceOf(Promise);
    await expect(p).rejects.toThrow();
    other.sqlite.run("ROLLBACK");
    await db.write(() => db.sqlite.query("INSERT INTO t VALUES (2)").run());
    other.close();
    db.close();
  });
});

describe("nested writes", () => {
  test("are refused, and the outer write goes on", async () => {
    const db = openDatabase(":memory:");
    db.sqlite.run("CREATE TABLE t (k INTEGER PRIMARY KEY) STRICT");
    let inner: Promise<string> = Promise.resolve("none");
    const outer = db.write(() => {
      inner = db.write(() => db.sqlite.query("INSERT INTO t VALUES (9)").run()).then(
        () => "ok",
        (e) => String(e.message),
      );
      db.sqlite.query("INSERT INTO t VALUES (1)").run();
    });
    await outer;
    expect(await inner).toContain("cannot nest");
    expect(db.sqlite.query("SELECT k FROM t").all()).toEqual([{ k: 1 }]);
    db.close();
  });
});

describe("exact sums (db/sum.ts)", () => {
  test("totals past 2^63-1 come out exact where SUM overflows; negative and empty sums too", () => {
    const sqlite = new Database(":memory:", { strict: true });
    sqlite.run("CREATE TABLE t (k TEXT NOT NULL, amount INTEGER NOT NULL) STRICT");
    const most = 2n ** 63n - 1n;
    const amounts: Record<string, bigint[]> = { big: [most, most, most, 1n], mixed: [2n ** 40n + 5n, -(2n ** 35n) - 3n, 4294967295n, 4294967296n], none: [] };
    for (const [k, list] of Object.entries(amounts)) for (const a of list) sqlite.query("INSERT INTO t VALUES (?, ?)").run(k, a);
    expect(() => sqlite.query("SELECT SUM(amount) FROM t WHERE k = 'big'").get()).toThrow(/overflow/);
    const sum = (k: string) => {
      const row = sqlite.query(`SELECT ${splitSum("amount", "s")} FROM t WHERE k = ?`).get(k) as { sHigh: string | null; sLow: string | null };
      return joinSum(row.sHigh, row.sLow);
    };
    for (const [k, list] of Object.entries(amounts)) expect({ k, sum: sum(k) }).toEqual({ k, sum: list.reduce((a, b) => a + b, 0n) });
    sqlite.close();
  });
});

describe("storage of large rows", () => {
  test("a webhook attempt keeping 1 KiB of its answer fits in the table's pages (no page of its own)", () => {
    const db = new Database(":memory:");
    migrate(db, Date.now());
    db.run("PRAGMA foreign_keys = OFF"); // attempts alone, without their deliveries
    const before = (db.query("PRAGMA page_count").get() as { page_count: number }).page_count;
    const insert = db.query("INSERT INTO webhook_attempts (delivery_id, attempt, at, status_code, duration_ms, response, error) VALUES (?, 1, 0, 500, 3, ?, NULL)");
    for (let i = 0; i < 400; i++) insert.run(`delivery-${String(i).padStart(4, "0")}-${"d".repeat(24)}`, "r".repeat(1024));
    const pages = (db.query("PRAGMA page_count").get() as { page_count: number }).page_count - before;
    expect(pages).toBeLessThan(160); // ~1.2 KB a row, three to a 4 KB page; WITHOUT ROWID took ~1.2 pages a row (480+)
    db.close();
  });
});
