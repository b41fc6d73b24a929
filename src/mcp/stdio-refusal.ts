// `walletgate mcp` that cannot start (a setting refused, another BASE_URL or JWT secret than the server's,
// a database of another version): an MCP host shows a process that exits at once only as "Connection
// closed", the reason being on stderr, in a log file the user may never open. So the refusal is also the
// answer to the host's first request (its `initialize`), which hosts show to the user.

/** JSON-RPC's range for errors a server defines: this one means the server did not start. */
const NOT_STARTED = -32000;
/** Hosts send `initialize` as soon as the process is up; a process no host talks to is not kept. */
const WAIT_MS = 10_000;
/** A first message larger than this is not one worth answering (the transport's own limit is 10 MB). */
const MAX_BUFFERED = 1_000_000;

/**
 * Reads stdin until the first JSON-RPC request and answers it with `message` as an error; notifications
 * before it are passed over. Returns at end of input, after `waitMs`, or at once when stdin is a terminal.
 */
export async function answerFirstRequest(message: string, waitMs = WAIT_MS): Promise<void> {
  if (process.stdin.isTTY) return;
  const reader = Bun.stdin.stream().getReader();
  const timer = setTimeout(() => void reader.cancel().catch(() => {}), waitMs);
  const decoder = new TextDecoder();
  let buffered = "";
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) return;
      buffered += decoder.decode(value, { stream: true });
      let end: number;
      while ((end = buffered.indexOf("\n")) >= 0) {
        const id = requestId(buffered.slice(0, end));
        buffered = buffered.slice(end + 1);
        if (id !== undefined) {
          const answer = { jsonrpc: "2.0", id, error: { code: NOT_STARTED, message } };
          await Bun.write(Bun.stdout, `${JSON.stringify(answer)}\n`);
          return;
        }
      }
      if (buffered.length > MAX_BUFFERED) return;
    }
  } catch {
    return; // stdin cancelled by the timer, or unreadable: the refusal stays on stderr only
  } finally {
    clearTimeout(timer);
  }
}

/** The id of a JSON-RPC request on this line; undefined for a notification, an answer or anything else. */
function requestId(line: string): string | number | undefined {
  try {
    const message: unknown = JSON.parse(line);
    if (typeof message !== "object" || message === null || !("method" in message) || !("id" in message)) return undefined;
    const { id } = message as { id: unknown };
    return typeof id === "string" || typeof id === "number" ? id : undefined;
  } catch {
    return undefined;
  }
}
