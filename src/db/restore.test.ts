// restore and backup at the instants a kill could cut them: the database's name always holds a whole
// database (the old one, its log folded in, or the backup), and stale copies left by killed runs are cleared.
import { afterAll, expect, test } from "bun:test";
import { Database } from "bun:sqlite";
import { chownSync, copyFileSync, existsSync, lstatSync, mkdirSync, readdirSync, readFileSync, realpathSync, rmSync, statSync, symlinkSync, utimesSync, writeFileSync } from "node:fs";
import { basename, join } from "node:path";
import { tempDir } from "../../test/helpers/server.ts";
import { backupDatabase } from "./backup.ts";
import { LEFTOVER_AFTER_MS } from "../lib/leftovers.ts";
import { latestOf, migrate } from "./migrate.ts";
import { MIGRATIONS } from "./migrations.ts";
import { restoreDatabase } from "./restore.ts";
import { systemClockSources } from "../lib/clock-steps.ts";

const dirs: string[] = [];
afterAll(() => dirs.forEach((d) => rmSync(d, { recursive: true, force: true })));
const newDir = () => {
  const dir = tempDir();
  dirs.push(dir);
  return dir;
};

/** A migrated database with `rows` owners, in WAL mode. */
function database(path: string, rows: number): void {
  const db = new Database(path);
  db.run("PRAGMA journal_mode = WAL");
  migrate(db, Date.now());
  for (let i = 0; i < rows; i++) db.run("INSERT INTO owners (wallet, tier, created_at) VALUES (?, 'free', ?)", [`owner-${i}`, Date.now()]);
  db.close();
}

/** What a server killed with writes still in its log leaves: the database file and its `-wal`, unfolded. */
function crashedDatabase(path: string, rows: number): void {
  const scratch = join(newDir(), "live.db");
  database(scratch, 0);
  const live = new Database(scratch);
  live.run("PRAGMA wal_autocheckpoint = 0");
  for (let i = 0; i < rows; i++) live.run("INSERT INTO owners (wallet, tier, created_at) VALUES (?, 'free', ?)", [`owner-${i}`, Date.now()]);
  copyFileSync(scratch, path);
  copyFileSync(`${scratch}-wal`, `${path}-wal`);
  live.close();
}

const owners = (path: string) => {
  const db = new Database(path, { readonly: true });
  try {
    expect(db.query("PRAGMA quick_check").get()).toEqual({ quick_check: "ok" });
    return (db.query("SELECT count(*) AS n FROM owners").get() as { n: number }).n;
  } finally {
    db.close();
  }
};

test("a copy's rollback journal left by a run killed while it migrated the copy is never played onto a later run's copy", () => {
  // In a container every run may be process 1: the killed run's copy may carry this process's pid.
  const dataDir = newDir();
  const path = join(dataDir, "walletgate.db");
  database(path, 1);
  const inRollbackMode = (file: string, rows: number, name: string) => {
    const db = new Database(file);
    migrate(db, Date.now());
    db.transaction(() => {
      for (let i = 0; i < rows; i++) db.run("INSERT INTO owners (wallet, tier, created_at) VALUES (?, 'free', ?)", [`${name}-${i}`, Date.now()]);
    })();
    db.close();
  };
  const a = join(newDir(), "a.db");
  const b = join(newDir(), "b.db");
  inRollbackMode(a, 3000, "a");
  inRollbackMode(b, 3000, "b");
  const stale = join(dataDir, `.walletgate.db.restoring-${process.pid}`);
  copyFileSync(a, stale);
  const killed = Bun.spawnSync([
    process.execPath,
    "-e",
    `const { Database } = require("bun:sqlite");
     const db = new Database(${JSON.stringify(stale)});
     db.run("PRAGMA cache_size = 2");
     db.run("BEGIN");
     db.run("UPDATE owners SET created_at = created_at + 1");
     process.kill(process.pid, "SIGKILL");`,
  ]);
  expect(killed.signalCode).toBe("SIGKILL");
  expect(existsSync(`${stale}-journal`)).toBe(true);
  restoreDatabase(path, b, new Date());
  const restored = new Database(path, { readonly: true });
  try {
    expect(restored.query("PRAGMA integrity_check").all()).toEqual([{ integrity_check: "ok" }]);
    expect(restored.query("SELECT count(*) AS n, sum(wallet LIKE 'b-%') AS fromB FROM owners").get()).toEqual({ n: 3000, fromB: 3000 });
  } finally {
    restored.close();
  }
});

