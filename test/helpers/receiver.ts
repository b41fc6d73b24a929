// A webhook receiver on 127.0.0.1 (port 0) that verifies every delivery with the npm `standardwebhooks`
// package under the secret it is given, records what came, and answers as the test asks.
import { Webhook } from "standardwebhooks";
import type { Json } from "./wallet.ts";

export type Delivery = { id: string; type: string; body: Json; verified: boolean };

export type Receiver = {
  url: string;
  port: number;
  received: Delivery[];
  setSecret(secret: string): void;
  stop(): Promise<void>;
};

export type ReceiverOptions = {
  /** Default "/hook". */
  path?: string;
  /** Default 0 (any); a stopped receiver's port brings "the same URL" back. */
  port?: number;
  /** The response to a verified delivery; default 200 "ok". Unverified ones get 401. */
  answer?: (delivery: Delivery) => Response;
};

export function verifyingReceiver(options: ReceiverOptions = {}): Receiver {
  const path = options.path ?? "/hook";
  const answer = options.answer ?? (() => new Response("ok"));
  const received: Delivery[] = [];
  let secret = "";
  const server = Bun.serve({
    port: options.port ?? 0,
    hostname: "127.0.0.1",
    async fetch(request) {
      const text = await request.text();
      let verified = false;
      try {
        new Webhook(secret).verify(text, Object.fromEntries(request.headers));
        verified = true;
      } catch {
        verified = false;
      }
      const body = JSON.parse(text) as Json;
      const delivery = { id: request.headers.get("webhook-id") ?? "", type: body.type as string, body, verified };
      received.push(delivery);
      return verified ? answer(delivery) : new Response("bad signature", { status: 401 });
    },
  });
  return {
    url: `http://127.0.0.1:${server.port}${path}`,
    port: server.port!,
    received,
    setSecret: (s) => void (secret = s),
    stop: () => server.stop(true),
  };
}
