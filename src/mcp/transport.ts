// The SDK's Streamable HTTP transport in JSON-response mode, without its per-request leak, and with a
// bound on what one POST's batch of requests may be answered with.
import {
  WebStandardStreamableHTTPServerTransport,
  type WebStandardStreamableHTTPServerTransportOptions,
} from "@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js";
import type { JSONRPCMessage } from "@modelcontextprotocol/sdk/types.js";

/** The transport's own bookkeeping that the workaround below reads (the SDK version is pinned exactly). */
type Internals = {
  _streamMapping: Map<string, unknown>;
  _requestToStreamMapping: Map<string | number, string>;
};

/**
 * The characters of JSON that the answers to one POST's batch (MCP 2025-03-26: up to 100 requests) may add
 * up to. A JSON answer is held whole until its last part is ready: 100 searches of 5 MB each made one 1 GB
 * answer and took the server past 2 GB. An answer that does not fit in what is left is replaced by an error saying so.
 */
export const MAX_BATCH_ANSWER_CHARS = 16 * 1024 * 1024;

/** What is left of one batch's budget, shared by its requests' ids. */
export type AnswerBudget = { left: number };

/**
 * A transport answering in JSON (`enableJsonResponse`). In SDK 1.32.2 each POST answered in JSON leaves
 * its stream's entry behind, holding the request (~5–8 KB), for the life of the session
 * (modelcontextprotocol/typescript-sdk#2559): a client that keeps one session grows the server without
 * bound. Once a response is the last one its POST waited for (the SDK then forgets the request ids of
 * that stream), the entry goes too. Where the SDK already removed it, this does nothing.
 *
 * `budgets`: the batch budget of each request id that is part of a batch (the caller sets and clears them).
 */
export function jsonResponseTransport(
  options: Omit<WebStandardStreamableHTTPServerTransportOptions, "enableJsonResponse">,
  budgets: Map<string | number, AnswerBudget> = new Map(),
): WebStandardStreamableHTTPServerTransport {
  const transport = new WebStandardStreamableHTTPServerTransport({ ...options, enableJsonResponse: true });
  const internals = transport as unknown as Internals;
  const leaks = internals._streamMapping instanceof Map && internals._requestToStreamMapping instanceof Map;
  const send = transport.send.bind(transport);
  transport.send = async (message, sendOptions) => {
    const id = "id" in message && ("result" in message || "error" in message) ? (message.id as string | number) : undefined;
    const budget = id === undefined ? undefined : budgets.get(id);
    if (budget !== undefined) message = withinBudget(message, id!, budget);
    const streamId = id === undefined || !leaks ? undefined : internals._requestToStreamMapping.get(id);
    await send(message, sendOptions);
    if (streamId !== undefined && !internals._requestToStreamMapping.has(id!)) internals._streamMapping.delete(streamId);
  };
  return transport;
}

/** The answer, or an error in its place when it would take its batch past the budget. */
function withinBudget(message: JSONRPCMessage, id: string | number, budget: AnswerBudget): JSONRPCMessage {
  const size = JSON.stringify(message).length;
  if (size <= budget.left) {
    budget.left -= size;
    return message;
  }
  return {
    jsonrpc: "2.0",
    id,
    error: {
      code: -32000,
      message: `this answer (${size} characters) would take the answers to its batch past ${MAX_BATCH_ANSWER_CHARS} characters: send the request again on its own`,
    },
  };
}