test("a backup with its -wal beside it (a copy of a running or killed server's files) is restored with what its log holds, and left as it was", () => {
  const dataDir = newDir();
  const path = join(dataDir, "walletgate.db");
  database(path, 1);
  const backupDir = newDir();
  const backup = join(backupDir, "backup.db");
  crashedDatabase(backup, 5); // the 5 owners are in the log only
  const before = ["backup.db", "backup.db-wal"].map((f) => [f, statSync(join(backupDir, f)).size]);
  restoreDatabase(path, backup, new Date());
  expect(readdirSync(dataDir).filter((f) => f.includes(".restoring-"))).toEqual([]); // the copy's log went with it
  expect(owners(path)).toBe(5);
  expect(readdirSync(backupDir).sort().map((f) => [f, statSync(join(backupDir, f)).size])).toEqual(before);
  // Through a link (a rotation's latest.db): the log beside the file it points to is the one SQLite reads.
  const linkDir = newDir();
  symlinkSync(backup, join(linkDir, "latest.db"));
  const other = join(newDir(), "walletgate.db");
  database(other, 1);
  restoreDatabase(other, join(linkDir, "latest.db"), new Date());
  expect(owners(other)).toBe(5);
  expect(readdirSync(backupDir).sort().map((f) => [f, statSync(join(backupDir, f)).size])).toEqual(before);
  expect(readdirSync(linkDir)).toEqual(["latest.db"]);
});

test("a restore that fails before the backup takes the name leaves the database as it was and no copy of it behind", () => {
  const dataDir = newDir();
  const path = join(dataDir, "walletgate.db");
  crashedDatabase(path, 3);
  // Claims every migration and holds none of their tables: the carry-over cannot read it.
  const backup = join(newDir(), "hollow.db");
  const hollow = new Database(backup);
  hollow.run("CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL) STRICT");
  for (let v = 1; v <= latestOf(); v++) hollow.run("INSERT INTO schema_migrations VALUES (?, ?, ?)", [v, `m${v}`, Date.now()]);
  hollow.close();
  for (let attempt = 0; attempt < 2; attempt++) {
    expect(() => restoreDatabase(path, backup, new Date())).toThrow();
    expect(owners(path)).toBe(3);
    expect(readdirSync(dataDir).filter((name) => name.includes(".replaced-") || name.includes(".restoring-"))).toEqual([]);
  }
});

test("killed just before the backup takes the name: the name still holds the old database, its log folded in", () => {
  const dataDir = newDir();
  const path = join(dataDir, "walletgate.db");
  crashedDatabase(path, 7);
  const backup = join(newDir(), "backup.db");
  database(backup, 2);
  expect(() =>
    restoreDatabase(path, backup, new Date(), () => {
      throw new Error("killed");
    }),
  ).toThrow("killed");
  expect(existsSync(`${path}-wal`)).toBe(false); // no log left to replay onto a backup
  expect(owners(path)).toBe(7); // whole, with what was only in its log
  // The restore run again finishes it; the old database stays beside, whole.
  const result = restoreDatabase(path, backup, new Date());
  expect(owners(path)).toBe(2);
  expect(owners(result.movedAside!)).toBe(7);
  // None were made.
  expect(result.revocations).toEqual({ sessionTokens: 0, walletCutoffs: 0, apiKeys: 0, featureTokens: 0, spentProofs: 0, webhookSecrets: 0, mcpSessions: 0, webhookEndpoints: 0, agentEndpoints: 0 });
  expect(result.walletKeys).toEqual({ custodialWallets: 0, escrows: 0, notCarried: [] });
  // No copy left, nor a log of the copy (written carrying revocations): folded in before it took the name.
  expect(readdirSync(dataDir).filter((name) => name.includes(".restoring-"))).toEqual([]);
});

test("a restore over a damaged database (what restores are for) puts the backup in place, with no log of the old one under the name", async () => {
  const dataDir = newDir();
  const path = join(dataDir, "walletgate.db");
  writeFileSync(path, "not a database at all");
  writeFileSync(`${path}-wal`, "a log of something");
  const backup = join(newDir(), "backup.db");
  database(backup, 3);
  const result = restoreDatabase(path, backup, new Date());
  expect(existsSync(`${path}-wal`)).toBe(false); // looked at before anything opens it
  expect(owners(path)).toBe(3);
  expect(await Bun.file(result.movedAside!).text()).toBe("not a database at all");
  expect(result.revocations).toEqual({ skipped: expect.stringContaining("cannot be read") }); // said, and the restore done
  expect(result.walletKeys).toEqual({ skipped: expect.stringContaining("cannot be read") });
});

