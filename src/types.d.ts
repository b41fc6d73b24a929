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

/**
 * The commit the executable was built from (`git rev-parse --short=12 HEAD`, "+changes" when tracked files
 * differed from it), put in by scripts/build.ts; "" when built outside a git checkout, not defined when
 * running from source. `walletgate --version` prints it.
 */
declare const WALLETGATE_BUILD_COMMIT: string | undefined;
