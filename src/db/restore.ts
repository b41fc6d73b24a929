// `walletgate restore`: a backup put back in place of DATA_DIR's database, with the old one kept aside.
import { Database } from "bun:sqlite";
import { randomUUID } from "node:crypto";
import { chmodSync, copyFileSync, existsSync, readdirSync, readlinkSync, realpathSync, renameSync, rmSync, statSync } from "node:fs";
import { basename, dirname, join } from "node:path";
import { fsyncDir, fsyncPath, makeDirDurably } from "../lib/durable.ts";
import { removeLeftovers } from "../lib/leftovers.ts";
import { keepOwnerOf } from "../lib/owner.ts";
import { LinkError, linkTarget as followLinks } from "../lib/links.ts";
import { systemClockSources } from "../lib/clock-steps.ts";
import { latestOf, migrate, schemaVersion } from "./migrate.ts";
import { holdsSealedData } from "./sealed.ts";
import { lockPathOf, tryLock } from "./file-lock.ts";

export class RestoreError extends Error {
  override name = "RestoreError";
}

/** A database's companion files: SQLite replays `-wal` onto whatever file bears the database's name. */
const COMPANIONS = ["-wal", "-shm"] as const;

/**
 * Other processes holding the database or its log open (Linux: /proc/<pid>/fd); empty where that cannot
 * be told. A server on the database would go on writing to the file moved aside.
 */
export function processesUsing(databasePath: string): number[] {
  if (!existsSync("/proc/self/fd")) return [];
  const names = new Set<string>();
  for (const suffix of ["", ...COMPANIONS]) {
    try {
      names.add(realpathSync(databasePath + suffix));
    } catch {
      // not there
    }
  }
  if (names.size === 0) return [];
  const users: number[] = [];
  for (const entry of readdirSync("/proc")) {
    const pid = Number(entry);
    if (!Number.isInteger(pid) || pid === process.pid) continue;
    let fds: string[];
    try {
      fds = readdirSync(`/proc/${pid}/fd`);
    } catch {
      continue; // gone, or another user's
    }
    for (const fd of fds) {
      try {
        if (names.has(readlinkSync(`/proc/${pid}/fd/${fd}`))) {
          users.push(pid);
          break;
        }
      } catch {
        // closed meanwhile
      }
    }
  }
  return users;
}

/**
 * True when another connection has the database open, by SQLite's own locks: every connection to a WAL
 * database holds a shared lock on its file while open, so an exclusive lock is refused. Unlike
 * processesUsing, this sees a server in another PID namespace (a container) or run by another user.
 * Taking the lock replays a log left by a crash into the file first, as any open would: nothing is lost.
 */
export function openedByAnother(databasePath: string): boolean {
  if (!existsSync(databasePath)) return false;
  let db: Database;
  try {
    db = new Database(databasePath, { readwrite: true, create: false });
  } catch (err) {
    throw new RestoreError(
      `${databasePath} cannot be opened to check that no process uses it (${err instanceof Error ? err.message : String(err)}): run restore as the user the server runs as`,
    );
  }
  try {
    db.run("PRAGMA busy_timeout = 0");
    db.run("PRAGMA locking_mode = EXCLUSIVE");
    db.run("BEGIN EXCLUSIVE");
    db.run("COMMIT");
    return false;
  } catch (err) {
    const code = String((err as { code?: string }).code ?? "");
    // Not a database, or a damaged one: for the restore to replace. Locked: someone has it open. Anything
    // else (an I/O error, a read-only file) says nothing either way: refused rather than guessed.
    if (code.startsWith("SQLITE_NOTADB") || code.startsWith("SQLITE_CORRUPT")) return false;
    if (code.startsWith("SQLITE_BUSY") || code.startsWith("SQLITE_LOCKED")) return true;
    throw new RestoreError(`cannot tell whether a process has ${databasePath} open (${err instanceof Error ? err.message : String(err)})`);
  } finally {
    db.close();
  }
}