test("custodial wallets made after the backup keep their keys: carried over when sealed under the backup's key, else named", () => {
  const wallet = (db: Database, address: string) =>
    db.run("INSERT INTO custodial_wallets (address, secret_iv, secret_ciphertext, created_at) VALUES (?, ?, ?, ?)", [address, new Uint8Array(12).fill(1), new Uint8Array(80).fill(2), Date.now()]);
  const keyCheck = (db: Database, check: string) => db.run("INSERT INTO sealing_key_check (id, key_check) VALUES (1, ?)", [check]);
  const open = (path: string) => new Database(path);
  // One case each: the backup's key check, whether the backup holds a wallet of its own, and the replaced one's check.
  const cases = [
    { name: "same key", backupCheck: "K", backupWallet: true, replacedCheck: "K", carried: true },
    { name: "backup with nothing sealed yet", backupCheck: null, backupWallet: false, replacedCheck: "K", carried: true },
    { name: "another key", backupCheck: "K", backupWallet: true, replacedCheck: "OTHER", carried: false },
    { name: "backup sealed before key checks were kept", backupCheck: null, backupWallet: true, replacedCheck: "K", carried: false },
  ];
  for (const c of cases) {
    const path = join(newDir(), "walletgate.db");
    const backup = join(newDir(), "backup.db");
    database(backup, 0);
    let db = open(backup);
    if (c.backupCheck !== null) keyCheck(db, c.backupCheck);
    if (c.backupWallet) wallet(db, "OldWallet");
    db.close();
    copyFileSync(backup, path); // the live database went on from the backup…
    db = open(path);
    db.run("DELETE FROM sealing_key_check");
    keyCheck(db, c.replacedCheck);
    wallet(db, "NewWallet1"); // …and made two wallets, one of them escrow's
    wallet(db, "EscrowWallet");
    db.run("INSERT INTO market_escrow (network, address, created_at) VALUES ('devnet', 'EscrowWallet', ?)", [Date.now()]);
    db.close();
    const result = restoreDatabase(path, backup, new Date());
    db = open(path);
    const addresses = db.query("SELECT address FROM custodial_wallets ORDER BY address").values().flat();
    const escrow = db.query("SELECT address FROM market_escrow").values().flat();
    const check = db.query("SELECT key_check FROM sealing_key_check").values().flat();
    db.close();
    const old = c.backupWallet ? ["OldWallet"] : [];
    if (c.carried) {
      expect([c.name, result.walletKeys, addresses, escrow, check]).toEqual([c.name, { custodialWallets: 2, escrows: 1, notCarried: [] }, ["EscrowWallet", "NewWallet1", ...old], ["EscrowWallet"], [c.replacedCheck]]);
    } else {
      expect([c.name, result.walletKeys, addresses, escrow]).toEqual([c.name, { custodialWallets: 0, escrows: 0, notCarried: ["NewWallet1", "EscrowWallet"] }, old, []]);
    }
  }
});

test("copies left by a backup or restore killed mid-way are deleted by a later run once stale; fresh ones (a run going on) stay", () => {
  const dataDir = newDir();
  const path = join(dataDir, "walletgate.db");
  database(path, 1);
  const backupDir = newDir();
  // Process 1, as every run in a container may be: judged by the file's last write, not by the process.
  const stale = [join(dataDir, ".walletgate.db.restoring-1"), join(dataDir, ".walletgate.db.restoring-1-aside"), join(backupDir, ".b.db.partial-1-1700000000000")];
  const fresh = join(backupDir, ".b.db.partial-1-1800000000000");
  const hourAgo = new Date(Date.now() - LEFTOVER_AFTER_MS - 1_000);
  for (const file of [...stale, fresh]) writeFileSync(file, "a copy of a database");
  for (const file of stale) utimesSync(file, hourAgo, hourAgo);
  const db = new Database(path);
  backupDatabase(db, join(backupDir, "b.db"));
  db.close();
  restoreDatabase(path, join(backupDir, "b.db"), new Date());
  expect(stale.filter((f) => existsSync(f))).toEqual([]);
  expect(existsSync(fresh)).toBe(true);
  expect(readdirSync(dataDir).filter((n) => n.startsWith("."))).toEqual([]);
});

