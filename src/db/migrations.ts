// The numbered migrations, embedded in the executable as text and applied in order.
import m0001 from "./migrations/0001_auth.sql" with { type: "text" };

export type Migration = { version: number; name: string; sql: string };

export const MIGRATIONS: readonly Migration[] = [{ version: 1, name: "auth", sql: m0001 }];
