// /docs: the API reference as one static HTML page, rendered here from the OpenAPI document of
// /openapi.json. No script runs on it and nothing is fetched from anywhere else: the page shares its
// origin with the dashboard, whose session cookie any script on this origin could use.
import { createHash } from "node:crypto";

type Schema = {
  type?: string | string[];
  format?: string;
  description?: string;
  properties?: Record<string, Schema>;
  required?: string[];
  items?: Schema;
  anyOf?: Schema[];
  oneOf?: Schema[];
  allOf?: Schema[];
  enum?: unknown[];
  const?: unknown;
  additionalProperties?: boolean | Schema;
  minLength?: number;
  maxLength?: number;
  minimum?: number;
  maximum?: number;
  minItems?: number;
  maxItems?: number;
  pattern?: string;
  default?: unknown;
};
type Parameter = { name: string; in: string; required?: boolean; description?: string; schema?: Schema };
type Content = Record<string, { schema?: Schema }>;
type Operation = {
  summary?: string;
  description?: string;
  tags?: string[];
  security?: Record<string, unknown>[];
  parameters?: Parameter[];
  requestBody?: { content?: Content; required?: boolean };
  responses?: Record<string, { description?: string; content?: Content }>;
};
export type OpenApiDocument = {
  info?: { title?: string; version?: string; description?: string };
  paths?: Record<string, Record<string, Operation>>;
};

const STYLE = `
body{font:15px/1.5 system-ui,sans-serif;margin:0;color:#1d1d1f;background:#fafafa}
main{max-width:960px;margin:0 auto;padding:24px}
h1{margin:0 0 4px}h2{margin-top:40px;border-bottom:1px solid #ddd;text-transform:capitalize}
nav a{margin-right:12px}
section.op{background:#fff;border:1px solid #e3e3e3;border-radius:6px;padding:12px 16px;margin:12px 0}
.method{display:inline-block;min-width:56px;font:600 12px monospace;padding:2px 6px;border-radius:4px;background:#e8eef8;color:#1b4b91;margin-right:4px}
.path{font:600 15px monospace;overflow-wrap:anywhere}
.muted{color:#666}code,.schema{font:13px/1.45 monospace}
.schema ul{list-style:none;margin:0;padding-left:18px}.schema>ul{padding-left:0}
table{border-collapse:collapse}td,th{text-align:left;padding:2px 12px 2px 0;vertical-align:top}
`;

/** The page's headers: no script at all, its one inline style by hash, not framed, not sniffed. */
export const DOCS_HEADERS: Readonly<Record<string, string>> = {
  "content-type": "text/html;charset=utf-8",
  "content-security-policy":
    `default-src 'none'; style-src 'sha256-${createHash("sha256").update(STYLE).digest("base64")}'; ` +
    "base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
  "x-frame-options": "DENY",
  "x-content-type-options": "nosniff",
  "referrer-policy": "no-referrer",
  "cache-control": "no-cache",
};

const escape = (text: string): string =>
  text.replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]!);

const SCHEMA_DEPTH = 8;

/** A schema's type in a word or two: `string (date-time)`, `array of object`, `"a" | "b"`. */
function typeOf(s: Schema): string {
  if (s.const !== undefined) return JSON.stringify(s.const);
  if (s.enum !== undefined) return s.enum.map((v) => JSON.stringify(v)).join(" | ");
  const alternatives = s.anyOf ?? s.oneOf;
  if (alternatives !== undefined) return alternatives.map(typeOf).join(" | ");
  if (s.allOf !== undefined) return s.allOf.map(typeOf).join(" & ");
  const type = Array.isArray(s.type) ? s.type.join(" | ") : (s.type ?? "any");
  if (type === "array") return `array of ${s.items === undefined ? "any" : typeOf(s.items)}`;
  return s.format === undefined ? type : `${type} (${s.format})`;
}

/** Bounds worth knowing before sending: lengths, ranges, item counts, a pattern. */
function limitsOf(s: Schema): string[] {
  const limits: string[] = [];
  if (s.minLength !== undefined || s.maxLength !== undefined) limits.push(`length ${s.minLength ?? 0}–${s.maxLength ?? "∞"}`);
  if (s.minimum !== undefined || s.maximum !== undefined) limits.push(`${s.minimum ?? "−∞"} to ${s.maximum ?? "∞"}`);
  if (s.minItems !== undefined || s.maxItems !== undefined) limits.push(`${s.minItems ?? 0}–${s.maxItems ?? "∞"} items`);
  if (s.pattern !== undefined) limits.push(`pattern ${s.pattern}`);
  return limits;
}