/** The backup's schema version, after SQLite's own check of its pages; refuses what is not a sound walletgate database. */
function checkBackup(file: string): number {
  // Opening a database with a log beside it makes its index (`-shm`) next to it: not left beside the backup.
  const madeIndex = !existsSync(`${file}-shm`);
  let db: Database;
  try {
    db = new Database(file, { readonly: true, strict: true });
  } catch (err) {
    throw new RestoreError(`${file} cannot be opened as a database: ${err instanceof Error ? err.message : String(err)}`);
  }
  try {
    const check = db.query("PRAGMA quick_check").all() as { quick_check: string }[];
    if (check.length !== 1 || check[0]!.quick_check !== "ok") throw new RestoreError(`${file} is damaged: ${check.slice(0, 3).map((r) => r.quick_check).join("; ")}`);
    const version = schemaVersion(db);
    if (version === 0) throw new RestoreError(`${file} is not a walletgate database (no schema_migrations)`);
    const latest = latestOf();
    if (version > latest) throw new RestoreError(`${file} has schema version ${version}; this walletgate knows up to ${latest}: restore it with a newer version`);
    return version;
  } catch (err) {
    if (err instanceof RestoreError) throw err;
    throw new RestoreError(`${file} is not a sound database: ${err instanceof Error ? err.message : String(err)}`);
  } finally {
    db.close();
    if (madeIndex) rmSync(`${file}-shm`, { force: true });
  }
}

/**
 * Copies the backup to `partial` as SQLite reads it: with its log (`-wal`) when one lies beside it (a copy
 * of a running or killed server's files), folded into the copy. The check read the backup through its log,
 * so a copy of the file alone would drop what the log holds while the check said it was sound.
 */
function copyBackup(backup: string, partial: string, keepOwner: (file: string) => void): void {
  copyFileSync(backup, partial);
  const log = `${backup}-wal`;
  if (!existsSync(log) || statSync(log).size === 0) return;
  copyFileSync(log, `${partial}-wal`);
  chmodSync(`${partial}-wal`, 0o600);
  keepOwner(`${partial}-wal`);
  if (!foldLogInto(partial)) throw new RestoreError(`the log beside ${backup} could not be folded into its copy`);
}

/**
 * Revocations the replaced database knew that the backup did not, copied into the restored one (how many
 * rows each changed); or why they could not be (`skipped`). Null when no database was replaced.
 */
export type CarriedRevocations =
  | {
      sessionTokens: number;
      walletCutoffs: number;
      apiKeys: number;
      featureTokens: number;
      /** Single-use proofs spent after the backup: sign-in challenges and dashboard sign-in links. */
      spentProofs: number;
      /** Webhook endpoints whose signing secret was rotated after the backup (with their previous secrets). */
      webhookSecrets: number;
      /** MCP sessions ended (DELETE) after the backup that both databases still hold. */
      mcpSessions: number;
      /** Webhook endpoints disabled, sent elsewhere (another URL or events) or deleted after the backup. */
      webhookEndpoints: number;
      /** Marketplace agents given another endpoint or status after the backup. */
      agentEndpoints: number;
    }
  | { skipped: string };

/**
 * Custodial wallet keys the replaced database held and the backup did not (wallets made after the backup,
 * escrow's among them), copied over: the wallets' money is on chain and their keys exist nowhere else. Keys
 * sealed under another wallet encryption key than the backup's are not copied: `notCarried` names those
 * wallets, whose keys stay in the replaced database. `skipped` when that database could not be read.
 */
export type CarriedWalletKeys = { custodialWallets: number; escrows: number; notCarried: string[] } | { skipped: string };

export type RestoreResult = {
  restored: string;
  schemaVersion: number;
  movedAside: string | null;
  revocations: CarriedRevocations | null;
  walletKeys: CarriedWalletKeys | null;
};

/** Where a dangling symlink leads (lib/links.ts), its dead ends worded for restore. */
function linkTarget(path: string): string | null {
  try {
    return followLinks(path);
  } catch (err) {
    if (!(err instanceof LinkError)) throw err;
    if (err.reason === "loop") throw new RestoreError(`${err.message}: fix the link, then restore again`);
    if (err.reason === "missing-folder") throw new RestoreError(`${err.message}: mount that volume or fix the link, then restore again`);
    throw new RestoreError(`${err.message}: fix the link, then restore again`);
  }
}