test("a database file that is a symlink is restored where it points, and the link stays", () => {
  const dataDir = newDir();
  const store = newDir(); // another volume, say
  const target = join(store, "walletgate.db");
  database(target, 5);
  const path = join(dataDir, "walletgate.db");
  symlinkSync(target, path);
  const backup = join(newDir(), "backup.db");
  database(backup, 2);
  const result = restoreDatabase(path, backup, new Date());
  expect(lstatSync(path).isSymbolicLink()).toBe(true);
  expect(realpathSync(path)).toBe(realpathSync(target));
  expect(owners(target)).toBe(2);
  expect(result.movedAside!.startsWith(realpathSync(store))).toBe(true); // the old one beside it, whole
  expect(owners(result.movedAside!)).toBe(5);
});

test("a symlink whose database was moved away (damaged) gets the backup where it points", () => {
  const dataDir = newDir();
  const store = newDir();
  const path = join(dataDir, "walletgate.db");
  symlinkSync("../" + basename(store) + "/walletgate.db", path); // relative, as `ln -s` is often used
  const backup = join(newDir(), "backup.db");
  database(backup, 3);
  const result = restoreDatabase(path, backup, new Date());
  expect(lstatSync(path).isSymbolicLink()).toBe(true);
  expect(owners(join(store, "walletgate.db"))).toBe(3);
  expect(result.movedAside).toBeNull(); // there was nothing to move aside
});

test("a chain of links is followed to its end; a link into a directory that is not there is refused", () => {
  const dataDir = newDir();
  const mid = newDir();
  const store = newDir();
  const path = join(dataDir, "walletgate.db");
  symlinkSync(join(mid, "link.db"), path);
  symlinkSync(join(store, "walletgate.db"), join(mid, "link.db"));
  const backup = join(newDir(), "backup.db");
  database(backup, 4);
  restoreDatabase(path, backup, new Date());
  expect(lstatSync(join(mid, "link.db")).isSymbolicLink()).toBe(true);
  expect(owners(join(store, "walletgate.db"))).toBe(4);
  // A volume not mounted: its directory is missing, and nothing is made in its place.
  const unmounted = join(newDir(), "walletgate.db");
  symlinkSync(join(store, "not-mounted", "walletgate.db"), unmounted);
  expect(() => restoreDatabase(unmounted, backup, new Date())).toThrow("does not exist: mount that volume or fix the link");
  expect(existsSync(join(store, "not-mounted"))).toBe(false);
});

test("a relative link inside a linked directory is resolved as the kernel does; a loop of links is refused", () => {
  const root = newDir();
  mkdirSync(join(root, "real", "data"), { recursive: true });
  mkdirSync(join(root, "real", "vol"));
  symlinkSync(join(root, "real", "data"), join(root, "data")); // DATA_DIR is itself a link
  const path = join(root, "data", "walletgate.db");
  symlinkSync("../vol/walletgate.db", path); // ../ from the real directory: real/vol
  const backup = join(newDir(), "backup.db");
  database(backup, 2);
  restoreDatabase(path, backup, new Date());
  expect(owners(join(root, "real", "vol", "walletgate.db"))).toBe(2);
  // A link through a linked directory, then "..": the kernel goes up from where the link leads.
  mkdirSync(join(root, "real", "deep", "inner"), { recursive: true });
  mkdirSync(join(root, "real", "deep", "vol"));
  symlinkSync(join(root, "real", "deep", "inner"), join(root, "sl"));
  const up = join(newDir(), "walletgate.db");
  symlinkSync(`${root}/sl/../vol/walletgate.db`, up); // written as it is: join would fold the ".."
  restoreDatabase(up, backup, new Date());
  expect(owners(join(root, "real", "deep", "vol", "walletgate.db"))).toBe(2);
  // Forty links are followed, as the kernel follows them.
  const chain = newDir();
  for (let i = 0; i < 40; i++) symlinkSync(join(chain, `l${i + 1}.db`), join(chain, `l${i}.db`));
  restoreDatabase(join(chain, "l0.db"), backup, new Date());
  expect(owners(join(chain, "l40.db"))).toBe(2);
  const loop = newDir();
  symlinkSync(join(loop, "b.db"), join(loop, "a.db"));
  symlinkSync(join(loop, "a.db"), join(loop, "b.db"));
  expect(() => restoreDatabase(join(loop, "a.db"), backup, new Date())).toThrow("a chain of more than 40 links");
  expect(lstatSync(join(loop, "a.db")).isSymbolicLink()).toBe(true);
});

