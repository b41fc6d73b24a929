// Lets TypeScript see SQL migration files that Bun embeds as text.
declare module "*.sql" {
  const text: string;
  export default text;
}

/**
 * The migrated, empty database (gzip, base64) that scripts/build.ts puts in the executable
 * (src/db/fresh.ts); not defined when running from source.
 */
declare const WALLETGATE_FRESH_DATABASE: string | undefined;