/**
 * Puts `backup` in place as the database `named` (where it leads, when it is a symlink), readable by its owner only. The server must be
 * stopped: refused while another process has the database open (its pids named where /proc tells them).
 * The name always holds a whole database, whenever the process dies: the current one is first
 * checkpointed (its log folded into the file), then copied whole to `<name>.replaced-<time>` (its
 * `-wal`/`-shm`, if any are left, moved beside the copy, so the backup is never replayed onto by an old
 * log); the backup is copied beside the database, flushed, and renamed over the name at once.
 *
 * Revocations survive: a session token, API key or feature token revoked, a wallet's revoke-all, a
 * challenge or dashboard link spent, a webhook secret rotated, an MCP session ended, a webhook endpoint
 * disabled, moved or deleted, or a marketplace agent's endpoint or status changed after the backup was taken is copied from the replaced database into the backup's copy before it takes the name (that copy
 * is then migrated to this version first). A restore must not bring a leaked token, key or secret back.
 * Otherwise migrations the backup lacks are applied by the next `serve` or `migrate`.
 */
export function restoreDatabase(
  named: string,
  backup: string,
  now: Date,
  /** Tests: runs just before the backup takes the name (a throw there is a restore killed at that instant). */
  beforeReplace: () => void = () => undefined,
  /** Told before each long step (the CLI prints it: a step reads or copies a whole database). */
  progress: (step: string) => void = () => undefined,
): RestoreResult {
  if (!existsSync(backup)) throw new RestoreError(`no file ${backup}`);
  // A database file that is a symlink (to another volume, say) is restored where it points: the link stays,
  // and the server, which opens the file through it, finds the backup there.
  const databasePath = existsSync(named) ? realpathSync(named) : linkTarget(named) ?? named;
  const users = processesUsing(databasePath);
  if (users.length > 0) throw new RestoreError(`the database is open in process ${users.join(", ")}: stop the server first`);
  progress(`checking ${backup} …`);
  // Where a link (a rotation's `latest.db`) points: SQLite reads the log beside the file itself, so the check, the
  // copy of that log and the index it leaves must all be looked for there.
  backup = realpathSync(backup);
  const version = checkBackup(backup);
  const dir = dirname(databasePath);
  makeDirDurably(dir); // a new host: DATA_DIR not made yet (mode 0700, as serve makes it)
  // Held until the backup has the name: a walletgate process starting meanwhile (a server restarted by its
  // supervisor, a CLI command) waits for it and then opens the restored database, never the one replaced.
  let lock: ReturnType<typeof tryLock>;
  try {
    lock = tryLock(lockPathOf(named), "exclusive");
  } catch (err) {
    throw new RestoreError(`${(err as Error).message}: run restore as the user the server runs as`);
  }
  try {
    if ("held" in lock) throw new RestoreError("the database is open in another walletgate process: stop the server first");
    return restoreUnderLock(named, databasePath, backup, version, now, beforeReplace, progress);
  } finally {
    if ("lock" in lock) lock.lock.release();
  }
}

