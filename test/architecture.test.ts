// Enforces STYLE.md's shape: import directions, where SQL and the environment may be touched, no barrels.
import { describe, expect, test } from "bun:test";
import { readdirSync, readFileSync, statSync } from "node:fs";
import { join, relative, dirname, resolve } from "node:path";

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

/** Every module specifier imported (static, dynamic, re-export), resolved to a src-relative path when local. */
function importsOf(file: { path: string; text: string }): string[] {
  const specs = [
    ...file.text.matchAll(/^\s*(?:import|export)\b[^'"]*?from\s*["']([^"']+)["']/gm),
    ...file.text.matchAll(/^\s*import\s*["']([^"']+)["']/gm),
    ...file.text.matchAll(/\bimport\(\s*["']([^"']+)["']\s*\)/g),
  ].map((m) => m[1]!);
  return specs.map((s) => (s.startsWith(".") ? relative(SRC, resolve(dirname(file.path), s)) : s));
}

const feature = (rel: string) => (rel.includes("/") ? rel.split("/")[0]! : null);
const isEdge = (rel: string) => /(^|\/)(routes|tools)\.ts$/.test(rel) || rel === "app.ts" || rel.startsWith("mcp/");
const mayTouchSql = (rel: string) => rel.startsWith("db/") || rel.endsWith("/store.ts");

describe("architecture (STYLE.md)", () => {
  test("there are files to check", () => {
    expect(files.length).toBeGreaterThan(10);
  });

  test("lib/ imports nothing from the rest of src/", () => {
    for (const f of files.filter((f) => f.rel.startsWith("lib/"))) {
      for (const spec of importsOf(f).filter((s) => s.endsWith(".ts") || s.startsWith(".."))) {
        expect({ file: f.rel, spec, insideLib: spec.startsWith("lib/") }).toEqual({ file: f.rel, spec, insideLib: true });
      }
    }
  });

  test("only edges, app.ts and mcp/ import elysia or the MCP SDK", () => {
    for (const f of files) {
      const web = importsOf(f).filter((s) => s === "elysia" || s.startsWith("@elysiajs/") || s.startsWith("@modelcontextprotocol/"));
      if (web.length > 0) expect({ file: f.rel, edge: isEdge(f.rel) }).toEqual({ file: f.rel, edge: true });
    }
  });

  test("only config.ts reads the environment", () => {
    for (const f of files.filter((f) => f.rel !== "config.ts")) {
      const reads = /\bprocess\.env\b|\bBun\.env\b|\bimport\.meta\.env\b/.test(f.text);
      expect({ file: f.rel, readsEnv: reads }).toEqual({ file: f.rel, readsEnv: false });
    }
  });

  test("SQL only in store.ts files and db/", () => {
    for (const f of files.filter((f) => !mayTouchSql(f.rel))) {
      const sql = importsOf(f).includes("bun:sqlite") || /\.sqlite\b\s*\.\s*(query|prepare|run|exec|transaction)\b/.test(f.text);
      expect({ file: f.rel, sql }).toEqual({ file: f.rel, sql: false });
    }
  });

  test("a feature never imports another feature's store", () => {
    for (const f of files) {
      for (const spec of importsOf(f)) {
        if (!spec.endsWith("/store.ts")) continue;
        expect({ file: f.rel, spec, sameFeature: feature(spec) === feature(f.rel) }).toEqual({ file: f.rel, spec, sameFeature: true });
      }
    }
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
