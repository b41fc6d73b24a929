// MCP clients for tests: the SDK's own Client, with every tool result checked for the envelope shape
// (structuredContent = the envelope = the single text item's JSON, isError = !success).
import { expect } from "bun:test";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { Json } from "./wallet.ts";

export type Envelope = { success: boolean; data?: Json; error?: string; code?: string; details?: Json; retryAfter?: number };

export type McpTestClient = {
  client: Client;
  transport: StreamableHTTPClientTransport;
  /** Sent with every request; changing it changes the next request's headers. */
  headers: Record<string, string>;
  call(name: string, args?: Record<string, unknown>): Promise<Envelope>;
  /** A call that must succeed; its data. */
  ok(name: string, args?: Record<string, unknown>): Promise<Json>;
};

/** The envelope of a tools/call result, after checking the three places it appears agree. */
export function envelopeOf(raw: unknown): Envelope {
  const result = raw as { structuredContent?: unknown; isError?: unknown; content?: unknown };
  const envelope = result.structuredContent as Envelope;
  expect(result.isError).toBe(!envelope.success);
  const content = result.content as { type: string; text: string }[];
  expect(content).toHaveLength(1);
  expect(content[0]!.type).toBe("text");
  expect(JSON.parse(content[0]!.text)).toEqual(envelope);
  return envelope;
}

/** A client on `${baseUrl}/mcp` with its own User-Agent (fingerprints!) and, optionally, a Bearer token. */
export async function connectMcp(baseUrl: string, userAgent: string, token?: string, name = "walletgate-test", extraHeaders: Record<string, string> = {}): Promise<McpTestClient> {
  const headers: Record<string, string> = { "User-Agent": userAgent, ...extraHeaders };
  if (token !== undefined) headers.Authorization = `Bearer ${token}`;
  const transport = new StreamableHTTPClientTransport(new URL(`${baseUrl}/mcp`), { requestInit: { headers } });
  const client = new Client({ name, version: "1" });
  await client.connect(transport);
  const call = async (tool: string, args: Record<string, unknown> = {}) => envelopeOf(await client.callTool({ name: tool, arguments: args }));
  const ok = async (tool: string, args: Record<string, unknown> = {}) => {
    const envelope = await call(tool, args);
    expect(envelope).toMatchObject({ success: true });
    return envelope.data!;
  };
  return { client, transport, headers, call, ok };
}
