// MCP baseline: a bare SDK server with the same transport (web-standard Streamable HTTP, JSON
// responses, one transport and McpServer per session) and one no-op tool. Prints its URL like walletgate.
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { WebStandardStreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js";
import { isInitializeRequest } from "@modelcontextprotocol/sdk/types.js";

const sessions = new Map<string, WebStandardStreamableHTTPServerTransport>();

async function handle(request: Request): Promise<Response> {
  const body = request.method === "POST" ? await request.json() : undefined;
  const id = request.headers.get("mcp-session-id");
  let transport = id === null ? undefined : sessions.get(id);
  if (transport === undefined) {
    if (!isInitializeRequest(body)) return new Response("no session", { status: 404 });
    const fresh = new WebStandardStreamableHTTPServerTransport({
      sessionIdGenerator: () => crypto.randomUUID(),
      enableJsonResponse: true,
      onsessioninitialized: (sid) => {
        sessions.set(sid, fresh);
      },
    });
    const server = new McpServer({ name: "baseline", version: "1" });
    server.registerTool("noop", { description: "does nothing" }, async () => ({ content: [{ type: "text", text: "{}" }] }));
    await server.connect(fresh);
    transport = fresh;
  }
  return transport.handleRequest(request, { parsedBody: body });
}

const server = Bun.serve({ hostname: "127.0.0.1", port: 0, reusePort: false, fetch: (request) => (new URL(request.url).pathname === "/mcp" ? handle(request) : new Response("ok")) });
console.log(JSON.stringify({ msg: "listening", url: `http://127.0.0.1:${server.port}` }));
