// In-process Deps for domain tests: an in-memory database (or a file, where caches between commits matter),
// a manual clock, a silent logger.
import { loadConfig, type Secrets } from "../../src/config.ts";
import { openDatabase } from "../../src/db/open.ts";
import { migrate } from "../../src/db/migrate.ts";
import { createDeps, type Deps } from "../../src/deps.ts";
import { manualClock } from "../../src/lib/clock.ts";
import { cryptoRandom, type Random } from "../../src/lib/ids.ts";
import { createLogger } from "../../src/log.ts";

export async function testDeps(env: Record<string, string> = {}, options: { random?: Random; dbPath?: string; baseUrl?: string } = {}) {
  const config = loadConfig({ DATA_DIR: "/nonexistent", LOG_LEVEL: "silent", AUTH_RATE_LIMIT: "off", ...env });
  const clock = manualClock();
  const db = openDatabase(options.dbPath ?? ":memory:");
  migrate(db.sqlite, clock.now());
  const secrets: Secrets = {
    jwtSecret: new TextEncoder().encode("unit-test-secret-unit-test-secret-0001"),
    jwtSecretPrevious: null,
    walletEncryptionKey: new Uint8Array(32),
  };
  const deps: Deps = await createDeps({
    config,
    secrets,
    baseUrl: options.baseUrl ?? "http://walletgate.test",
    db,
    clock,
    random: options.random ?? cryptoRandom,
    log: createLogger("silent", "json"),
  });
  return { deps, clock, db };
}
