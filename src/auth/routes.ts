// HTTP edge of wallet sign-in: /auth/challenge, /auth/verify, /auth/session, /auth/revoke, /auth/revoke-all.
import { Elysia, t } from "elysia";
import { ErrorBody } from "../http-schemas.ts";
import type { Deps } from "../deps.ts";
import { issueChallenge } from "./challenge.ts";
import type { ClientInfo } from "./fingerprint.ts";
import { authenticateToken, revokeSessionToken, sessionStatus } from "./sessions.ts";
import { AppError, jsonAnyBodyParser } from "../errors.ts";
import { bearerToken } from "../lib/bearer.ts";
import { revokeAllSessions, signIn } from "./sign-in.ts";

// No maxLength on these: an over-long value is INVALID_ADDRESS / NONCE_NOT_FOUND / INVALID_SIGNATURE like any
// other bad one (auth.md), and the body limit already bounds them.
const Address = t.String({ description: "Solana wallet address: base58 of a 32-byte Ed25519 public key" });
const Iso = t.String({ format: "date-time" });

const SignedChallenge = t.Object({
  walletAddress: Address,
  nonce: t.String({ description: "the nonce of a challenge issued for this wallet" }),
  signature: t.String({
    description: "standard padded base64 of the 64-byte Ed25519 signature over the challenge message's UTF-8 bytes",
  }),
  message: t.Optional(t.String({ description: "the challenge message, if sent: must match byte for byte" })),
});


function requireBearer(header: string | undefined): string {
  const token = bearerToken(header);
  if (token === null) throw new AppError("UNAUTHENTICATED", "a session token is required: Authorization: Bearer <token>");
  return token;
}

export function authRoutes(deps: Deps, clientOf: (request: Request) => ClientInfo) {
  return new Elysia({ name: "auth-routes", prefix: "/auth", detail: { tags: ["auth"] } })
    .get("/challenge", ({ query, request }) => issueChallenge(deps, query.wallet, clientOf(request)), {
      query: t.Object({ wallet: Address }),
      response: { 200: t.Object({ nonce: t.String(), message: t.String(), expiresAt: Iso }), 400: ErrorBody, 429: ErrorBody },
      detail: { summary: "Get a sign-in challenge", description: "Sign `message` with the wallet key, then POST /auth/verify." },
    })
    .post(
      "/verify",
      async ({ body, request }) => {
        const session = await signIn(deps, body, clientOf(request));
        return { walletAddress: session.walletAddress, sessionToken: session.token, isNewSession: true as const, expiresAt: session.expiresAt };
      },
      {
        parse: jsonAnyBodyParser,
        body: SignedChallenge,
        response: {
          200: t.Object({ walletAddress: t.String(), sessionToken: t.String(), isNewSession: t.Literal(true), expiresAt: Iso }),
          400: ErrorBody,
          401: ErrorBody,
          429: ErrorBody,
        },
        detail: { summary: "Verify a signed challenge and get a session token" },
      },
    )
    .get(
      "/session",
      async ({ headers }) => sessionStatus(deps, await authenticateToken(deps, requireBearer(headers.authorization))),
      {
        response: {
          200: t.Object({
            authenticated: t.Literal(true),
            walletAddress: t.String(),
            sessionId: t.String(),
            network: t.String(),
            issuedAt: Iso,
            expiresAt: Iso,
            expiresInSeconds: t.Integer(),
            refreshRecommended: t.Boolean(),
          }),
          401: ErrorBody,
        },
        detail: { summary: "Describe the session of a Bearer token", security: [{ bearer: [] }] },
      },
    )
    .post(
      "/revoke",
      async ({ headers }) => {
        await revokeSessionToken(deps, requireBearer(headers.authorization));
        return { revoked: true as const };
      },
      {
        response: { 200: t.Object({ revoked: t.Literal(true) }), 401: ErrorBody },
        detail: { summary: "Revoke the Bearer token now", security: [{ bearer: [] }] },
      },
    )
    .post("/revoke-all", ({ body, request }) => revokeAllSessions(deps, body, clientOf(request)), {
      parse: jsonAnyBodyParser,
      body: SignedChallenge,
      response: { 200: t.Object({ revoked: t.Integer(), walletAddress: t.String() }), 400: ErrorBody, 401: ErrorBody, 429: ErrorBody },
      detail: {
        summary: "Revoke every token of a wallet",
        description: "Authorised by a freshly signed challenge instead of a token: for an owner whose token leaked.",
      },
    });
}
