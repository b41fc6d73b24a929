// `walletgate mcp` over stdio, through the SDK's own StdioClientTransport, as a desktop host starts it.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { join } from "node:path";

const ROOT = join(import.meta.dir, "..", "..");

/** A connected client of a new `walletgate mcp` process with `env` (DATA_DIR, BASE_URL, …) besides PATH and HOME. Close it when done. */
export async function stdioMcpClient(env: Record<string, string>, name = "stdio-test"): Promise<Client> {
  const transport = new StdioClientTransport({
    command: process.execPath,
    args: [join(ROOT, "src/main.ts"), "mcp"],
    env: { PATH: process.env.PATH ?? "", HOME: process.env.HOME ?? "/tmp", ...env },
    stderr: "pipe",
  });
  const client = new Client({ name, version: "1" });
  await client.connect(transport);
  return client;
}
