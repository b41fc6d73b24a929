// A LiteSVM-backed Solana RPC behind a proxy that can fall silent: once `silence()` is called, requests are
// taken and never answered (a node behind a firewall that drops packets), so each waits for the ledger's own
// request timeout. For tests of what a process does while it waits on such a node.
import { startLiteSvmRpc } from "./litesvm-rpc.ts";

export type SilentRpc = {
  /** The proxy's URL, for SOLANA_RPC_URL. */
  url: string;
  /** From now on requests get no answer. */
  silence(): void;
  /** Resolves when a request arrived after `silence()`. */
  heard: Promise<void>;
  stop(): Promise<void>;
};

export async function startSilentRpc(): Promise<SilentRpc> {
  const rpc = await startLiteSvmRpc();
  let silent = false;
  const heard = Promise.withResolvers<void>();
  const never = Promise.withResolvers<Response>();
  const proxy = Bun.serve({
    port: 0,
    hostname: "127.0.0.1",
    idleTimeout: 0,
    async fetch(request) {
      const body = await request.text();
      if (silent) {
        heard.resolve();
        return never.promise;
      }
      return fetch(rpc.url, { method: "POST", headers: { "content-type": "application/json" }, body });
    },
  });
  return {
    url: `http://127.0.0.1:${proxy.port}/`,
    silence: () => {
      silent = true;
    },
    heard: heard.promise,
    async stop() {
      never.resolve(new Response("", { status: 503 }));
      await proxy.stop(true);
      await rpc.stop();
    },
  };
}