/** restoreDatabase's work, once no other walletgate process has the database open or can open it. */
function restoreUnderLock(
  named: string,
  databasePath: string,
  backup: string,
  version: number,
  now: Date,
  beforeReplace: () => void,
  progress: (step: string) => void,
): RestoreResult {
  if (openedByAnother(databasePath)) {
    throw new RestoreError("the database is open in another process (perhaps in another container, or another user's): stop the server first");
  }
  const dir = dirname(databasePath);
  const prefix = `.${basename(databasePath)}.restoring-`;
  removeLeftovers(dir, prefix); // copies of runs killed mid-way, with their rollback journals
  // A name no earlier run used: processes in containers often share a pid, and a copy's rollback journal
  // left by a run killed while it migrated the copy would be played back onto this run's copy by SQLite.
  const partial = join(dir, `${prefix}${randomUUID()}`);
  // Run by root (sudo walletgate restore), the files it writes go to whoever owns what they replace (the
  // database, else DATA_DIR): the server's own user must still open the database.
  const replaced = existsSync(databasePath) ? databasePath : dir;
  const keepOwner = (file: string) => keepOwnerOf(replaced, file);
  try {
    progress(`copying ${backup} into ${dir} …`);
    copyBackup(backup, partial, keepOwner);
    chmodSync(partial, 0o600); // as the server makes its database: a copy keeps the backup file's mode, maybe 0644
    keepOwner(partial);
    fsyncPath(partial);
    let movedAside: string | null = null;
    let tookName = false;
    let carried: ReturnType<typeof carryOver> | null = null;
    try {
      if (existsSync(databasePath)) {
        progress(`copying the database it replaces aside …`);
        foldLog(databasePath);
        movedAside = `${databasePath}.replaced-${now.toISOString().replaceAll(":", "-")}`;
        // A copy, given its name whole: the old database stays under its own name until the backup takes it.
        const aside = `${partial}-aside`;
        copyFileSync(databasePath, aside);
        keepOwner(aside);
        fsyncPath(aside);
        renameSync(aside, movedAside);
      }
      for (const suffix of COMPANIONS) {
        if (!existsSync(databasePath + suffix)) continue;
        if (movedAside !== null) renameSync(databasePath + suffix, movedAside + suffix);
        else rmSync(databasePath + suffix); // a log without its database: SQLite would replay it onto the backup
      }
      if (movedAside !== null) progress("carrying over revocations and custodial wallet keys made after the backup (migrating the backup's copy first if it is older) …");
      carried = movedAside === null ? null : carryOver(partial, movedAside, now.getTime());
      beforeReplace();
      renameSync(partial, databasePath);
      tookName = true;
      fsyncDir(dir);
    } catch (err) {
      // Failed before the backup took the name: the database is still in place, its log folded in, so the
      // copy made aside is a second copy of it; not left to pile up with each retry.
      if (!tookName && movedAside !== null) for (const suffix of ["", ...COMPANIONS]) rmSync(movedAside + suffix, { force: true });
      throw err;
    }
    return {
      restored: named,
      schemaVersion: carried === null || "skipped" in carried ? version : latestOf(),
      movedAside,
      revocations: carried === null ? null : "skipped" in carried ? carried : carried.revocations,
      walletKeys: carried === null ? null : "skipped" in carried ? carried : carried.walletKeys,
    };
  } finally {
    for (const file of [partial, `${partial}-aside`, `${partial}-journal`, ...COMPANIONS.map((suffix) => partial + suffix)]) rmSync(file, { force: true });
  }
}

/**
 * Copies into `restoredPath` (the backup's copy, not yet under the database's name) every revocation of
 * `replacedPath` it lacks and the custodial wallet keys only `replacedPath` holds, in one transaction,
 * after migrating it to this version, and the later of the two clock marks. The replaced database must be a sound one of this version; else
 * nothing is copied and `skipped` says why (the restore goes on: a damaged database is what restores are
 * for). The copy is flushed, its log folded in, before it returns.
 */
function carryOver(
  restoredPath: string,
  replacedPath: string,
  now: number,
): { revocations: Exclude<CarriedRevocations, { skipped: string }>; walletKeys: Exclude<CarriedWalletKeys, { skipped: string }> } | { skipped: string } {
  let replacedVersion: number;
  try {
    const replaced = new Database(replacedPath, { readonly: true });
    try {
      const check = replaced.query("PRAGMA quick_check").all() as { quick_check: string }[];
      if (check.length !== 1 || check[0]!.quick_check !== "ok") return { skipped: `${replacedPath} is damaged` };
      replacedVersion = schemaVersion(replaced);
    } finally {
      replaced.close();
    }
  } catch (err) {
    return { skipped: `${replacedPath} cannot be read: ${err instanceof Error ? err.message : String(err)}` };
  }
  if (replacedVersion !== latestOf()) return { skipped: `${replacedPath} has schema version ${replacedVersion}, not ${latestOf()}` };
  const backupHoldsSealedData = holdsSealedData(restoredPath);
  const db = new Database(restoredPath);
  try {
    migrate(db, now);
    db.run("ATTACH DATABASE ? AS replaced", [replacedPath]);
    const carried = db.transaction(() => {
      carryClockMark(db, systemClockSources.bootId?.() ?? null);
      return { revocations: carryRevocations(db), walletKeys: carryWalletKeys(db, backupHoldsSealedData) };
    })();
    db.run("DETACH DATABASE replaced");
    db.run("PRAGMA wal_checkpoint(TRUNCATE)");
    return carried;
  } finally {
    db.close();
    fsyncPath(restoredPath);
  }
}

