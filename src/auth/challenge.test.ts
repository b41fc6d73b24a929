// The challenge message's host and chain lines for other BASE_URLs and networks than the HTTP tests' server
// (a loopback address with its port, localnet).
import { expect, test } from "bun:test";
import { testDeps } from "../../test/helpers/deps.ts";
import { newWallet } from "../../test/helpers/wallet.ts";
import { issueChallenge } from "./challenge.ts";

const client = { ip: "192.0.2.20", userAgent: "challenge-test/1" };

test("{host} is BASE_URL's host, with its port only when it is not the scheme's default; {network} names the chain", async () => {
  const cases = [
    { baseUrl: "https://example.com", network: "devnet", host: "example.com" },
    { baseUrl: "https://example.com:443", network: "devnet", host: "example.com" },
    { baseUrl: "http://example.com:80", network: "localnet", host: "example.com" },
    { baseUrl: "https://example.com:8443", network: "devnet", host: "example.com:8443" },
    { baseUrl: "http://[::1]:3000", network: "localnet", host: "[::1]:3000" },
  ];
  for (const c of cases) {
    const { deps } = await testDeps({ NETWORK: c.network }, { baseUrl: c.baseUrl });
    const wallet = newWallet();
    const { message } = await issueChallenge(deps, wallet.address, client);
    const lines = message.split("\n");
    expect({ baseUrl: c.baseUrl, first: lines[0], uri: lines[5], chain: lines[7] }).toEqual({
      baseUrl: c.baseUrl,
      first: `${c.host} wants you to sign in with your Solana account:`,
      uri: `URI: ${deps.baseUrl}`,
      chain: `Chain ID: solana:${c.network}`,
    });
  }
});
