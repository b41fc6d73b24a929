// requireNetwork: a database is served on one NETWORK, recorded by serve and mcp, inferred for a database
// from before the record from what it holds.
import { describe, expect, test } from "bun:test";
import { testDeps } from "../../test/helpers/deps.ts";
import { loadConfig } from "../config.ts";
import { requireNetwork } from "./create.ts";

const devnet = () => loadConfig({ DATA_DIR: "/nonexistent", NETWORK: "devnet" });
const mainnet = () => loadConfig({ DATA_DIR: "/nonexistent", NETWORK: "mainnet", SOLANA_RPC_URL: "https://rpc.example", JWT_SECRET: "m".repeat(40), WALLET_ENCRYPTION_KEY: "ab".repeat(32) });

describe("requireNetwork", () => {
  test("without a record or anything paid, any network is taken; only a recording start records it", async () => {
    const { deps } = await testDeps();
    requireNetwork(devnet(), deps.db, false);
    await deps.db.settled();
    expect(deps.db.sqlite.query("SELECT * FROM network_in_use").all()).toEqual([]);
    requireNetwork(deps.config, deps.db, true);
    await deps.db.settled();
    expect(deps.db.sqlite.query("SELECT network FROM network_in_use").all()).toEqual([{ network: "localnet" }]);
    expect(() => requireNetwork(devnet(), deps.db, true)).toThrow("this database is served on NETWORK=localnet, not devnet");
  });

  test("inferred from the newest purchase (a cluster name: mainnet-beta is mainnet), else the escrow wallet's network", async () => {
    const { deps } = await testDeps();
    deps.db.sqlite.run("PRAGMA foreign_keys = OFF");
    deps.db.sqlite.run("INSERT INTO market_escrow (network, address, created_at) VALUES ('devnet', 'e', 0)");
    expect(() => requireNetwork(deps.config, deps.db, false)).toThrow("this database is served on NETWORK=devnet, not localnet");
    requireNetwork(devnet(), deps.db, false);
    const buy = (id: string, network: string) =>
      deps.db.sqlite.run(
        "INSERT INTO purchases (id, owner, product_id, checkout_id, wallet, tx_hash, amount, token, network, purchased_at) VALUES (?, 'o', 'prod', ?, 'w', ?, 1, 'usdc', ?, 0)",
        [id, `c_${id}`, `sig_${id}`, network],
      );
    buy("p1", "mainnet-beta");
    expect(() => requireNetwork(devnet(), deps.db, false)).toThrow("this database is served on NETWORK=mainnet, not devnet");
    requireNetwork(mainnet(), deps.db, false);
    buy("p2", "localnet");
    requireNetwork(deps.config, deps.db, false); // the newest purchase's
  });
});