/**
 * In carryOver's transaction: the clock watch's mark (db/clock-mark.ts) of the two databases that was written
 * last goes with the restored one. It describes this machine's clocks, not the data: the backup's older mark
 * would have the next start tell again the steps handled since the backup (webhook retries moved twice) and
 * bring back the purge's distance of that time. "Last" as far as the marks tell: one of this boot (`bootId`)
 * over one of another boot; on one boot, the later one by the boot clock; else the replaced database's.
 */
function carryClockMark(db: Database, bootId: string | null): void {
  db.run(
    `INSERT INTO clock_mark (id, boot_id, wall_ms, boot_ms, ahead_ms, since_forward_ms)
     SELECT r.id, r.boot_id, r.wall_ms, r.boot_ms, r.ahead_ms, r.since_forward_ms FROM replaced.clock_mark AS r
     WHERE NOT EXISTS (
       SELECT 1 FROM main.clock_mark AS m
       WHERE (m.boot_id = ?1 AND r.boot_id IS NOT ?1) OR (m.boot_id = r.boot_id AND m.boot_ms > r.boot_ms))
     ON CONFLICT (id) DO UPDATE SET boot_id = excluded.boot_id, wall_ms = excluded.wall_ms, boot_ms = excluded.boot_ms,
       ahead_ms = excluded.ahead_ms, since_forward_ms = excluded.since_forward_ms`,
    [bootId],
  );
}

/** In carryOver's transaction: the replaced database's revocations the backup lacks, by kind. */
function carryRevocations(db: Database): Exclude<CarriedRevocations, { skipped: string }> {
  return {
    sessionTokens: db.run(
      `UPDATE auth_tokens SET revoked_at = r.revoked_at
       FROM (SELECT wallet, jti, revoked_at FROM replaced.auth_tokens WHERE revoked_at IS NOT NULL) AS r
       WHERE substr(auth_tokens.wallet, 1, 8) = substr(r.wallet, 1, 8) AND substr(auth_tokens.jti, 1, 8) = substr(r.jti, 1, 8)
         AND auth_tokens.wallet = r.wallet AND auth_tokens.jti = r.jti AND auth_tokens.revoked_at IS NULL`,
    ).changes,
    walletCutoffs: db.run(
      `INSERT INTO auth_wallet_cutoffs (wallet, tokens_valid_after)
       SELECT wallet, tokens_valid_after FROM replaced.auth_wallet_cutoffs WHERE true
       ON CONFLICT (wallet) DO UPDATE SET tokens_valid_after = excluded.tokens_valid_after
       WHERE excluded.tokens_valid_after > auth_wallet_cutoffs.tokens_valid_after`,
    ).changes,
    apiKeys: db.run(
      `UPDATE api_keys SET revoked_at = r.revoked_at
       FROM (SELECT id, revoked_at FROM replaced.api_keys WHERE revoked_at IS NOT NULL) AS r
       WHERE api_keys.id = r.id AND api_keys.revoked_at IS NULL`,
    ).changes,
    featureTokens: db.run(
      `UPDATE feature_tokens SET revoked_at = r.revoked_at
       FROM (SELECT token_hash, revoked_at FROM replaced.feature_tokens WHERE revoked_at IS NOT NULL) AS r
       WHERE feature_tokens.token_hash = r.token_hash AND feature_tokens.revoked_at IS NULL`,
    ).changes,
    spentProofs:
      db.run(
        `UPDATE auth_challenges SET consumed_at = r.consumed_at
         FROM (SELECT nonce, consumed_at FROM replaced.auth_challenges WHERE consumed_at IS NOT NULL) AS r
         WHERE auth_challenges.nonce = r.nonce AND auth_challenges.consumed_at IS NULL`,
      ).changes +
      db.run(
        `UPDATE dashboard_links SET used_at = r.used_at
         FROM (SELECT code_hash, used_at FROM replaced.dashboard_links WHERE used_at IS NOT NULL) AS r
         WHERE dashboard_links.code_hash = r.code_hash AND dashboard_links.used_at IS NULL`,
      ).changes,
    webhookSecrets: carryWebhookSecrets(db),
    // Fingerprint links need nothing: one whose token was revoked or cut off (carried above) restores nothing.
    ...carryEndings(db),
  };
}

