// A JSON-RPC error as /mcp answers it over HTTP; small and free of the SDK, so that the server's own edge
// (server.ts: a body over MAX_BODY_BYTES in an MCP session) answers in the same shape without loading /mcp.

/** A JSON-RPC error answered over HTTP: `data` for the error object, `id` when the request's is known and safe to answer. */
export function jsonRpcError(
  status: number,
  code: number,
  message: string,
  headers: Record<string, string> = {},
  extra: { data?: unknown; id?: string | number | null } = {},
): Response {
  return Response.json(
    { jsonrpc: "2.0", error: { code, message, ...(extra.data === undefined ? {} : { data: extra.data }) }, id: extra.id ?? null },
    { status, headers },
  );
}
