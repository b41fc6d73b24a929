// Opens the SQLite database with durable settings and offers group-committed writes.
import { Database } from "bun:sqlite";
import { accessSync, chmodSync, closeSync, constants, fsync, fsyncSync, openSync, realpathSync, statSync } from "node:fs";
import { dirname } from "node:path";
import { type ChangeWatcher, walIndexOf } from "./wal-index.ts";
import { makeDirDurably } from "../lib/durable.ts";
import { fileBehind } from "../lib/links.ts";
import { keepOwnerOf } from "../lib/owner.ts";

export type Db = {
  readonly sqlite: Database;
  /**
   * Runs `fn` now, atomically (its own savepoint), inside the current batch transaction, and resolves
   * once the batch is committed. Writes from one event-loop turn share one commit (group commit), so
   * a caller is answered only after its write is durable, without one fsync per request.
   * `fn` must not call `write` itself (that is refused): compose the SQL inside one write instead.
   */
  write<T>(fn: () => T): Promise<T>;
  /**
   * Runs `fn` (reads only) now, inside the shared read transaction: reads share one snapshot and one
   * lock, instead of taking and dropping the file locks per statement (two system calls per statement
   * otherwise). The snapshot ends at the end of the event-loop turn, before any write, and at `endReads`
   * when the database has changed since it began.
   */
  read<T>(fn: () => T): T;
  /**
   * Inside a write's `fn` only: runs `inner` in a savepoint of its own, so that if it throws, its changes
   * alone are undone and the rest of the write goes on. Returns whether it completed; its error is passed
   * to `onError`.
   */
  tryInWrite(inner: () => void, onError: (err: unknown) => void): boolean;
  /**
   * Resolves once everything this process has written so far is committed and on disk — the writes of
   * the current batch included — and rejects if they are not. Reads see the current batch's writes before
   * they are committed; an answer built from such a read (another request's purchase, say) awaits this
   * before it goes out, as the writer itself does.
   */
  settled(): Promise<void>;
  /**
   * Called as each request arrives: if anything was committed (by this or another process) since the
   * shared read snapshot began, the snapshot ends, so that no request reads a state older than its own
   * arrival (a key revoked by the CLI is refused from the next request). Costs no system call.
   */
  endReads(): void;
  /**
   * The cache named `name` (made on first use, at most `maxEntries` values, oldest dropped first):
   * values read from the database, each kept only until the database next changes — a commit by this or
   * any other process — and then read again. For the lookups of every API request (key, product).
   */
  cache<V>(name: string, maxEntries: number): ReadCache<V>;
  /** True when the database answers a trivial query and the disk takes writes (readiness). */
  ping(): boolean;
  /** From now on every write is refused with `reason`, and `ping` fails (until the process restarts). */
  refuseWrites(reason: Error): void;
  /**
   * Looks at an error no caller expected: when SQLite says the file is damaged (SQLITE_CORRUPT, NOTADB),
   * writes stop and readiness fails, rather than writing on into a damaged file. True when it was that.
   */
  noteFailure(err: unknown): boolean;
  /** Commits whatever is pending now and flushes the log to disk (shutdown, after migrations). */
  flush(): void;
  close(): void;
};

export type ReadCache<V> = {
  /**
   * The value kept for `key` if the database has not changed since it was read (and `usable(value)`
   * holds, when given: for values that also go stale with time), else `load()` (reads only, synchronous),
   * kept in its place. A value loaded inside a write batch is not kept: that batch may never commit.
   */
  get(key: string, load: () => V, usable?: (value: V) => boolean): V;
};

/** Flushes a file to disk off the calling thread (node:fs `fsync`'s shape). */
type SyncFile = (fd: number, done: (err: Error | null) => void) => void;

export type OpenOptions = {
  synchronous?: "FULL" | "NORMAL" | "EXTRA";
  busyTimeoutMs?: number;
  /** How the WAL file is flushed to disk after a commit (tests replace it); node:fs `fsync` by default. */
  syncFile?: SyncFile;
  /** The same on the calling thread (shutdown, after migrations); node:fs `fsyncSync` by default. */
  syncFileNow?: (fd: number) => void;
  /** Only read (`backup`, which a user with read access may run beside the server): no check that it can be written. */
  readOnlyUse?: boolean;
};

/**
 * The log is copied into the database (and restarted) once it holds this many pages (SQLite's default is
 * 1,000): a page written by many commits in between is copied once, not once per 1,000 pages. Sign-ins
 * rewrite the same few pages (the file header, table tails, index interiors) in every commit; 4,000
 * measured 8–11 % more sign-ins than 1,000 over HTTP, and 10,000 or 20,000 no more than 4,000
 * (BENCHMARKS.md). The log then peaks near 16 MB.
 */
