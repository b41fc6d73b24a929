// Event streams (text/event-stream answers: an MCP client's GET /mcp) kept open. One may carry nothing
// but the MCP SDK's comment every 15 s, and Bun cut it after HTTP_IDLE_TIMEOUT_S (10 s by default; what an
// answer writes does not reset its idle timer); and Bun sends the end of the headers only with the first
// byte of the body, so a proxy waiting for them answered its client 502. The caller lifts Bun's timeout for
// the stream; here an SSE comment (a line starting with ":", which clients skip) goes out at once.

const OPENED = new TextEncoder().encode(": stream open\n\n");

/** True for an answer that is an event stream. */
export const isEventStream = (response: Response): boolean =>
  response.ok && response.body !== null && (response.headers.get("content-type") ?? "").toLowerCase().startsWith("text/event-stream");

/**
 * `source` (an SSE body) after an opening comment. It ends when `source` ends, and cancelling it (the
 * client left) cancels `source`; either way `ended` is called once.
 */
export function withOpeningComment(source: ReadableStream<Uint8Array>, ended: () => void): ReadableStream<Uint8Array> {
  const reader = source.getReader();
  let open = true;
  const end = () => {
    if (open) ended();
    open = false;
  };
  return new ReadableStream<Uint8Array>({
    start(controller) {
      controller.enqueue(OPENED);
    },
    async pull(controller) {
      try {
        const { done, value } = await reader.read();
        if (done) {
          end();
          controller.close();
        } else {
          controller.enqueue(value);
        }
      } catch (err) {
        end();
        controller.error(err);
      }
    },
    cancel(reason) {
      end();
      return reader.cancel(reason);
    },
  });
}
