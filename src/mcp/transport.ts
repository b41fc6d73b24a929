// The SDK's Streamable HTTP server transport in JSON-response mode, without its per-request leak.
import {
  WebStandardStreamableHTTPServerTransport,
  type WebStandardStreamableHTTPServerTransportOptions,
} from "@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js";

/** The transport's own bookkeeping that the workaround below reads (the SDK version is pinned exactly). */
type Internals = {
  _streamMapping: Map<string, unknown>;
  _requestToStreamMapping: Map<string | number, string>;
};

/**
 * A transport answering in JSON (`enableJsonResponse`). In SDK 1.32.2 each POST answered in JSON leaves
 * its stream's entry behind, holding the request (~5–8 KB), for the life of the session
 * (modelcontextprotocol/typescript-sdk#2559): a client that keeps one session grows the server without
 * bound. Once a response is the last one its POST waited for (the SDK then forgets the request ids of
 * that stream), the entry goes too. Where the SDK already removed it, this does nothing.
 */
export function jsonResponseTransport(options: Omit<WebStandardStreamableHTTPServerTransportOptions, "enableJsonResponse">): WebStandardStreamableHTTPServerTransport {
  const transport = new WebStandardStreamableHTTPServerTransport({ ...options, enableJsonResponse: true });
  const internals = transport as unknown as Internals;
  if (!(internals._streamMapping instanceof Map) || !(internals._requestToStreamMapping instanceof Map)) return transport;
  const send = transport.send.bind(transport);
  transport.send = async (message, sendOptions) => {
    const id = "id" in message && ("result" in message || "error" in message) ? (message.id as string | number) : undefined;
    const streamId = id === undefined ? undefined : internals._requestToStreamMapping.get(id);
    await send(message, sendOptions);
    if (streamId !== undefined && !internals._requestToStreamMapping.has(id!)) internals._streamMapping.delete(streamId);
  };
  return transport;
}