export const WAL_CHECKPOINT_PAGES = 4_000;

/**
 * Durability. `FULL` is kept as SQLite's FULL keeps it — a commit is reported only once the write-ahead
 * log holding it is flushed to disk — but the flush runs on a thread of the runtime's pool instead of
 * blocking the one JS thread: SQLite commits with `synchronous = NORMAL` (frames written, not flushed),
 * then the WAL file is fsync'ed off-thread and only then are the batch's writers answered. A crash or
 * power loss can lose only writes nobody was told about, as with FULL. Commits that land while a flush
 * runs share the next one. `EXTRA` and `NORMAL` are SQLite's own.
 */
/**
 * A new database file is made readable by its owner only (SQLite would make it 0644 less the umask, and
 * gives its log and shared-memory files the database's mode): in a DATA_DIR that is not 0700 the tables of
 * owners, purchases and sessions would be readable by every user of the machine. An existing one that
 * every user may read (made 0644 by an earlier version, or copied in) loses those bits, and its group any
 * write access, with its log and shared memory; its group keeps read access (an operator may give a
 * backup group that); one this user does not own is left to its owner.
 */
function createPrivately(named: string, mustWrite: boolean): void {
  // A link (to a volume) is followed, also to a file still to be made ("wx" alone would find the link and
  // take the file for made); SQLite puts its log and shared memory beside the file the link leads to.
  const path = fileBehind(named);
  try {
    closeSync(openSync(path, "wx", 0o600));
    keepOwnerOf(dirname(path), path); // made by root (sudo walletgate migrate): DATA_DIR's owner, whose server opens it
  } catch (err) {
    if ((err as { code?: string }).code !== "EEXIST") throw err;
    for (const file of [path, `${path}-wal`, `${path}-shm`]) {
      try {
        const mode = statSync(file).mode & 0o777;
        if ((mode & 0o027) !== 0) chmodSync(file, mode & 0o740);
      } catch {
        // not there, or not ours to change
      }
    }
    // SQLite opens a file it cannot write read-only without a word, and every write would then fail: said
    // here instead (an EACCES/EPERM naming the file, which config's dataDirError puts in DATA_DIR's terms).
    if (!mustWrite) return;
    for (const file of [path, `${path}-wal`, `${path}-shm`]) {
      try {
        accessSync(file, constants.W_OK);
      } catch (err) {
        // A log or index that is not there (or went with another process's last close) is made when needed.
        if (file === path || (err as { code?: string }).code !== "ENOENT") throw err;
      }
    }
  }
}

/** How long readiness fails after the disk refused a write (see `ping`). */
export const DISK_TROUBLE_MS = 10_000;

