// Tool edge of wallet sign-in (mcp.md "Session and wallet"): session_auth, wallet_connect, session_info,
// session_restore, wallet_disconnect.
import { z } from "zod";
import { AppError } from "../errors.ts";
import { defineTool, headerStillWins, requireWallet, type Tool } from "../mcp/registry.ts";
import { explainDeadCustodialToken, isCustodial } from "../wallets/custody.ts";
import { issueChallenge } from "./challenge.ts";
import { disconnectWallet, restoreSession, sessionStatus } from "./sessions.ts";
import { signIn } from "./sign-in.ts";
import { walletNamedBy } from "./tokens.ts";

const walletAddress = z.string().describe("Solana wallet address: base58 of a 32-byte Ed25519 public key");

export const sessionAuth = defineTool({
  name: "session_auth",
  description:
    "Step 1 of signing in with your own wallet: get a challenge for walletAddress. Sign `message` (its UTF-8 bytes, " +
    "exactly) with the wallet's key, then call wallet_connect with the nonce and the base64 signature before the challenge's expiresAt (5 minutes by default).",
  input: { walletAddress },
  needsWallet: false,
  run: async ({ deps, client }, input) => issueChallenge(deps, input.walletAddress, client),
});

export const walletConnect = defineTool({
  name: "wallet_connect",
  description:
    "Step 2 of signing in with your own wallet: send the challenge's nonce and the Ed25519 signature (standard base64, " +
    "not hex) of its message. Returns a session token and binds this MCP session to the wallet. The wallet stays " +
    "non-custodial: transfers come back unsigned for you to sign. Over HTTP a session token in the Authorization header " +
    "wins over the binding (data.note says so when it names another wallet or is not valid).",
  input: {
    walletAddress,
    nonce: z.string().describe("the nonce from session_auth"),
    signature: z.string().describe("standard padded base64 of the 64-byte signature over the challenge message"),
  },
  needsWallet: false,
  run: async ({ deps, session, client, caller }, input) => {
    const issued = await signIn(deps, input, client);
    await session.bind({ walletAddress: issued.walletAddress, sessionId: issued.sessionId, jti: issued.jti, tokenExpiresAtS: issued.expiresAtS });
    return {
      walletAddress: issued.walletAddress,
      sessionToken: issued.token,
      isNewSession: true,
      expiresAt: issued.expiresAt,
      ...headerStillWins({ session, caller }, issued.walletAddress),
    };
  },
});

export const sessionInfo = defineTool({
  name: "session_info",
  description: "Who this session is: the wallet, how it was established (token, binding or fingerprint), expiry, network.",
  input: {},
  needsWallet: false,
  run: async ({ deps, caller, session }) => {
    if (caller.kind === "anonymous") {
      if (caller.tokenError !== null) throw caller.tokenError;
      return { authenticated: false, network: deps.config.network };
    }
    return {
      ...sessionStatus(deps, caller),
      custodial: await isCustodial(deps, caller.walletAddress),
      restoredBy: caller.source,
      mcpSessionId: session.id,
    };
  },
});

export const sessionRestore = defineTool({
  name: "session_restore",
  description:
    "Resume with a session token from earlier: binds this MCP session to its wallet. With less than the server's " +
    "REFRESH_THRESHOLD_S left (an hour by default), a new " +
    "token of the same session is returned (refreshed: true); keep the new one.",
  input: { token: z.string().describe("a session token (JWT) issued by this server") },
  needsWallet: false,
  run: async ({ deps, session, caller }, input) => {
    const { session: restored, ...data } = await restoreSession(deps, input.token).catch(async (err: unknown) => {
      throw err instanceof AppError ? await explainDeadCustodialToken(deps, err, () => walletNamedBy(input.token)) : err;
    });
    await session.bind({ walletAddress: restored.walletAddress, sessionId: restored.sessionId, jti: restored.jti, tokenExpiresAtS: restored.expiresAtS });
    return { ...data, ...headerStillWins({ session, caller }, restored.walletAddress) };
  },
});

export const walletDisconnect = defineTool({
  name: "wallet_disconnect",
  description:
    "Sign out: the session token is revoked at once, and this MCP session and its fingerprint forget the wallet. For a " +
    "wallet made by wallet_create this is for good unless you keep another of its tokens: only this server holds its " +
    "key, so no one can sign in to it again (its funds then need the server's operator).",
  input: {},
  needsWallet: false, // a binding whose token died (revoked, expired) can still be signed out of
  run: async ({ deps, caller, session, client }) => {
    const dead = caller.kind === "anonymous" ? caller.deadBinding : undefined;
    // Revoking a dead token changes nothing, but the same write drops this client's fingerprint link to the wallet.
    const wallet = dead !== undefined ? { token: null, walletAddress: dead.walletAddress, jti: dead.jti } : requireWallet(caller);
    // The session's binding goes too, whichever wallet it names (a header token may be another wallet's): this
    // client's fingerprint forgets that wallet as well, or a new session from here would be restored to it.
    const bound = session.bound?.()?.walletAddress;
    await disconnectWallet(deps, wallet, client, bound); // the token and this client's links, one write
    await session.unbind();
    return { disconnected: true };
  },
});

export const AUTH_TOOLS: readonly Tool[] = [sessionAuth, walletConnect, sessionInfo, sessionRestore, walletDisconnect];
