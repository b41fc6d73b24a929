// Where the webhooks delivery worker sends an agent's notifications, and what it does with the answer: a
// synchronous `200 {"reply": "…"}` becomes the provider's message; `410 Gone` pauses the agent.
import type { Deps } from "../deps.ts";
import { errorText } from "../errors.ts";
import { openWebhookSecret } from "../webhooks/endpoints.ts";
import type { AgentTargets } from "../webhooks/outbox.ts";
import { agentReplyWrite } from "./conversations.ts";
import { REPLYABLE_EVENTS } from "./events.ts";
import * as store from "./store.ts";

/**
 * Bytes of an endpoint's answer read for a reply: 4000 characters in their longest spelling (a character
 * outside the BMP escaped as two `\uXXXX`, 12 bytes) and the object around them, with room to spare for a
 * longer reply that is cut to 4000. A longer answer is cut, fails to parse and is ignored.
 */
export const MAX_AGENT_RESPONSE_BYTES = 64 * 1024;

/** The text of a `{"reply": "…"}` answer; null for anything else (not JSON, not an object, reply not a string). */
export function replyText(body: string): string | null {
  let parsed: unknown;
  try {
    parsed = JSON.parse(body);
  } catch {
    return null;
  }
  if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) return null;
  const reply = (parsed as { reply?: unknown }).reply;
  return typeof reply === "string" ? reply : null;
}

/**
 * The marketplace's side of the delivery worker (`createDeliveryWorker(deps, { agents })`).
 *
 * Notifications go to an agent whatever its status: pausing only takes it out of search and refuses new
 * conversations, while its existing conversations and orders (a paid order's dispute, an expiry) still
 * concern it. They stop only after the endpoint answered `410 Gone` — the agent is then paused too — until
 * its owner sets a new endpoint or a status with provider_update. A secret that does not open (the
 * encryption key changed) resolves to no secrets: the worker counts a failed attempt and retries.
 */
export function agentTargets(deps: Deps): AgentTargets {
  return {
    maxResponseBytes: MAX_AGENT_RESPONSE_BYTES,
    async resolve(agentId) {
      const agent = await store.findAgent(deps.db, agentId);
      if (agent === null) return null;
      let secrets: string[] = [];
      try {
        secrets = [openWebhookSecret(deps, agent.id, agent.secretIv, agent.secretCiphertext)];
      } catch (err) {
        deps.log.error("agent webhook secret cannot be decrypted", { agentId, error: errorText(err) });
      }
      return { url: agent.endpoint, secrets, enabled: agent.endpointGoneAt === null };
    },
    async answerWrite(delivery, response) {
      if (!REPLYABLE_EVENTS.includes(delivery.type) || response.status !== 200) return null;
      const text = replyText(response.body);
      if (text === null) return null;
      return agentReplyWrite(deps, { eventId: delivery.eventId, agentId: delivery.agentId, text });
    },
    goneInWrite: (agentId, url, now) => store.markEndpointGoneInWrite(deps.db, agentId, url, now),
  };
}
