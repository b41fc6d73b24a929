// Several processes on one DATA_DIR, as the README allows: the server, and `walletgate mcp` over stdio (the
// SDK's own StdioClientTransport) beside it. What one process guarantees alone must hold across them.
import { afterAll, describe, expect, test } from "bun:test";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { envelopeOf, type Envelope } from "./helpers/mcp.ts";
import { stdioMcpClient } from "./helpers/stdio.ts";
import { openServerDatabase, startTestServer, type TestServer } from "./helpers/server.ts";
import { call, newWallet, signIn } from "./helpers/wallet.ts";

// Tokens name their issuer (BASE_URL): the processes share one, as in production.
const BASE_URL = "http://walletgate.test";
const clients: Client[] = [];
const servers: TestServer[] = [];
afterAll(async () => {
  for (const c of clients) await c.close();
  for (const s of servers) await s.dispose();
});

async function stdioClient(dataDir: string, env: Record<string, string>): Promise<Client> {
  const client = await stdioMcpClient({ DATA_DIR: dataDir, BASE_URL, ...env }, "multi-process-test");
  clients.push(client);
  return client;
}

describe("the server and walletgate mcp on one database", () => {
  test("checkout_pay of one product by one wallet in both at once pays once: the second answers the first's payment", async () => {
    const server = await startTestServer({ AUTH_RATE_LIMIT: "off", BASE_URL });
    servers.push(server);
    const owner = (await signIn(server.url, newWallet())).sessionToken;
    const agent = await call(server.url, "/mcp", { body: { tool: "wallet_create", params: { airdropSol: 1, airdropUsdc: 100 } } });
    const token = agent.body.data.sessionToken as string;
    const wallet = agent.body.data.address as string;
    const stdio = await stdioClient(server.dataDir, { WALLETGATE_TOKEN: token });
    const overHttp = async (productId: string) => (await call(server.url, "/mcp", { body: { tool: "checkout_pay", params: { productId } }, token })).body as Envelope;
    const overStdio = async (productId: string) => envelopeOf(await stdio.callTool({ name: "checkout_pay", arguments: { productId } }));

    // A third process (this test) holds the wallet's payments of each product while both calls begin, so that
    // they meet: both wait, and once it lets go, one pays and the other answers that payment.
    const db = openServerDatabase(server.dataDir);
    db.run("PRAGMA busy_timeout = 5000");
    const rounds = 4;
    try {
      for (let i = 0; i < rounds; i++) {
        const product = await call(server.url, "/dashboard/api/products", {
          token: owner,
          body: { title: `Report ${i}`, description: "", type: "feature_unlock", price: "1", featureIds: [`report-${i}`] },
        });
        expect(product.status).toBe(201);
        const productId = product.body.productId as string;
        db.query("INSERT INTO checkout_submit_leases (wallet, product_id, holder, until) VALUES (?, ?, 'another process', ?)").run(wallet, productId, Date.now() + 60_000);
        let answered = 0;
        const calls = [overHttp(productId), overStdio(productId)].map((p) => p.then((a) => (answered++, a)));
        // Both calls must have reached the lease before it is let go: a call that comes once the other's
        // purchase is complete buys again, as it should (on a busy machine one process may lag that far).
        // Each opens its checkout just before it asks for the lease.
        const opened = () => (db.query("SELECT count(*) AS n FROM checkouts WHERE product_id = ? AND wallet = ?").get(productId, wallet) as { n: number }).n;
        for (let waited = 0; opened() < 2 && waited < 20_000; waited += 50) await Bun.sleep(50);
        expect(opened()).toBe(2);
        await Bun.sleep(400);
        expect(answered).toBe(0); // both wait for the lease
        db.query("DELETE FROM checkout_submit_leases WHERE holder = 'another process'").run();
        const answers = await Promise.all(calls);
        for (const a of answers) expect(a).toMatchObject({ success: true, data: { status: "completed" } });
        expect(answers[0]!.data!.purchaseId).toBe(answers[1]!.data!.purchaseId);
        expect(answers[0]!.data!.checkoutId).toBe(answers[1]!.data!.checkoutId);
      }
      // A lease its holder never gave back (a process killed while holding it) is taken once it runs out.
      const product = await call(server.url, "/dashboard/api/products", {
        token: owner,
        body: { title: "Report late", description: "", type: "feature_unlock", price: "1", featureIds: ["report-late"] },
      });
      const productId = product.body.productId as string;
      db.query("INSERT INTO checkout_submit_leases (wallet, product_id, holder, until) VALUES (?, ?, 'a killed process', ?)").run(wallet, productId, Date.now() - 1);
      expect(await overStdio(productId)).toMatchObject({ success: true, data: { status: "completed" } });
      const perProduct = db.query("SELECT product_id, count(*) AS n FROM purchases WHERE wallet = ? GROUP BY product_id").all(wallet) as { n: number }[];
      expect(perProduct.map((p) => p.n)).toEqual(Array(rounds + 1).fill(1));
      expect(db.query("SELECT count(*) AS n FROM checkout_submit_leases").get()).toEqual({ n: 0 }); // each given back
    } finally {
      db.close();
    }
    const balance = await call(server.url, "/mcp", { body: { tool: "wallet_get_balance", params: {} }, token });
    expect(balance.body.data.balances.usdc).toBe(100 - rounds - 1);
  }, 90_000);
});
