// Loaded before every test file (bunfig.toml): a bare `bun test` gets the same 60 s default per test as
// `npm test` (server tests spawn real processes on a small machine; Bun's own default is 5 s).
import { setDefaultTimeout } from "bun:test";

setDefaultTimeout(60_000);
