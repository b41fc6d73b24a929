// The JSON-response transport keeps nothing of a request once it is answered (the SDK's own keeps an entry
// per POST for the life of the session: typescript-sdk#2559).
import { expect, test } from "bun:test";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { WebStandardStreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js";
import { jsonResponseTransport } from "./transport.ts";

const URL_ = "http://127.0.0.1/mcp";
const headers = { "content-type": "application/json", accept: "application/json, text/event-stream" };

/** initialize, initialized, then `calls` tool calls (one POST each) and a batch of two; how many stream entries stay. */
async function entriesLeft(transport: WebStandardStreamableHTTPServerTransport, calls: number): Promise<number> {
  const server = new McpServer({ name: "t", version: "1" });
  server.registerTool("noop", { description: "nothing" }, async () => ({ content: [{ type: "text", text: "ok" }] }));
  await server.connect(transport);
  const post = async (body: unknown, version = "2025-06-18") => {
    const res = await transport.handleRequest(
      new Request(URL_, { method: "POST", headers: { ...headers, ...(transport.sessionId ? { "mcp-session-id": transport.sessionId, "mcp-protocol-version": version } : {}) }, body: JSON.stringify(body) }),
    );
    return res.status === 202 ? null : await res.json();
  };
  const initialize = { jsonrpc: "2.0", id: 0, method: "initialize", params: { protocolVersion: "2025-03-26", capabilities: {}, clientInfo: { name: "c", version: "1" } } };
  expect(await post(initialize)).toMatchObject({ id: 0, result: {} });
  await post({ jsonrpc: "2.0", method: "notifications/initialized" }, "2025-03-26");
  const call = (id: number) => ({ jsonrpc: "2.0", id, method: "tools/call", params: { name: "noop", arguments: {} } });
  for (let id = 1; id <= calls; id++) expect(await post(call(id), "2025-03-26")).toMatchObject({ id, result: {} });
  expect(await post([call(1000), call(1001)], "2025-03-26")).toMatchObject([{ id: 1000 }, { id: 1001 }]);
  const left = (transport as unknown as { _streamMapping: Map<string, unknown> })._streamMapping.size;
  await server.close();
  return left;
}

test("every answered POST leaves nothing behind in the transport", async () => {
  expect(await entriesLeft(jsonResponseTransport({ sessionIdGenerator: () => "s1" }), 20)).toBe(0);
});

test("(the SDK's transport alone keeps one entry per POST: what the wrapper is for)", async () => {
  const plain = new WebStandardStreamableHTTPServerTransport({ sessionIdGenerator: () => "s2", enableJsonResponse: true });
  expect(await entriesLeft(plain, 20)).toBe(22); // initialize, 20 calls, the batch
});
