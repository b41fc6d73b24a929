// HTTP schemas and body checks that every feature's routes share: the catalogue's error body, whole numbers
// in query strings, and the owner bodies' own check for unknown fields.
import { t } from "elysia";
import { AppError } from "./errors.ts";
import { firstCharacters } from "./lib/text.ts";

/**
 * The error body of spec/README.md, for the OpenAPI document of every route group (errors are answered
 * by errors.ts as ready responses, so it validates nothing). Closed as written, not only once Elysia has
 * completed it on some route's first run: the document is the same whatever was answered before.
 */
export const ErrorBody = t.Object(
  { error: t.String(), code: t.String(), retryAfter: t.Optional(t.Integer()), details: t.Optional(t.Unknown()) },
  { additionalProperties: false },
);

/**
 * An optional whole number in a query string: decimal digits only. Elysia's own numbers take whatever
 * `Number()` reads (`0x10` as 16, `1e1`, `0b11`, ` 1 `), which the owner did not mean; its bounds are the
 * domain's to check (requirePage, the stats' days), which name the field and the range.
 */
export function QueryInteger(field: string, minimum: number, maximum?: number, description?: string) {
  const range = maximum === undefined ? `${minimum} or more` : `${minimum} to ${maximum}`;
  return t.Optional(
    t.Transform(t.String({ pattern: "^[0-9]{1,16}$", title: field, description: `${description ?? range} (decimal digits)` }))
      .Decode((digits) => Number(digits))
      .Encode((value) => String(value)),
  );
}

/**
 * An owner's body's own check, before its schema: a JSON object naming only known fields, sent as
 * application/json. For a PATCH (a partial object, which Elysia would otherwise make `{}` of an array, a
 * string or a form and answer 200 with nothing changed), and for a POST, whose unknown fields Elysia would
 * drop: `enabled: false` on a new endpoint, or a misspelt field, would be ignored without a word.
 */
export function knownFieldsOnly(fields: readonly string[]) {
  return ({ body, request }: { body: unknown; request: Request }) => {
    // A form (urlencoded or multipart) parses to an object too: only JSON is a PATCH body here.
    const type = request.headers.get("content-type")?.split(";")[0]?.trim().toLowerCase();
    if (type !== "application/json" || typeof body !== "object" || body === null || Array.isArray(body)) {
      throw new AppError("VALIDATION_ERROR", "invalid body", { details: { fields: [{ field: "body", message: "must be a JSON object" }] } });
    }
    const unknown = Object.keys(body).filter((key) => !fields.includes(key));
    if (unknown.length > 0) {
      throw new AppError("VALIDATION_ERROR", "invalid body", {
        details: { fields: unknown.slice(0, 10).map((key) => ({ field: firstCharacters(key, 100), message: `unknown field; known: ${fields.join(", ")}` })) },
      });
    }
  };
}