test.skipIf(process.getuid?.() !== 0)("run by root, the restored database and the copy of the replaced one keep the replaced one's owner", () => {
  const dataDir = newDir();
  const path = join(dataDir, "walletgate.db");
  database(path, 3);
  for (const file of [dataDir, path]) chownSync(file, 65534, 65534); // the server's own user
  const backup = join(newDir(), "backup.db");
  database(backup, 1);
  const result = restoreDatabase(path, backup, new Date());
  expect(owners(path)).toBe(1);
  for (const file of [path, result.movedAside!]) expect([file, statSync(file).uid, statSync(file).gid]).toEqual([file, 65534, 65534]);
});

test("what the backup holds and the replaced database lacks is kept: an older copy of the same database, or another installation's, proves no deletion", () => {
  const session = (db: Database, id: string) =>
    db.run("INSERT INTO mcp_sessions (id, created_at, last_activity_at, protocol_version) VALUES (?, ?, ?, '2025-06-18')", [id, Date.now(), Date.now()]);
  const endpoint = (db: Database, id: string) =>
    db.run("INSERT INTO webhook_endpoints (id, owner, url, events, enabled, secret_iv, secret_ciphertext, created_at, updated_at) VALUES (?, 'owner', 'https://h.example/x', '[]', 1, ?, ?, ?, ?)", [
      id,
      new Uint8Array(12),
      new Uint8Array(48),
      Date.now(),
      Date.now(),
    ]);
  const left = (path: string) => {
    const db = new Database(path, { readonly: true });
    try {
      return {
        live: db.query("SELECT id FROM mcp_sessions WHERE ended_at IS NULL ORDER BY id").values().flat(),
        endpoints: db.query("SELECT id FROM webhook_endpoints ORDER BY id").values().flat(),
      };
    } finally {
      db.close();
    }
  };
  for (const later of [true, false]) {
    const path = join(newDir(), "walletgate.db");
    const backup = join(newDir(), "backup.db");
    database(backup, 0);
    let db = new Database(backup);
    for (const id of ["s-gone", "s-kept"]) session(db, id);
    for (const id of ["e-gone", "e-kept"]) endpoint(db, id);
    db.close();
    // An older copy of the backup's own database (restored first, say) lacks the later records; another
    // installation's database (a new host started once) lacks them all.
    if (later) copyFileSync(backup, path);
    else database(path, 0);
    db = new Database(path);
    db.run("DELETE FROM mcp_sessions WHERE id = 's-gone'");
    db.run("DELETE FROM webhook_endpoints WHERE id = 'e-gone'");
    db.close();
    const result = restoreDatabase(path, backup, new Date());
    expect([later, result.revocations]).toMatchObject([later, { mcpSessions: 0, webhookEndpoints: 0 }]);
    expect([later, left(path)]).toEqual([later, { live: ["s-gone", "s-kept"], endpoints: ["e-gone", "e-kept"] }]);
  }
});

