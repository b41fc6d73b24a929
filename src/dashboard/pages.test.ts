// The headers the pages' hashed files are served with, whichever way Bun answered for them.
import { describe, expect, test } from "bun:test";
import { assetHeaders } from "./pages.ts";

describe("assetHeaders", () => {
  test("the compiled executable's answer (bare ETag, no caching) is served as the source run's", () => {
    // What Bun's server answers for a file embedded in `bun build --compile` output.
    const compiled = new Headers({ "content-type": "text/css;charset=utf-8", etag: "3gV_TtYzFXw" });
    expect(assetHeaders(compiled)).toEqual({
      "x-content-type-options": "nosniff",
      "content-type": "text/css;charset=utf-8",
      etag: '"3gV_TtYzFXw"',
      "cache-control": "public, max-age=31536000, immutable",
    });
  });

  test("Bun's answer from source is kept as it is", () => {
    const source = new Headers({ "content-type": "text/javascript;charset=utf-8", etag: '"d527aba645b4c5bf"', "cache-control": "public, max-age=31536000, immutable" });
    expect(assetHeaders(source)).toEqual({
      "x-content-type-options": "nosniff",
      "content-type": "text/javascript;charset=utf-8",
      etag: '"d527aba645b4c5bf"',
      "cache-control": "public, max-age=31536000, immutable",
    });
    expect(assetHeaders(new Headers({ etag: 'W/"abc"', "cache-control": "no-cache" }))).toMatchObject({ etag: 'W/"abc"', "cache-control": "no-cache" });
  });
});