export function openDatabase(path: string, options: OpenOptions = {}): Db {
  if (path !== ":memory:") {
    makeDirDurably(dirname(path));
    createPrivately(path, options.readOnlyUse !== true);
  }
  const sqlite = new Database(path, { create: true, strict: true });
  sqlite.run(`PRAGMA busy_timeout = ${options.busyTimeoutMs ?? 5000}`);
  sqlite.run("PRAGMA journal_mode = WAL");
  const synchronous = options.synchronous ?? "FULL";
  const flushOffThread = synchronous === "FULL" && path !== ":memory:";
  sqlite.run(`PRAGMA synchronous = ${flushOffThread ? "NORMAL" : synchronous}`);
  sqlite.run("PRAGMA foreign_keys = ON");
  sqlite.run(`PRAGMA wal_autocheckpoint = ${WAL_CHECKPOINT_PAGES}`);
  /**
   * Set when flushing the log failed: what was committed may not be on disk, and after a failed fsync the
   * kernel may have dropped those pages, so no later write can be promised durable either. Writes are
   * refused from then on and `ping` fails (readiness), until the process is restarted.
   */
  let broken: Error | null = null;
  // SQLite names the log after the resolved path of the database (a symlinked DATA_DIR file included).
  const walFile = flushOffThread
    ? walFlusher(`${realpathSync(path)}-wal`, options.syncFile ?? fsync, options.syncFileNow ?? fsyncSync, (err) => {
        broken ??= new Error(`the database log could not be flushed to disk; writes are refused until restart: ${err.message}`);
      })
    : null;

  // Whether anything was committed since we last looked, from the WAL index (see wal-index.ts): mapped
  // at the first cache lookup, or just after the first endReads (a request, not start-up: loading bun:ffi
  // costs ~1 ms, which the first request does not wait for); until then every look says "changed".
  // Counted from the open (not the first watch): its descriptor outlives every database open on the file.
  const walIndex = path === ":memory:" ? null : walIndexOf(realpathSync(path));
  let watcher: ChangeWatcher | null = null;
  let watching = false;
  let watchSoon = false;
  let closed = false;
  function watch(): void {
    if (watching || closed || walIndex === null) return;
    watching = true;
    try {
      // A read makes SQLite open the index, which it then keeps open (and locked) until it is closed.
      sqlite.query("SELECT 1 FROM sqlite_master LIMIT 1").get();
      watcher = walIndex.watch();
    } catch {
      watcher = null; // (a busy or broken database) then every lookup reads it, as without a watcher
    }
  }
  /** Bumped whenever the database is seen to have changed: snapshots and cached values older than it are stale. */
  let generation = 0;

  let waiters: Waiter[] = [];
  let inBatch = false;
  /** A read transaction of this turn is open (never at the same time as a write batch). */
  let reading = false;

  // Prepared once: bun:sqlite's db.transaction() builds a wrapper per call, which costs more than the write.
  const innerSavepoint = sqlite.prepare("SAVEPOINT inner_write");
  const innerRelease = sqlite.prepare("RELEASE inner_write");
  const innerRollbackTo = sqlite.prepare("ROLLBACK TO inner_write");
  const savepoint = sqlite.prepare("SAVEPOINT write");
  const release = sqlite.prepare("RELEASE write");
  const rollbackTo = sqlite.prepare("ROLLBACK TO write");
  const beginRead = sqlite.prepare("BEGIN");
  const commitRead = sqlite.prepare("COMMIT");
  // Rows changed on this connection so far: a batch that changed none wrote nothing to the log to flush.
  const totalChanges = sqlite.prepare("SELECT total_changes() AS n");
  const changesNow = () => (totalChanges.get() as { n: number }).n;
  let changesAtLastCommit = changesNow();
  // Moves when another connection (`walletgate mcp`, a CLI command) has committed since this one last looked.
  // Such a commit may not be on disk yet, and a batch that read it must not be answered before it is. First
  // read at the first batch or flush (preparing it reads the file), and until then taken as moved.
  let dataVersion: ReturnType<typeof sqlite.prepare> | null = null;
  const othersNow = () => ((dataVersion ??= sqlite.prepare("PRAGMA data_version")).get() as { data_version: number }).data_version;
  let othersAtLastCommit: number | null = null;

  const batchLost = () => new Error("the batch transaction was rolled back by SQLite");

  /**
   * When the disk last refused a write (full, or an I/O error). For DISK_TROUBLE_MS after it `ping` fails
   * (readiness), so a load balancer stops sending requests that can only fail; then the server says it is
   * ready again and the next writes tell. A commit that succeeds meanwhile does not end it early: on a
   * nearly full disk small commits pass while larger ones fail, and readiness would flap with traffic. (A
   * test write could not tell either: the failed commits' frames stay allocated in the log, so a small
   * write fits.)
   */
  let diskTroubleAt: number | null = null;
  const noteDiskTrouble = (err: unknown) => {
    const code = (err as { code?: unknown } | null)?.code;
    if (typeof code === "string" && (code.startsWith("SQLITE_FULL") || code.startsWith("SQLITE_IOERR"))) diskTroubleAt = Date.now();
  };

  /** Settles the current batch: committed → resolve (once durable), else reject with `failure`. */
  function settle(failure: unknown | null): void {
    if (failure !== null) noteDiskTrouble(failure);
    const batch = waiters;
    waiters = [];
    inBatch = false;
    if (failure === null && walFile !== null) {
      const changes = changesNow();
      const others = othersNow();
      // Our own rows, or rows another connection committed that this batch may have read: flush either.
      const wrote = changes !== changesAtLastCommit || others !== othersAtLastCommit;
      changesAtLastCommit = changes;
      othersAtLastCommit = others;
      return walFile.afterFlush(batch, wrote);
    }
    answerAll(batch, failure);
  }

  /** Ends this turn's read transaction, if one is open. */
  function endRead(): void {
    if (!reading) return;
    reading = false;
    if (!sqlite.inTransaction) return;
    try {
      commitRead.run(); // it wrote nothing: this only drops the snapshot and its lock
    } catch {
      try {
        sqlite.run("ROLLBACK");
      } catch {
        // nothing left open
      }
    }
  }

  /** Looks for a commit since the last look; if there was one, older snapshots and cached values are stale. */
  function observe(): void {
    if (watcher !== null && !watcher.changed()) return;
    generation++;
    endRead();
  }

  function read<T>(fn: () => T): T {
    if (!inBatch && !reading && !sqlite.inTransaction) {
      observe(); // before the snapshot begins: a commit after this look is seen by the next one
      beginRead.run();
      reading = true;
      setImmediate(endRead);
    }
    return fn();
  }

  function commit(): void {
    endRead();
    if (!inBatch) return;
    if (!sqlite.inTransaction) return settle(batchLost());
    try {
      sqlite.run("COMMIT");
    } catch (err) {
      try {
        sqlite.run("ROLLBACK");
      } catch {
        // already rolled back by SQLite
      }
      return settle(err);
    }
    settle(null);
  }

  let writing = false;

  const caches = new Map<string, ReadCache<unknown>>();
  function makeCache<V>(maxEntries: number): ReadCache<V> {
    let entries = new Map<string, V>();
    let readAt = generation;
    return {
      get(key, load, usable) {
        observe();
        if (readAt !== generation) {
          entries = new Map();
          readAt = generation;
        }
        const kept = entries.get(key);
        if ((kept !== undefined || entries.has(key)) && (usable === undefined || usable(kept as V))) return kept as V;
        entries.delete(key); // kept again below, as the newest
        const keep = !inBatch; // read before observe() could see a later commit: the look came first
        const value = load();
        if (keep && readAt === generation) {
          if (entries.size >= maxEntries) entries.delete(entries.keys().next().value!);
          entries.set(key, value);
        }
        return value;
      },
    };
  }

  function write<T>(fn: () => T): Promise<T> {
    if (writing) return Promise.reject(new Error("db.write cannot nest: do all of a write's SQL in one fn"));
    if (broken !== null) return Promise.reject(broken);
    // Some errors (disk full, I/O) make SQLite roll back the whole transaction, not just a savepoint:
    // the batch is then lost, its writers hear so, and later writes start a new batch.
    if (inBatch && !sqlite.inTransaction) settle(batchLost());
    if (!inBatch) {
      endRead(); // a read snapshot cannot be upgraded safely: the batch takes its own, newest one
      try {
        sqlite.run("BEGIN IMMEDIATE");
      } catch (err) {
        noteDiskTrouble(err);
        return Promise.reject(err);
      }
      inBatch = true;
      setImmediate(commit);
    }
    let result: T;
    savepoint.run(); // all of fn or none of it, inside the batch
    writing = true;
    try {
      result = fn();
      release.run();
    } catch (err) {
      if (sqlite.inTransaction) {
        rollbackTo.run();
        release.run();
      } else {
        settle(err);
      }
      return Promise.reject(err);
    } finally {
      writing = false;
    }
    return new Promise<T>((resolve, reject) => {
      waiters.push({ resolve: () => resolve(result), reject });
    });
  }

  function tryInWrite(inner: () => void, onError: (err: unknown) => void): boolean {
    if (!writing) throw new Error("tryInWrite runs only inside a write's fn");
    innerSavepoint.run();
    try {
      inner();
      innerRelease.run();
      return true;
    } catch (err) {
      innerRollbackTo.run();
      innerRelease.run();
      onError(err);
      return false;
    }
  }

  return {
    sqlite,
    write,
    read,
    tryInWrite,
    settled() {
      // A batch SQLite already rolled back is lost: its writers hear so, and so does this caller.
      if (inBatch && !sqlite.inTransaction) {
        settle(batchLost());
        return Promise.reject(batchLost());
      }
      return write(() => undefined); // joins the current batch (or starts one) and waits for its flush
    },
    endReads() {
      if (!watching && !watchSoon) {
        watchSoon = true;
        setTimeout(watch, 0);
      }
      observe();
    },
    cache<V>(name: string, maxEntries: number): ReadCache<V> {
      watch();
      let cache = caches.get(name);
      if (cache === undefined) caches.set(name, (cache = makeCache<V>(maxEntries)));
      return cache as ReadCache<V>;
    },
    flush() {
      commit();
      const others = walFile === null ? null : othersNow(); // read before the flush: what it covers
      walFile?.flushNow();
      othersAtLastCommit = others;
    },
    refuseWrites(reason) {
      broken ??= reason;
    },
    noteFailure(err) {
      const code = (err as { code?: unknown } | null)?.code;
      if (typeof code !== "string" || !(code.startsWith("SQLITE_CORRUPT") || code === "SQLITE_NOTADB")) return false;
      broken ??= new Error(`the database file is damaged (${code}): stop the server and restore a backup (walletgate restore)`);
      return true;
    },
    ping() {
      if (broken !== null) return false;
      if (diskTroubleAt !== null && Date.now() - diskTroubleAt < DISK_TROUBLE_MS) return false;
      try {
        return sqlite.query("SELECT 1 AS ok").get() !== null;
      } catch {
        return false;
      }
    },
    close() {
      closed = true;
      commit();
      try {
        walFile?.close(); // throws if the last flush failed: the caller hears of it
      } finally {
        for (const statement of [savepoint, release, rollbackTo, innerSavepoint, innerRelease, innerRollbackTo, beginRead, commitRead, totalChanges]) statement.finalize();
        dataVersion?.finalize();
        sqlite.close();
        walIndex?.release(); // only now: see wal-index.ts
      }
    },
  };
}