test("a deletion record deletes the endpoint with its previous secrets; an agent's endpoint, status and 410 mark go by the later row", () => {
  const endpoint = (db: Database, id: string) => {
    db.run("INSERT INTO webhook_endpoints (id, owner, url, events, enabled, secret_iv, secret_ciphertext, created_at, updated_at) VALUES (?, 'owner', 'https://h.example/x', '[]', 1, ?, ?, 1, 1)", [
      id,
      new Uint8Array(12),
      new Uint8Array(48),
    ]);
    db.run("INSERT INTO webhook_previous_secrets (endpoint_id, secret_iv, secret_ciphertext, signs_until) VALUES (?, ?, ?, ?)", [id, new Uint8Array(12), new Uint8Array(48), Date.now() + 60_000]);
  };
  const agent = (db: Database, id: string, endpoint: string, status: string, goneAt: number | null, updatedAt: number) =>
    db.run(
      `INSERT INTO market_agents (id, owner_wallet, endpoint, name, tagline, description, categories, base_price, status, secret_iv, secret_ciphertext, endpoint_gone_at, created_at, updated_at)
       VALUES (?, 'owner', ?, 'Agent', '', '', '[]', 1, ?, ?, ?, ?, 1, ?)`,
      [id, endpoint, status, new Uint8Array(12), new Uint8Array(48), goneAt, updatedAt],
    );
  const path = join(newDir(), "walletgate.db");
  const backup = join(newDir(), "backup.db");
  database(backup, 0);
  let db = new Database(backup);
  for (const id of ["e-gone", "e-kept"]) endpoint(db, id);
  agent(db, "a-moved", "https://a.example/old", "active", null, 100); // changed later in the replaced database
  agent(db, "a-gone", "https://a.example/gone", "active", null, 100); // answered 410 later
  agent(db, "a-newer", "https://a.example/newer", "active", null, 300); // the backup's row is the later one
  db.close();
  database(path, 0);
  db = new Database(path);
  db.run("INSERT INTO webhook_endpoint_deletions (id, deleted_at) VALUES ('e-gone', 5), ('e-other', 6)");
  agent(db, "a-moved", "https://a.example/new", "paused", null, 200);
  agent(db, "a-gone", "https://a.example/gone", "paused", 150, 200);
  agent(db, "a-newer", "https://a.example/older", "paused", null, 200);
  db.close();
  const result = restoreDatabase(path, backup, new Date());
  expect(result.revocations).toMatchObject({ webhookEndpoints: 1, agentEndpoints: 2 });
  db = new Database(path, { readonly: true });
  try {
    expect(db.query("SELECT id FROM webhook_endpoints").values().flat()).toEqual(["e-kept"]);
    expect(db.query("SELECT endpoint_id FROM webhook_previous_secrets").values().flat()).toEqual(["e-kept"]);
    expect(db.query("SELECT id, deleted_at FROM webhook_endpoint_deletions ORDER BY id").values()).toEqual([["e-gone", 5], ["e-other", 6]]);
    expect(db.query("SELECT id, endpoint, status, endpoint_gone_at, updated_at FROM market_agents ORDER BY id").values()).toEqual([
      ["a-gone", "https://a.example/gone", "paused", 150, 200],
      ["a-moved", "https://a.example/new", "paused", null, 200],
      ["a-newer", "https://a.example/newer", "active", null, 300],
    ]);
  } finally {
    db.close();
  }
});

const bootId = systemClockSources.bootId?.() ?? null;
test.skipIf(bootId === null)("the clock mark written last goes with the restored database: this boot's over another's, on one boot the later", () => {
  type Mark = { boot: string; bootMs: number; wallMs: number } | null;
  const withMark = (path: string, mark: Mark) => {
    database(path, 0);
    if (mark === null) return;
    const db = new Database(path);
    db.run("INSERT INTO clock_mark (id, boot_id, wall_ms, boot_ms, ahead_ms, since_forward_ms) VALUES (1, ?, ?, ?, 0, NULL)", [mark.boot, mark.wallMs, mark.bootMs]);
    db.close();
  };
  const markOf = (path: string) => {
    const db = new Database(path, { readonly: true });
    try {
      return (db.query("SELECT wall_ms AS wallMs FROM clock_mark").get() as { wallMs: number } | null)?.wallMs ?? null;
    } finally {
      db.close();
    }
  };
  const now = bootId!;
  const cases: [backup: Mark, replaced: Mark, kept: "backup" | "replaced" | null][] = [
    [{ boot: now, bootMs: 1_000, wallMs: 1 }, { boot: now, bootMs: 5_000, wallMs: 2 }, "replaced"],
    [{ boot: now, bootMs: 5_000, wallMs: 1 }, { boot: now, bootMs: 1_000, wallMs: 2 }, "backup"],
    [{ boot: now, bootMs: 1_000, wallMs: 1 }, { boot: "another boot", bootMs: 9_000, wallMs: 2 }, "backup"],
    [{ boot: "another boot", bootMs: 9_000, wallMs: 1 }, { boot: now, bootMs: 500, wallMs: 2 }, "replaced"],
    [{ boot: "one boot", bootMs: 9_000, wallMs: 1 }, { boot: "another boot", bootMs: 500, wallMs: 2 }, "replaced"],
    [null, { boot: now, bootMs: 1, wallMs: 2 }, "replaced"],
    [{ boot: now, bootMs: 1, wallMs: 1 }, null, "backup"],
    [null, null, null],
  ];
  const kept = cases.map(([backupMark, replacedMark]) => {
    const path = join(newDir(), "walletgate.db");
    const backup = join(newDir(), "backup.db");
    withMark(backup, backupMark);
    withMark(path, replacedMark);
    restoreDatabase(path, backup, new Date());
    const wallMs = markOf(path);
    return wallMs === 1 ? "backup" : wallMs === 2 ? "replaced" : null;
  });
  expect(kept).toEqual(cases.map(([, , k]) => k));
});

