// Enforces STYLE.md's shape: import directions, where SQL and the environment may be touched, no barrels.
import { describe, expect, test } from "bun:test";
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { join, relative, dirname, resolve } from "node:path";
import ts from "typescript";

const SRC = join(import.meta.dir, "../src");

function sourceFiles(dir = SRC): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) return sourceFiles(path);
    return path.endsWith(".ts") && !path.endsWith(".test.ts") && !path.endsWith(".d.ts") ? [path] : [];
  });
}

const files = sourceFiles().map((path) => ({
  path,
  rel: relative(SRC, path),
  text: readFileSync(path, "utf8"),
}));

type SourceFile = { path: string; rel: string; text: string };

/** A local specifier as the runtime resolves it (with or without its extension), src-relative. */
function resolveLocal(fromPath: string, spec: string): string {
  const base = resolve(dirname(fromPath), spec);
  // Bun also takes `x.js` for `x.ts`, as TypeScript's own resolution does.
  const candidates = [base, `${base}.ts`, `${base}.tsx`, `${base}/index.ts`, ...(base.endsWith(".js") ? [`${base.slice(0, -3)}.ts`] : [])];
  const found = candidates.find((p) => existsSync(p) && statSync(p).isFile());
  return relative(SRC, found ?? base);
}

/**
 * Every module specifier a file loads — static imports, re-exports, `import()`, `require()` — resolved to a
 * src-relative path when local. A dynamic load whose specifier is not a plain literal is returned as
 * `<computed>`, which no rule accepts: the rules below must be able to see where every import goes.
 */
function importsOf(file: { path: string; text: string }): string[] {
  return specifiersOf(file.text).map((s) => (s.startsWith(".") ? resolveLocal(file.path, s) : s));
}

