// Event streams (text/event-stream answers: an MCP client's GET /mcp) kept open. The server may send
// nothing on one for hours, and a connection that carries nothing is cut: by Bun after HTTP_IDLE_TIMEOUT_S
// (its idle timer is not reset by what an answer writes), by a proxy after its read timeout; and Bun sends
// the end of the headers only with the first byte of the body, so a proxy waiting for them answers its
// client 502. The caller lifts Bun's timeout for the stream; here an SSE comment (a line starting with ":",
// which clients skip) goes out at once, and another every `everyMs`, only between two events.

const encoder = new TextEncoder();
const OPENED = encoder.encode(": stream open\n\n");
const BEAT = encoder.encode(": keep-alive\n\n");

/** The interval of those comments: half the idle timeout, at most 15 s (nginx's read timeout is 60 s). */
export function heartbeatMs(httpIdleTimeoutS: number): number {
  return Math.min(15_000, (httpIdleTimeoutS * 1000) / 2);
}

/** True for an answer that is an event stream. */
export const isEventStream = (response: Response): boolean =>
  response.ok && response.body !== null && (response.headers.get("content-type") ?? "").toLowerCase().startsWith("text/event-stream");

/** True when `chunk` ends an SSE event (a blank line), so a comment written next starts a line of its own. */
const endsEvent = (chunk: Uint8Array) => chunk.length >= 2 && chunk[chunk.length - 1] === 10 && chunk[chunk.length - 2] === 10;

/**
 * `source` (an SSE body) with the comments above. It ends when `source` ends, and cancelling it (the
 * client left) cancels `source`; either way `ended` is called once.
 */
export function withHeartbeat(source: ReadableStream<Uint8Array>, everyMs: number, ended: () => void = () => {}): ReadableStream<Uint8Array> {
  const reader = source.getReader();
  let timer: ReturnType<typeof setInterval> | undefined;
  let betweenEvents = true;
  let open = true;
  const stop = () => {
    if (!open) return;
    open = false;
    clearInterval(timer);
    ended();
  };
  return new ReadableStream<Uint8Array>({
    start(controller) {
      const send = (chunk: Uint8Array) => {
        if (open) controller.enqueue(chunk);
      };
      send(OPENED);
      timer = setInterval(() => {
        if (betweenEvents) send(BEAT);
      }, everyMs);
      timer.unref?.();
      void (async () => {
        try {
          for (;;) {
            const { done, value } = await reader.read();
            if (done) break;
            send(value);
            betweenEvents = endsEvent(value);
          }
          if (open) controller.close();
        } catch (err) {
          if (open) controller.error(err);
        } finally {
          stop();
        }
      })();
    },
    cancel(reason) {
      stop();
      return reader.cancel(reason);
    },
  });
}