test("a backup that is no walletgate database, one newer than this program, or a damaged one is refused: the database, or its absence, stays as it was", () => {
  // restore.ts checkBackup(): each of its three refusals (`version === 0`, `version > latest`, quick_check) → `if (false)`
  const foreign = join(newDir(), "notes.db");
  let db = new Database(foreign);
  db.run("CREATE TABLE notes (text TEXT)");
  db.close();
  const newer = join(newDir(), "newer.db");
  database(newer, 1);
  db = new Database(newer);
  db.run("INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, 'from a later walletgate', 0)", [latestOf() + 1]);
  db.close();
  const damaged = join(newDir(), "damaged.db");
  database(damaged, 300);
  const bytes = readFileSync(damaged);
  const pageSize = bytes.readUInt16BE(16);
  bytes[bytes.length - pageSize] = 0xff; // the last page's type byte: no b-tree page has it
  writeFileSync(damaged, bytes);
  const refusals: [string, string][] = [
    [foreign, `${foreign} is not a walletgate database (no schema_migrations)`],
    [newer, `${newer} has schema version ${latestOf() + 1}; this walletgate knows up to ${latestOf()}: restore it with a newer version`],
    [damaged, `${damaged} is damaged: `],
  ];
  for (const [backup, said] of refusals) {
    // Over a database: it keeps its name and rows, and no copy of it is made aside.
    const dataDir = newDir();
    const path = join(dataDir, "walletgate.db");
    database(path, 3);
    expect(() => restoreDatabase(path, backup, new Date())).toThrow(said);
    expect(owners(path)).toBe(3);
    expect(readdirSync(dataDir).filter((name) => name.includes(".replaced-") || name.includes(".restoring-"))).toEqual([]);
    // On a new host (no database yet): nothing takes the name.
    const empty = newDir();
    expect(() => restoreDatabase(join(empty, "walletgate.db"), backup, new Date())).toThrow(said);
    expect(readdirSync(empty).filter((name) => !name.endsWith(".locks"))).toEqual([]);
  }
});

test("an older replaced database does not undo what the backup holds: the backup's later revoke-all stays, and a token revoked in both is neither changed nor counted", () => {
  // restore.ts carryRevocations(): `WHERE excluded.tokens_valid_after > auth_wallet_cutoffs.tokens_valid_after` removed
  // (an earlier cutoff replaces a later one: tokens the backup's revoke-all ended are valid again), and
  // `AND auth_tokens.revoked_at IS NULL` removed (a revocation both hold is rewritten and counted as carried)
  const token = (db: Database, jti: string, revokedAt: number | null) =>
    db.run(
      "INSERT INTO auth_tokens (jti, session_id, wallet, issued_at, expires_at, session_started_at, revoked_at) VALUES (?, 'session', 'WalletW', 1, 9000000000000, 1, ?)",
      [jti, revokedAt],
    );
  const cutoff = (db: Database, wallet: string, after: number) => db.run("INSERT INTO auth_wallet_cutoffs (wallet, tokens_valid_after) VALUES (?, ?)", [wallet, after]);
  const path = join(newDir(), "walletgate.db");
  const backup = join(newDir(), "backup.db");
  database(backup, 0);
  let db = new Database(backup);
  token(db, "jti-revoked-in-both", 300);
  token(db, "jti-revoked-later", null);
  cutoff(db, "WalletW", 500); // a revoke-all the older replaced database has not seen
  cutoff(db, "WalletV", 100);
  db.close();
  // An older copy of the same database (restored once before, say), with revocations of its own.
  database(path, 0);
  db = new Database(path);
  token(db, "jti-revoked-in-both", 200);
  token(db, "jti-revoked-later", 250);
  cutoff(db, "WalletW", 100);
  cutoff(db, "WalletV", 400); // a later revoke-all than the backup's: carried
  db.close();
  const result = restoreDatabase(path, backup, new Date());
  expect(result.revocations).toMatchObject({ sessionTokens: 1, walletCutoffs: 1 });
  db = new Database(path, { readonly: true });
  try {
    expect(db.query("SELECT wallet, tokens_valid_after FROM auth_wallet_cutoffs ORDER BY wallet").values()).toEqual([["WalletV", 400], ["WalletW", 500]]);
    expect(db.query("SELECT jti, revoked_at FROM auth_tokens ORDER BY jti").values()).toEqual([["jti-revoked-in-both", 300], ["jti-revoked-later", 250]]);
  } finally {
    db.close();
  }
});