/** A writer waiting for its batch: told once it is committed (and flushed), or why not. */
type Waiter = { resolve: () => void; reject: (err: unknown) => void };

function answerAll(batch: Waiter[], failure: unknown | null): void {
  for (const w of batch) {
    if (failure === null) w.resolve();
    else w.reject(failure);
  }
}

/**
 * Flushes the WAL file after commits, off the JS thread, and answers each commit's writers once a flush
 * that started after the commit has finished. At most one flush runs; commits meanwhile share the next.
 * After a failed flush nothing more is promised durable: the kernel reports a lost write-back once, so a
 * later flush of the same file may succeed although the frames before the loss are gone (and with them,
 * at recovery, every commit after them). Writers waiting then, and all later ones, are refused.
 */
function walFlusher(walPath: string, syncFile: SyncFile, syncFileNow: (fd: number) => void, onFailure: (err: Error) => void) {
  let fd: number | null = null; // opened at the first flush: SQLite creates the file with the first write
  let running = false;
  let closing = false;
  let failed: Error | null = null;
  let queued: Waiter[] = [];
  /** Flushed on this thread while a pool flush was running: answered once that one reports too. */
  let held: Waiter[] = [];
  const fail = (err: Error, ...batches: Waiter[][]) => {
    failed ??= err;
    onFailure(err);
    for (const batch of batches) answerAll(batch, failed);
  };
  const closeFile = () => {
    if (fd !== null) closeSync(fd);
    fd = null;
  };
  function start(): void {
    if (running || closing || queued.length === 0) return;
    const batch = queued;
    queued = [];
    if (failed !== null) return answerAll(batch, failed);
    try {
      fd ??= openSync(walPath, "r");
    } catch (err) {
      return fail(err as Error, batch);
    }
    running = true;
    syncFile(fd, (err) => {
      running = false;
      const alsoFlushed = held;
      held = [];
      if (err !== null) {
        fail(err, batch, alsoFlushed, queued.splice(0));
      } else {
        // A flush on this thread meanwhile may have been the one told of a loss (of this batch's frames too).
        answerAll(batch, failed);
        answerAll(alsoFlushed, failed);
      }
      if (closing) closeFile(); // not while the pool thread still used it
      else start();
    });
  }
  /** Shutdown: flushes on this thread and answers everyone waiting. */
  function flushNow(): void {
    const batch = queued;
    queued = [];
    if (failed !== null) return answerAll(batch, failed);
    let failure: Error | null = null;
    try {
      fd ??= openSync(walPath, "r");
      syncFileNow(fd);
    } catch (err) {
      // No log file yet: nothing was ever written, so nothing to flush.
      if (!(batch.length === 0 && (err as NodeJS.ErrnoException).code === "ENOENT")) failure = err as Error;
    }
    if (failure !== null) {
      const alsoHeld = held;
      held = [];
      fail(failure, batch, alsoHeld);
      if (batch.length === 0) throw failure; // nobody else would hear of it (migrations, shutdown)
      return;
    }
    // A pool flush still running may yet report a loss that this flush, on the same file, was not told of.
    if (running) held.push(...batch);
    else answerAll(batch, null);
  }
  return {
    /**
     * `wrote`: the batch changed rows, or another connection committed since the last batch (what this one
     * read may be theirs, not yet flushed by them). One that did neither (a poll, a purge step with nothing
     * due) has no flush of its own: it waits only for those of earlier commits, queued or running, if any,
     * since what it read may be theirs. Idle work then flushes nothing.
     */
    afterFlush(batch: Waiter[], wrote: boolean): void {
      if (failed !== null) return answerAll(batch, failed);
      if (!wrote && queued.length === 0) {
        if (running) held.push(...batch);
        else answerAll(batch, null);
        return;
      }
      queued.push(...batch);
      start();
    },
    flushNow,
    close(): void {
      try {
        flushNow();
      } finally {
        closing = true;
        if (!running) closeFile();
      }
    },
  };
}
