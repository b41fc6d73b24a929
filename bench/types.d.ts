// autocannon ships no type declarations; bench/support.ts types the part it uses where it loads it.
declare module "autocannon";