test("a webhook endpoint the backup changed later keeps the backup's settings; a secret sealed under another wallet encryption key is never carried", () => {
  // restore.ts carryEndings(): `AND r.updated_at > webhook_endpoints.updated_at` removed (an older URL and enabled
  // state come back: events, access tokens among them, go where the owner no longer sends them);
  // carryWebhookSecrets(): `ours === null || ours !== theirs` → `ours === null` (a secret no key of the backup opens)
  const endpoint = (db: Database, id: string, url: string, enabled: 0 | 1, secretByte: number, updatedAt: number) =>
    db.run("INSERT INTO webhook_endpoints (id, owner, url, events, enabled, secret_iv, secret_ciphertext, created_at, updated_at) VALUES (?, 'owner', ?, '[]', ?, ?, ?, 1, ?)", [
      id,
      url,
      enabled,
      new Uint8Array(12).fill(secretByte),
      new Uint8Array(48).fill(secretByte),
      updatedAt,
    ]);
  const path = join(newDir(), "walletgate.db");
  const backup = join(newDir(), "backup.db");
  database(backup, 0);
  let db = new Database(backup);
  db.run("INSERT INTO sealing_key_check (id, key_check) VALUES (1, 'K')");
  endpoint(db, "e-moved-later", "https://h.example/new", 0, 1, 300); // moved and disabled after the replaced database's copy
  endpoint(db, "e-rotated-elsewhere", "https://h.example/x", 1, 1, 100);
  db.close();
  database(path, 0);
  db = new Database(path);
  db.run("INSERT INTO sealing_key_check (id, key_check) VALUES (1, 'OTHER')"); // another installation's key
  endpoint(db, "e-moved-later", "https://h.example/old", 1, 1, 200);
  endpoint(db, "e-rotated-elsewhere", "https://h.example/x", 1, 2, 200); // a later secret, sealed under OTHER
  db.close();
  const result = restoreDatabase(path, backup, new Date());
  expect(result.revocations).toMatchObject({ webhookEndpoints: 0, webhookSecrets: 0 });
  db = new Database(path, { readonly: true });
  try {
    const rows = db.query("SELECT id, url, enabled, updated_at, hex(secret_ciphertext) AS secret FROM webhook_endpoints ORDER BY id").all();
    expect(rows).toEqual([
      { id: "e-moved-later", url: "https://h.example/new", enabled: 0, updated_at: 300, secret: "01".repeat(48) },
      { id: "e-rotated-elsewhere", url: "https://h.example/x", enabled: 1, updated_at: 100, secret: "01".repeat(48) },
    ]);
  } finally {
    db.close();
  }
});

test("a replaced database of an older schema is not read for revocations: the restore is done, and says why nothing was carried", () => {
  // restore.ts carryOver(): `if (replacedVersion !== latestOf()) return { skipped }` → `if (false)` (its missing tables fail the restore)
  const path = join(newDir(), "walletgate.db");
  const old = new Database(path);
  old.run("PRAGMA journal_mode = WAL");
  const older = MIGRATIONS.filter((m) => m.version < 20); // before sealing_key_check
  migrate(old, Date.now(), older);
  old.close();
  const backup = join(newDir(), "backup.db");
  database(backup, 2);
  const result = restoreDatabase(path, backup, new Date());
  const olderVersion = Math.max(...older.map((m) => m.version));
  const skipped = { skipped: `${result.movedAside} has schema version ${olderVersion}, not ${latestOf()}` };
  expect([result.revocations, result.walletKeys]).toEqual([skipped, skipped]);
  expect(owners(path)).toBe(2);
});

test("a log left without its database (the file deleted by hand) is removed, never replayed onto the backup", () => {
  // restore.ts restoreUnderLock(): `else rmSync(databasePath + suffix)` removed
  const dataDir = newDir();
  const path = join(dataDir, "walletgate.db");
  crashedDatabase(path, 5); // 5 owners in its log only
  rmSync(path);
  const backup = join(newDir(), "backup.db");
  database(backup, 2);
  const result = restoreDatabase(path, backup, new Date());
  expect(result.movedAside).toBeNull();
  expect(existsSync(`${path}-wal`)).toBe(false);
  expect(owners(path)).toBe(2);
});
