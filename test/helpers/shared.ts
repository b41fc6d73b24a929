// The product contract beside the checkout (`../shared`: spec/ and the Ed25519 test vectors), read by the
// tests that hold the code to it. A checkout without it fails those tests with a message saying so.
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";

const SHARED = join(import.meta.dir, "../../../shared");

/** The text of `../shared/<path>`; throws, saying where the folder belongs, when it is not there. */
export function readShared(path: string): string {
  const file = join(SHARED, path);
  if (!existsSync(file)) {
    throw new Error(
      `${file} is missing: the tests read the product contract (spec/ and vectors/) from a folder named "shared" ` +
        "beside this checkout, as CI has it; see the README's Development section",
    );
  }
  return readFileSync(file, "utf8");
}