/** The specifiers as written (see importsOf). */
function specifiersOf(text: string): string[] {
  const literal = /^(["'`])([^"'`$]+)\1$/;
  return [
    ...[...text.matchAll(/^\s*(?:import|export)\b[^'"`;]*?\bfrom\s*["']([^"']+)["']/gm)].map((m) => m[1]!),
    ...[...text.matchAll(/^\s*import\s*["']([^"']+)["']/gm)].map((m) => m[1]!),
    ...[...text.matchAll(/(?<![\w$])(?:import|require)\s*\(\s*([^)]*?)\s*\)/g)]
      .filter((m) => !/\btypeof\s+$/.test(text.slice(Math.max(0, m.index - 12), m.index))) // `typeof import("x")`: a type
      .map((m) => literal.exec(m[1]!)?.[2] ?? "<computed>"),
  ];
}

const feature = (rel: string) => (rel.includes("/") ? rel.split("/")[0]! : null);
const isEdge = (rel: string) => /(^|\/)(routes|tools)\.ts$/.test(rel) || rel === "app.ts" || rel === "http-schemas.ts" || rel.startsWith("mcp/");
const mayTouchSql = (rel: string) => rel.startsWith("db/") || rel.endsWith("/store.ts");
const isStore = (spec: string) => /(^|\/)store\.ts$/.test(spec);

/**
 * The code without its comments, as TypeScript's own parser reads it (strings, templates and regular
 * expressions kept whole: a `//` inside one of them is no comment). Memoized: several rules read each file.
 */
const printer = ts.createPrinter({ removeComments: true });
const withoutComments = new Map<string, string>();
function codeOf(text: string): string {
  let code = withoutComments.get(text);
  if (code === undefined) {
    code = printer.printFile(ts.createSourceFile("file.ts", text, ts.ScriptTarget.Latest, false, ts.ScriptKind.TS));
    withoutComments.set(text, code);
  }
  return code;
}

/** Each rule as a function of one file: what it finds wrong there (nothing: the file keeps the rule). */
const rules = {
  libImportsOnlyLib: (f: SourceFile) =>
    f.rel.startsWith("lib/")
      ? specifiersOf(f.text)
          .filter((s) => s === "<computed>" || (s.startsWith(".") && !resolveLocal(f.path, s).startsWith("lib/")))
          .map((s) => (s === "<computed>" ? s : resolveLocal(f.path, s)))
      : [],
  webOnlyAtEdges: (f: SourceFile) =>
    isEdge(f.rel) ? [] : importsOf(f).filter((s) => s === "elysia" || s.startsWith("@elysiajs/") || s.startsWith("@modelcontextprotocol/") || s === "<computed>"),
  envOnlyInConfig: (f: SourceFile) => {
    if (f.rel === "config.ts") return [];
    const code = codeOf(f.text);
    const reads = [
      /\b(?:process|Bun)\s*(?:\??\.\s*env\b|\[\s*["'`]env["'`]\s*\])/,
      /\bimport\.meta\.env\b/,
      /\{[^}]*\benv\b[^}]*\}\s*(?:=\s*(?:process|Bun)\b|from\s*["'](?:node:)?process["'])/,
    ];
    return reads.filter((r) => r.test(code)).map(String);
  },
  sqlOnlyInStores: (f: SourceFile) => {
    if (mayTouchSql(f.rel)) return [];
    const code = codeOf(f.text);
    const found: string[] = importsOf(f).filter((s) => s === "bun:sqlite" || s === "<computed>");
    // The handle may be passed to db/ (migrate, backup), never used: no statement calls on it, however reached.
    if (/\bsqlite\b\s*(?:\?\.|\.)\s*(?:query|prepare|run|exec|transaction)\b/.test(code)) found.push("a statement on the handle");
    if (/\{[^}]*\bsqlite\b[^}]*\}\s*=|\[\s*["'`]sqlite["'`]\s*\]/.test(code)) found.push("the handle taken out of the db");
    if (/["'`]\s*(?:SELECT\s+[\w*]|INSERT\s+(?:OR\s+\w+\s+)?INTO\b|UPDATE\s+\w+\s+SET\b|DELETE\s+FROM\b|CREATE\s+(?:TABLE|INDEX)\b|PRAGMA\s+\w)/.test(code)) found.push("SQL text");
    return found;
  },
  noOtherFeaturesStore: (f: SourceFile) => importsOf(f).filter((s) => isStore(s) && feature(s) !== feature(f.rel)),
  /** docs/decisions.md "Store SQL and a later PostgreSQL store": SQLite-only spellings that have a standard twin. */
  portableStoreSql: (f: SourceFile) =>
    f.rel.endsWith("store.ts")
      ? [/\bINSERT\s+OR\s+(?:IGNORE|REPLACE|ABORT|FAIL|ROLLBACK)\b/, /\bREPLACE\s+INTO\b/, /\bLIMIT\s+-1\b/, /\b(?:strftime|datetime|julianday|unixepoch|last_insert_rowid|changes)\s*\(/]
          .filter((r) => r.test(codeOf(f.text)))
          .map(String)
      : [],
  edgesCallDomainNotStore: (f: SourceFile) => (/(^|\/)(routes|tools)\.ts$/.test(f.rel) || f.rel === "app.ts" ? importsOf(f).filter(isStore) : []),
};

describe("architecture (STYLE.md)", () => {
  test("there are files to check", () => {
    expect(files.length).toBeGreaterThan(10);
  });

  const broken = (rule: (f: SourceFile) => string[]) => files.flatMap((f) => rule(f).map((what) => `${f.rel}: ${what}`));

  test("lib/ imports nothing from the rest of src/", () => expect(broken(rules.libImportsOnlyLib)).toEqual([]));
  test("only edges, app.ts and mcp/ import elysia or the MCP SDK", () => expect(broken(rules.webOnlyAtEdges)).toEqual([]));
  test("only config.ts reads the environment", () => expect(broken(rules.envOnlyInConfig)).toEqual([]));
  test("SQL only in store.ts files and db/", () => expect(broken(rules.sqlOnlyInStores)).toEqual([]));
  test("a feature never imports another feature's store", () => expect(broken(rules.noOtherFeaturesStore)).toEqual([]));
  test("edges (routes.ts, tools.ts, app.ts) reach the store only through domain functions", () =>
    expect(broken(rules.edgesCallDomainNotStore)).toEqual([]));

  test("store SQL keeps to forms a PostgreSQL store can share (docs/decisions.md)", () => expect(broken(rules.portableStoreSql)).toEqual([]));

  test("the rules see through other spellings of the same import or read", () => {
    // Scratch files that are not on disk: each line is one way around a rule that a plain reading would miss.
    const at = (rel: string, text: string): SourceFile => ({ path: join(SRC, rel), rel, text });
    const cases: [keyof typeof rules, SourceFile][] = [
      ["noOtherFeaturesStore", at("wallets/x.ts", 'import { setOwnerTier } from "../paygate/store";')],
      ["noOtherFeaturesStore", at("wallets/x.ts", 'const s = require("../webhooks/store.ts");')],
      ["noOtherFeaturesStore", at("wallets/x.ts", "const s = await import(`../auth/store.ts`);")],
      ["noOtherFeaturesStore", at("wallets/x.ts", 'export { findToken } from "../auth/store.ts";')],
      ["libImportsOnlyLib", at("lib/x.ts", 'import { AppError } from "../errors";')],
      ["libImportsOnlyLib", at("lib/x.ts", "const m = await import(name);")],
      ["webOnlyAtEdges", at("wallets/x.ts", 'const { Elysia } = require("elysia");')],
      ["envOnlyInConfig", at("wallets/x.ts", 'const home = process["env"].HOME;')],
      ["envOnlyInConfig", at("wallets/x.ts", "const port = Bun.env.PORT;")],
      ["envOnlyInConfig", at("wallets/x.ts", 'import { env } from "node:process";')],
      ["envOnlyInConfig", at("wallets/x.ts", "const { env } = process;")],
      ["envOnlyInConfig", at("wallets/x.ts", 'const u = "a//b", h = process.env.HOME;')],
      ["envOnlyInConfig", at("wallets/x.ts", 'const g = "/*"; const port = Bun.env.PORT; const e = "*/";')],
      ["noOtherFeaturesStore", at("wallets/x.ts", 'import { holdsLiveToken } from "../auth/store.js";')],
      ["envOnlyInConfig", at("wallets/x.ts", 'const p = s.replace(/^\\//, ""), port = process.env.PORT;')],
      ["envOnlyInConfig", at("wallets/x.ts", 'const q = s.replace(/[\\\\"]/g, "");\nconst u = "http://x", port = Bun.env.PORT;')],
      ["sqlOnlyInStores", at("wallets/x.ts", 'import { Database } from "bun:sqlite";')],
      ["sqlOnlyInStores", at("wallets/x.ts", 'const { sqlite } = deps.db;\nsqlite.query("SELECT 1");')],
      ["sqlOnlyInStores", at("wallets/x.ts", 'deps.db["sqlite"].run("DELETE FROM tokens");')],
      ["sqlOnlyInStores", at("wallets/x.ts", "const statement = `SELECT id FROM products`;")],
      ["edgesCallDomainNotStore", at("paygate/routes.ts", 'import * as store from "./store.ts";')],
      ["portableStoreSql", at("ledger/store.ts", 'db.sqlite.query("INSERT OR IGNORE INTO t (a) VALUES (?)");')],
      ["portableStoreSql", at("mcp/store.ts", "const q = `SELECT id FROM t ORDER BY at LIMIT -1 OFFSET ?`;")],
      ["edgesCallDomainNotStore", at("wallets/tools.ts", 'import { saveWallet } from "./store";')],
    ];
    expect(cases.filter(([rule, file]) => rules[rule](file).length === 0).map(([rule, file]) => `${rule}: ${file.text}`)).toEqual([]);
    // And what the code does lawfully stays lawful.
    const lawful: [keyof typeof rules, SourceFile][] = [
      ["sqlOnlyInStores", at("cli/x.ts", "migrate(db.sqlite, clock.now()); // SELECT in a comment is prose")],
      ["envOnlyInConfig", at("wallets/x.ts", "const environment = deps.config.network; // process.env is config's")],
      ["envOnlyInConfig", at("wallets/x.ts", 'const a = /"/;\n// a comment naming process.env')],
      ["libImportsOnlyLib", at("lib/x.ts", 'import { sha256 } from "@noble/hashes/sha2.js";\nimport { x } from "./encoding.ts";')],
      ["noOtherFeaturesStore", at("auth/x.ts", 'import * as store from "./store.ts";')],
    ];
    expect(lawful.filter(([rule, file]) => rules[rule](file).length > 0).map(([rule, file]) => `${rule}: ${file.text}`)).toEqual([]);
  });

  test("a custodial key leaves the service only through the operator's `wallets export` command", () => {
    // ledger.md: a secret key is never returned, logged or exported by any tool.
    const users = files.filter((f) => f.rel !== "wallets/custody.ts" && /\bexportSecretKey\b/.test(f.text)).map((f) => f.rel);
    expect(users).toEqual(["cli/wallets.ts"]);
  });

  test("no `export *` barrels", () => {
    for (const f of files) expect({ file: f.rel, barrel: /export\s+\*/.test(f.text) }).toEqual({ file: f.rel, barrel: false });
  });

  test("one error vocabulary: a VALIDATION_ERROR names its fields (details), as spec/README.md's catalogue says", () => {
    const bare: string[] = [];
    for (const f of files) {
      for (const m of f.text.matchAll(/new AppError\(\s*"VALIDATION_ERROR"/g)) {
        // The statement's arguments, up to its end, must carry details: use fieldError / invalidField, or pass them.
        if (!f.text.slice(m.index, f.text.indexOf(";", m.index)).includes("details")) bare.push(`${f.rel}:${f.text.slice(0, m.index).split("\n").length}`);
      }
    }
    expect(bare).toEqual([]);
  });

  test("every file starts with a sentence saying what it is for", () => {
    for (const f of files.filter((f) => !f.rel.endsWith(".sql"))) {
      const first = f.text.split("\n").find((l) => l.trim() !== "" && !l.startsWith("#!"));
      expect({ file: f.rel, commented: first?.startsWith("//") ?? false }).toEqual({ file: f.rel, commented: true });
    }
  });
});