/**
 * In carryRevocations' transaction: what was ended after the backup, whose return would let the wrong party
 * in or send event bodies (access tokens among them) where the owner no longer wants them: MCP sessions
 * ended by DELETE (their ids answer 404, mcp.md); webhook endpoints whose URL, events or enabled state
 * changed since (the later settings win; a disabled one stays disabled), or that the replaced database
 * recorded as deleted (webhook_endpoint_deletions, whose records the backup keeps); and a marketplace
 * agent's later endpoint and status. Absence alone proves nothing (the replaced database may be an older
 * copy, or another installation's): a session ended and since purged comes back as the backup has it.
 */
function carryEndings(db: Database): { mcpSessions: number; webhookEndpoints: number; agentEndpoints: number } {
  const mcpSessions = db.run(
    `UPDATE mcp_sessions SET ended_at = r.ended_at
     FROM (SELECT id, ended_at FROM replaced.mcp_sessions WHERE ended_at IS NOT NULL) AS r
     WHERE mcp_sessions.id = r.id AND mcp_sessions.ended_at IS NULL`,
  ).changes;
  const changed = db.run(
    `UPDATE webhook_endpoints SET url = r.url, events = r.events, enabled = r.enabled, updated_at = r.updated_at
     FROM (SELECT id, url, events, enabled, updated_at FROM replaced.webhook_endpoints) AS r
     WHERE webhook_endpoints.id = r.id AND r.updated_at > webhook_endpoints.updated_at
       AND (r.url <> webhook_endpoints.url OR r.events <> webhook_endpoints.events OR r.enabled <> webhook_endpoints.enabled)`,
  ).changes;
  // Deleted: as an owner's DELETE leaves it, its deliveries are then dropped unsent by the outbox and
  // removed by the purge (their endpoint is gone).
  db.run("DELETE FROM webhook_previous_secrets WHERE endpoint_id IN (SELECT id FROM replaced.webhook_endpoint_deletions)");
  const deleted = db.run("DELETE FROM webhook_endpoints WHERE id IN (SELECT id FROM replaced.webhook_endpoint_deletions)").changes;
  db.run(
    `INSERT INTO webhook_endpoint_deletions (id, deleted_at)
     SELECT id, deleted_at FROM replaced.webhook_endpoint_deletions WHERE true ON CONFLICT (id) DO NOTHING`,
  );
  // An agent's notifications carry its orders' messages: a later endpoint (and the status that goes with
  // it: paused, or paused because the endpoint answered 410) wins; the rest of its profile is the backup's.
  const agentEndpoints = db.run(
    `UPDATE market_agents SET endpoint = r.endpoint, status = r.status, endpoint_gone_at = r.endpoint_gone_at, updated_at = r.updated_at
     FROM (SELECT id, endpoint, status, endpoint_gone_at, updated_at FROM replaced.market_agents) AS r
     WHERE market_agents.id = r.id AND r.updated_at > market_agents.updated_at
       AND (r.endpoint <> market_agents.endpoint OR r.status <> market_agents.status
         OR (r.endpoint_gone_at IS NULL) <> (market_agents.endpoint_gone_at IS NULL))`,
  ).changes;
  return { mcpSessions, webhookEndpoints: changed + deleted, agentEndpoints };
}

/** The wallet encryption key check of `schema` (main: the backup; replaced), or null when it has none. */
const keyCheck = (db: Database, schema: "main" | "replaced") =>
  (db.query(`SELECT key_check AS k FROM ${schema}.sealing_key_check WHERE id = 1`).get() as { k: string } | null)?.k ?? null;