/** The object's fields (and those of objects inside it, arrays' items included), one per line. */
function fieldsOf(s: Schema, depth: number): string {
  const inner = s.type === "array" && s.items !== undefined ? s.items : s;
  if (inner.properties === undefined || depth >= SCHEMA_DEPTH) return "";
  const required = new Set(inner.required ?? []);
  const items = Object.entries(inner.properties).map(([name, field]) => {
    const notes = [...limitsOf(field), ...(field.description === undefined ? [] : [field.description])];
    return (
      `<li>${escape(name)}${required.has(name) ? "" : "?"}: <span class="muted">${escape(typeOf(field))}</span>` +
      `${notes.length > 0 ? ` <span class="muted">— ${escape(notes.join("; "))}</span>` : ""}${fieldsOf(field, depth + 1)}</li>`
    );
  });
  return `<ul>${items.join("")}</ul>`;
}

function schemaBlock(s: Schema | undefined): string {
  if (s === undefined) return "";
  return `<div class="schema"><code>${escape(typeOf(s))}</code>${fieldsOf(s, 0)}</div>`;
}

const AUTH: Record<string, string> = { bearer: "Authorization: Bearer &lt;session token&gt;", apiKey: "X-API-Key: pk_…", cookie: "the pages' session cookie" };

function operationBlock(methods: string[], path: string, op: Operation): string {
  const parts: string[] = [];
  const id = `${methods[0]}-${path}`.replace(/[^A-Za-z0-9]+/g, "-");
  parts.push(`<section class="op" id="${escape(id)}"><div>${methods.map((m) => `<span class="method">${escape(m)}</span>`).join("")} <span class="path">${escape(path)}</span></div>`);
  if (op.summary !== undefined) parts.push(`<p>${escape(op.summary)}</p>`);
  if (op.description !== undefined) parts.push(`<p class="muted">${escape(op.description)}</p>`);
  const auth = (op.security ?? []).flatMap((s) => Object.keys(s)).map((name) => AUTH[name] ?? escape(name));
  if (auth.length > 0) parts.push(`<p>Authentication: <code>${auth.join("</code> or <code>")}</code></p>`);
  if (op.parameters !== undefined && op.parameters.length > 0) {
    const rows = op.parameters.map((p) => {
      const schema = p.schema ?? {};
      const description = p.description ?? schema.description;
      const notes = [typeOf(schema), ...limitsOf(schema), ...(description === undefined ? [] : [description])];
      return (
        `<tr><td><code>${escape(p.name)}</code></td><td>${escape(p.in)}${p.required ? ", required" : ""}</td>` +
        `<td class="muted">${escape(notes.join("; "))}</td></tr>`
      );
    });
    parts.push(`<p>Parameters</p><table>${rows.join("")}</table>`);
  }
  const body = op.requestBody?.content;
  if (body !== undefined) {
    // One schema whatever the content type: JSON is what every route reads.
    const schema = Object.values(body)[0]?.schema;
    parts.push(`<p>Body (JSON)${op.requestBody?.required ? "" : ", optional"}</p>${schemaBlock(schema)}`);
  }
  const responses = Object.entries(op.responses ?? {});
  const answers = responses.filter(([status]) => status.startsWith("2"));
  const errors = responses.filter(([status]) => !status.startsWith("2")).map(([status]) => status);
  for (const [status, response] of answers) {
    const json = response.content?.["application/json"]?.schema;
    parts.push(`<p>${escape(status)}</p>${json === undefined && response.content?.["text/html"] !== undefined ? `<p class="muted">${escape(response.description ?? "HTML")}</p>` : schemaBlock(json)}`);
  }
  if (errors.length > 0) parts.push(`<p class="muted">Errors: ${escape(errors.join(", "))}, as <code>{ error, code, retryAfter?, details? }</code></p>`);
  parts.push("</section>");
  return parts.join("");
}

/** The whole page: operations grouped by tag, in the document's order; one block for methods that share a path's description. */
export function renderDocsPage(doc: OpenApiDocument): string {
  const byTag = new Map<string, { methods: string[]; path: string; op: Operation }[]>();
  for (const [path, operations] of Object.entries(doc.paths ?? {})) {
    for (const [method, op] of Object.entries(operations)) {
      const tag = op.tags?.[0] ?? "other";
      const list = byTag.get(tag) ?? [];
      byTag.set(tag, list);
      const same = list.find((e) => e.path === path && e.op.summary === op.summary && e.op.description === op.description);
      if (same !== undefined) same.methods.push(method.toUpperCase());
      else list.push({ methods: [method.toUpperCase()], path, op });
    }
  }
  const title = escape(doc.info?.title ?? "API");
  const sections = [...byTag].map(
    ([tag, ops]) => `<h2 id="${escape(tag)}">${escape(tag)}</h2>${ops.map((o) => operationBlock(o.methods, o.path, o.op)).join("")}`,
  );
  return (
    `<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1">` +
    `<title>${title} API</title><style>${STYLE}</style></head><body><main>` +
    `<h1>${title} API <span class="muted">${escape(doc.info?.version ?? "")}</span></h1>` +
    `<p>${escape(doc.info?.description ?? "")} The OpenAPI document: <a href="/openapi.json">/openapi.json</a>.</p>` +
    `<nav>${[...byTag.keys()].map((tag) => `<a href="#${escape(tag)}">${escape(tag)}</a>`).join("")}</nav>` +
    `${sections.join("")}</main></body></html>`
  );
}
