// Browser wallets for the pages: wallets that announce themselves through the Wallet Standard, else the
// injected `window.solana` provider (Phantom, Solflare, Backpack). Messages and transactions are bytes.

export type BrowserWallet = {
  name: string;
  address: string;
  signMessage(message: Uint8Array): Promise<Uint8Array>;
  /** Signs a serialized transaction (legacy or v0) and returns it serialized, signed. */
  signTransaction(transaction: Uint8Array): Promise<Uint8Array>;
};

type StandardAccount = { address: string; publicKey: Uint8Array };
type StandardWallet = {
  name: string;
  chains: readonly string[];
  accounts: readonly StandardAccount[];
  features: Record<string, any>;
};
type InjectedKey = { toBase58(): string };
export type InjectedProvider = {
  publicKey?: InjectedKey | null;
  connect(): Promise<{ publicKey?: InjectedKey } | void>;
  signMessage(message: Uint8Array, encoding?: string): Promise<{ signature: Uint8Array } | Uint8Array>;
  signTransaction<T>(transaction: T): Promise<T>;
};

const standardWallets: StandardWallet[] = [];
const WALLETS_CHANGED = "walletgate:wallets-changed";
const register = (...wallets: StandardWallet[]) => {
  standardWallets.push(...wallets.filter((w) => w.features["standard:connect"] && w.features["solana:signMessage"]));
  window.dispatchEvent(new Event(WALLETS_CHANGED));
  return () => {};
};
window.addEventListener("wallet-standard:register-wallet", (event) => (event as CustomEvent).detail({ register }));
window.dispatchEvent(new CustomEvent("wallet-standard:app-ready", { detail: { register } }));

function injected(): InjectedProvider | null {
  const w = window as unknown as Record<string, any>;
  return w.phantom?.solana ?? w.solflare ?? w.backpack ?? w.solana ?? null;
}

export class WalletMissing extends Error {
  constructor() {
    super("No Solana wallet was found in this browser. Install Phantom, Solflare or Backpack, then reload the page.");
  }
}

export class WalletRejected extends Error {
  constructor() {
    super("The request was rejected in your wallet.");
  }
}

/** Code 4001 is the wallets' "user rejected the request". */
function rejected(err: unknown): boolean {
  const e = err as { code?: number; name?: string; message?: string } | null;
  return e?.code === 4001 || e?.name === "WalletSignTransactionError" || /reject|denied|cancel/i.test(e?.message ?? "");
}

async function asked<T>(work: () => Promise<T>): Promise<T> {
  try {
    return await work();
  } catch (err) {
    throw rejected(err) ? new WalletRejected() : err;
  }
}

/** How an injected provider signs serialized bytes (it takes @solana/web3.js objects): given by pages that pay. */
export type ProviderSigner = (provider: InjectedProvider, transaction: Uint8Array) => Promise<Uint8Array>;

/** The Wallet Standard chain of a network name ("mainnet-beta" is "solana:mainnet"). */
export function chainOf(network: string): string {
  return network === "mainnet" || network === "mainnet-beta" ? "solana:mainnet" : `solana:${network}`;
}

/** The Wallet Standard wallets of this browser, those that name `chain` first (many name no localnet). */
function walletsFor(chain: string): StandardWallet[] {
  return [...standardWallets.filter((w) => w.chains.includes(chain)), ...standardWallets.filter((w) => !w.chains.includes(chain))];
}

/** The names of the wallets a user may choose between for `chain`, the likeliest first (empty: the injected provider, if any). */
export function walletNames(chain: string): string[] {
  return walletsFor(chain).map((w) => w.name);
}

/** The name of a wallet that has already given this site `address` among its accounts, if any. */
export function walletHolding(address: string): string | null {
  return standardWallets.find((w) => w.accounts.some((a) => a.address === address))?.name ?? null;
}

/** The name of the wallet connected last on this page (what a sign-in again offers first). */
let lastConnected: string | null = null;
export function lastConnectedWallet(): string | null {
  return lastConnected;
}

/** Calls `listener` when a wallet announces itself (extensions may do so after the page has loaded); returns the unsubscribe. */
export function onWalletsChanged(listener: () => void): () => void {
  window.addEventListener(WALLETS_CHANGED, listener);
  return () => window.removeEventListener(WALLETS_CHANGED, listener);
}

/**
 * Connects the wallet named `name` (one of walletNames), else the likeliest for `chain` (e.g. "solana:devnet");
 * without any Wallet Standard wallet, the injected provider.
 */
export async function connectWallet(chain: string, options: { signWithProvider?: ProviderSigner; name?: string } = {}): Promise<BrowserWallet> {
  const candidates = walletsFor(chain);
  const standard = candidates.find((w) => w.name === options.name) ?? candidates[0];
  if (standard !== undefined) {
    lastConnected = standard.name;
    const { accounts } = await asked<{ accounts: StandardAccount[] }>(() => standard.features["standard:connect"].connect());
    const account = accounts[0];
    if (account === undefined) throw new WalletRejected();
    return {
      name: standard.name,
      address: account.address,
      async signMessage(message) {
        const [out] = await asked<{ signature: Uint8Array }[]>(() => standard.features["solana:signMessage"].signMessage({ account, message }));
        return out!.signature;
      },
      async signTransaction(transaction) {
        const feature = standard.features["solana:signTransaction"];
        if (feature === undefined) throw new Error(`${standard.name} cannot sign transactions`);
        const [out] = await asked<{ signedTransaction: Uint8Array }[]>(() => feature.signTransaction({ account, transaction, chain }));
        return out!.signedTransaction;
      },
    };
  }
  const provider = injected();
  if (provider === null) throw new WalletMissing();
  const connected = await asked(() => provider.connect());
  const key = (connected && connected.publicKey) ?? provider.publicKey;
  if (!key) throw new WalletRejected();
  return {
    name: "browser wallet",
    address: key.toBase58(),
    async signMessage(message) {
      const out = await asked(() => provider.signMessage(message, "utf8"));
      return out instanceof Uint8Array ? out : new Uint8Array(out.signature);
    },
    async signTransaction(bytes) {
      if (options.signWithProvider === undefined) throw new Error("this page does not sign transactions");
      return asked(() => options.signWithProvider!(provider, bytes));
    },
  };
}

export function toBase64(bytes: Uint8Array): string {
  let binary = "";
  for (const b of bytes) binary += String.fromCharCode(b);
  return btoa(binary);
}

export function fromBase64(text: string): Uint8Array {
  return Uint8Array.from(atob(text), (c) => c.charCodeAt(0));
}