/**
 * In carryOver's transaction: custodial wallets (and escrow's record, per network) that only the replaced
 * database holds, when their keys were sealed under the backup's key: the replaced database recorded the
 * same key check, or the backup holds nothing sealed yet (it then takes the replaced database's check).
 */
function carryWalletKeys(db: Database, backupHoldsSealedData: boolean): Exclude<CarriedWalletKeys, { skipped: string }> {
  const onlyReplaced = db
    .query("SELECT address FROM replaced.custodial_wallets WHERE address NOT IN (SELECT address FROM main.custodial_wallets) ORDER BY created_at")
    .values()
    .flat() as string[];
  const [ours, theirs] = [keyCheck(db, "main"), keyCheck(db, "replaced")];
  const sameKey = theirs !== null && (ours === theirs || (ours === null && !backupHoldsSealedData));
  if (onlyReplaced.length === 0 || !sameKey) {
    return { custodialWallets: 0, escrows: 0, notCarried: onlyReplaced };
  }
  if (ours === null) db.run("INSERT INTO main.sealing_key_check (id, key_check) VALUES (1, ?)", [theirs]);
  return {
    custodialWallets: db.run(
      `INSERT INTO main.custodial_wallets (address, secret_iv, secret_ciphertext, created_at)
       SELECT address, secret_iv, secret_ciphertext, created_at FROM replaced.custodial_wallets WHERE true
       ON CONFLICT (address) DO NOTHING`,
    ).changes,
    // An escrow made after the backup: without its record the next order would make another escrow, and
    // this one's balance would be held by a wallet nothing uses.
    escrows: db.run(
      `INSERT INTO main.market_escrow (network, address, created_at)
       SELECT network, address, created_at FROM replaced.market_escrow WHERE true
       ON CONFLICT (network) DO NOTHING`,
    ).changes,
    notCarried: [],
  };
}

/**
 * In carryRevocations' transaction: each webhook endpoint whose secret the replaced database rotated after
 * the backup (a later `updated_at`, another sealed secret) gets that secret and its previous secrets, so a
 * secret rotated away because it leaked does not sign again. Only when both databases seal under the same
 * key (their sealing_key_check agrees): a secret sealed under another key could not be opened.
 */
function carryWebhookSecrets(db: Database): number {
  const [ours, theirs] = [keyCheck(db, "main"), keyCheck(db, "replaced")];
  if (ours === null || ours !== theirs) return 0;
  const rotated = db
    .query(
      `SELECT r.id FROM replaced.webhook_endpoints AS r JOIN webhook_endpoints AS w ON w.id = r.id
       WHERE r.updated_at > w.updated_at AND (r.secret_iv <> w.secret_iv OR r.secret_ciphertext <> w.secret_ciphertext)`,
    )
    .all() as { id: string }[];
  for (const { id } of rotated) {
    db.run(
      `UPDATE webhook_endpoints SET secret_iv = r.secret_iv, secret_ciphertext = r.secret_ciphertext
       FROM (SELECT secret_iv, secret_ciphertext FROM replaced.webhook_endpoints WHERE id = ?1) AS r WHERE webhook_endpoints.id = ?1`,
      [id],
    );
    db.run("DELETE FROM webhook_previous_secrets WHERE endpoint_id = ?", [id]);
    db.run("INSERT INTO webhook_previous_secrets SELECT * FROM replaced.webhook_previous_secrets WHERE endpoint_id = ?", [id]);
  }
  return rotated.length;
}

/**
 * Folds the database's log into its file and removes it (closing the last connection does), so the file
 * alone is the whole database while its log is moved aside. A database that cannot be opened (a damaged
 * one is what restores are for) is left as it is: its log then moves aside with it.
 */
function foldLog(databasePath: string): void {
  try {
    foldLogInto(databasePath);
  } catch {
    // as it is
  }
}

/** Checkpoints the database's log into it and truncates the log; true when all of it went in. */
function foldLogInto(databasePath: string): boolean {
  const db = new Database(databasePath);
  try {
    const folded = db.query("PRAGMA wal_checkpoint(TRUNCATE)").get() as { busy: number; log: number; checkpointed: number };
    return folded.busy === 0 && folded.checkpointed === folded.log;
  } finally {
    db.close();
  }
}
