// @solana/web3.js names its browser build only in the "browser" field, which the page bundler does not
// apply to this import: the page imports that file by path, with the package's own types.
declare module "@solana/web3.js/lib/index.browser.esm.js" {
  export * from "@solana/web3.js";
}
